/* Internal: conversion of Lua values into gf_value trees, shared by
 * lua_value.c (gf_lua_eval) and lua.c (the pipeline runner). Only these two
 * files include Lua headers. */
#ifndef GF_LUA_VALUE_H
#define GF_LUA_VALUE_H

#include <stddef.h>

#include <lua.h>

#include <ganflow/value.h>

/* Converts the Lua value at stack index idx into *out. `path` names the
 * value in error messages ("params", "net"). Returns 0, or GF_ELUA with a
 * message naming the path of the offending entry in err. The Lua stack is
 * left as it was. */
int gf_lua_to_value(lua_State *L, int idx, const char *path, gf_value *out, char *err, size_t errsize);

/* Pushes a gf_value onto the Lua stack (maps become tables with string
 * keys, except the "1".."n" keys, which become integer keys again). */
void gf_lua_push_value(lua_State *L, const gf_value *v);

/* Adds ganflow's Lua search path (gf_lua_path) in front of package.path. */
void gf_lua_set_path(lua_State *L);

#endif
