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

#endif
