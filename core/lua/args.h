/* Internal: the arguments of a pipeline run, `ganflow run PIPELINE.lua
 * key=value ...`, and the rules they follow.
 *
 * The command line is a list of key=value pairs (the last of a repeated
 * key wins). The script reads them, by gf.arg (its own keys) or as gf.run
 * options (gf_run_keys, rundir.h); a value read is marked used. A key that
 * nothing read by the time gf.run starts is a typo: the run is refused
 * with the closest key the script knows suggested (a run option or a key
 * gf.arg asked for); one still unread when the script ends draws a
 * warning. rundir.c adds the keys a resumed run restores from its
 * args.txt. Nothing here touches Lua; lua.c converts the values.
 */
#ifndef GF_ARGS_H
#define GF_ARGS_H

#include <stddef.h>

#include <ganflow/value.h>

/* One key=value; used: read by the pipeline (gf.arg, or a run option);
 * by_arg: read through gf.arg (an option of the pipeline's own). */
typedef struct gf_run_arg {
	char *key;
	char *val;
	int used;
	int by_arg;
} gf_run_arg;

typedef struct gf_args {
	gf_run_arg *a;          /* (n) keys and values malloc'ed, the array too */
	int n;
	char *asked[64];        /* keys gf.arg asked for that the command line lacks */
	int nasked;
} gf_args;

/* Splits argv[0..argc) ("key=value" each) into *out (zeroed first; free
 * with gf_args_free, also after a failure). Returns 0, GF_EPARAM with
 * "argument 'X' is not of the form key=value" in err, or -ENOMEM. */
int gf_args_parse(gf_args *out, int argc, char *const *argv, char *err, size_t errsize);
void gf_args_free(gf_args *a);

/* The entry of key, or NULL. */
gf_run_arg *gf_args_find(gf_args *a, const char *key);

/* The pipeline reads key: its value (marked used), or NULL when the
 * command line lacks it; with `remember`, an absent key is kept as a
 * suggestion for a mistyped one (gf.arg does this). */
const char *gf_args_use(gf_args *a, const char *key, int remember);

/* Appends key=value (both malloc'ed: ownership moves, also on failure).
 * Returns 0 or -ENOMEM. */
int gf_args_add(gf_args *a, char *key, char *val);

/* Before the run: 0 when every key was read, else GF_EPARAM with "argument
 * 'K' (command line) is used by the pipeline neither as a gf.run option
 * nor through gf.arg; did you mean 'X'?" in err for the first unread one,
 * X the closest of known[0..nknown) and the keys gf.arg asked for. */
int gf_args_check_used(const gf_args *a, const char *const *known, size_t nknown, char *err, size_t errsize);

/* A key of a table of options (gf.run {...}, gf.connect's): 0 when known
 * lists it, else GF_EPARAM with "WHAT: unknown option 'K'; did you mean
 * 'X'?" in err. */
int gf_args_check_option(const char *what, const char *key, const char *const *known, size_t nknown, char *err,
                         size_t errsize);

/* After the script: a warning for every key still unread. */
void gf_args_warn_unused(const gf_args *a, const char *const *known, size_t nknown);

/* Where a stage parameter's value came from, for messages that name the
 * parameter: a pipeline passes its own options on (dcgan_fashion.lua's
 * n_dis becomes d_step's d_steps), so the user typed another name. Writes
 * into out the command-line arguments read through gf.arg whose value is
 * v ("n_dis=0"; several joined by " or "), leaving out one named param
 * itself (the user typed that name); returns how many. */
int gf_args_source(const gf_args *a, const char *param, const gf_value *v, char *out, size_t size);

/* Appends to msg (a message of size bytes) ": the pipeline passes the
 * command line's GIVEN as PARAM" when msg is about parameter PARAM
 * ("parameter 'PARAM'" or "(parameter PARAM)"); returns 1 when it did. */
int gf_args_explain(char *msg, size_t size, const char *param, const char *given);

/* "true", "1", "yes", "on" -> 1; "false", "0", "no", "off" -> 0; else -1. */
int gf_args_parse_bool(const char *s, int *out);

#endif
