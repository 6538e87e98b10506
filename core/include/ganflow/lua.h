/* Evaluating Lua into gf_value trees.
 *
 * The only public entry into Lua outside the pipeline runner: evaluates a
 * chunk of Lua (a backbone call, a literal table) and converts its result
 * to a gf_value tree, so C code (the `ganflow sample` command, tests) can
 * instantiate backbones written in Lua without touching the Lua API.
 * `require` finds modules in GANFLOW_LUA_PATH (a Lua path template list),
 * the source tree's luaconf/ and the installed luaconf/.
 *
 * Conversion rules (also used for pipeline scripts): nil, booleans,
 * integers, numbers and strings map to the scalar types; a table whose keys
 * are exactly 1..n is a GF_VLIST; any other table is a GF_VMAP, its array
 * items under the keys "1", "2", ... (see gf_value_arg). Functions, userdata
 * and threads are errors naming the path of the offending entry
 * ("net[3].init"); so are tables nested deeper than 64.
 */
#ifndef GANFLOW_LUA_H
#define GANFLOW_LUA_H

#include <stddef.h>

#include <ganflow/value.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Evaluates `code` ("return require('backbones.dcgan').G{z = 100}") in a
 * fresh Lua state and converts the first value it returns into *out (which
 * the caller releases with gf_value_free). Returns 0, or GF_ELUA with the
 * Lua error (chunk name and line) or the conversion error in gf_errmsg(). */
int gf_lua_eval(const char *code, gf_value *out);

/* Search path template list that `require` uses ("dir/?.lua;dir/?/init.lua;..."),
 * built from GANFLOW_LUA_PATH, the source tree and the install prefix.
 * Returns a static string. */
const char *gf_lua_path(void);

/* ---- pipelines ---- */

typedef enum {
	GF_PIPELINE_OK = 0,
	GF_PIPELINE_ERROR,   /* script error, bad argument or stage failure */
	GF_PIPELINE_SIGINT,  /* stopped by SIGINT (after a graceful drain) */
	GF_PIPELINE_SIGTERM  /* stopped by SIGTERM */
} gf_pipeline_status;

/* Runs the pipeline script `script` (what `ganflow run` does): a fresh Lua
 * state where `require "ganflow"` gives stage / connect / run / arg / rank
 * / world (and the helpers of luaconf/ganflow_ext.lua). args[0..nargs) are
 * "key=value" command-line arguments: the run options (steps, seed, dir,
 * backend, threads, resume) override those the script passes to gf.run;
 * the script reads the others with gf.arg. gf.run also takes grace
 * (seconds a graceful stop may take before it turns hard, default 30) and
 * quiet (no progress line or edge table). Each gf.run creates the run
 * directory, copies the script and the effective arguments into it, runs
 * the graph with a live progress line, SIGINT/SIGTERM handlers (first:
 * graceful stop, second: hard stop, third: exit at once), and prints the
 * edge table.
 * Returns 0, or with a message in err (status, may be NULL, says how it
 * ended):
 *   GF_ELUA    error in the script: "file:line: message" and a traceback
 *   GF_EFAIL   a stage failed: "stage 'NAME' failed: MESSAGE"
 *   GF_ESTOP   interrupted by a signal
 *   GF_EPARAM  a malformed command-line argument
 * Arguments never used by the script are warned about. */
int gf_lua_run_pipeline(const char *script, int nargs, char *const *args, gf_pipeline_status *status, char *err,
                        size_t errsize);

/* Version of the Lua the runtime embeds ("Lua 5.4.4"). Static string. */
const char *gf_lua_version(void);

#ifdef __cplusplus
}
#endif
#endif
