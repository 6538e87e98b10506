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

#ifdef __cplusplus
}
#endif
#endif
