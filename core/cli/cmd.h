/* Subcommands of the `ganflow` command. Each takes argv starting at its own
 * name and returns the exit status. */
#ifndef GANFLOW_CMD_H
#define GANFLOW_CMD_H

int gf_cmd_run(int argc, char **argv);
int gf_cmd_stages(int argc, char **argv);
int gf_cmd_version(int argc, char **argv);
int gf_cmd_dataset(int argc, char **argv);
int gf_cmd_sample(int argc, char **argv);
int gf_cmd_plot(int argc, char **argv);
int gf_cmd_eval(int argc, char **argv);
int gf_cmd_export(int argc, char **argv);
int gf_cmd_weights(int argc, char **argv);

/* Runs `python3 -m module argv[0..nargs)` with the ganflow Python package on
 * PYTHONPATH (cmd_python.c) and returns its exit status; cmd names the
 * subcommand in messages, needs the Debian packages the module imports. */
int gf_cmd_python(const char *cmd, const char *module, const char *needs, int nargs, char *const *argv);

#endif
