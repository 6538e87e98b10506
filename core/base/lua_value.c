/* Lua values -> gf_value trees, and gf_lua_eval. See <ganflow/lua.h>.
 * With lua.c, the only files of core/ that include Lua headers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <ganflow/err.h>
#include <ganflow/lua.h>

#include "lua_value.h"

#define MAX_DEPTH 64

/* ---- search path ---- */

const char *gf_lua_path(void)
{
	static char path[4096];
	static int done;
	if (!done) {
		const char *env = getenv("GANFLOW_LUA_PATH");
		snprintf(path, sizeof(path), "%s%s%s/?.lua;%s/?/init.lua;%s/?.lua;%s/?/init.lua",
		         env ? env : "", env ? ";" : "", GF_LUA_BUILD_DIR, GF_LUA_BUILD_DIR,
		         GF_LUA_INSTALL_DIR, GF_LUA_INSTALL_DIR);
		done = 1;
	}
	return path;
}

void gf_lua_set_path(lua_State *L)
{
	lua_getglobal(L, "package");
	lua_getfield(L, -1, "path");
	const char *old = lua_tostring(L, -1);
	lua_pushfstring(L, "%s;%s", gf_lua_path(), old ? old : "");
	lua_setfield(L, -3, "path");
	lua_pop(L, 2);
}

/* ---- Lua -> gf_value ---- */

/* Appends ".key" or "[i]" to a path for error messages. */
static void child_path(char *dst, size_t size, const char *path, lua_State *L, int keyidx)
{
	if (lua_type(L, keyidx) == LUA_TNUMBER && lua_isinteger(L, keyidx))
		snprintf(dst, size, "%s[%lld]", path, (long long)lua_tointeger(L, keyidx));
	else if (lua_type(L, keyidx) == LUA_TSTRING)
		snprintf(dst, size, "%s.%s", path, lua_tostring(L, keyidx));
	else
		snprintf(dst, size, "%s[?]", path);
}

/* 1 when the table at idx has exactly the keys 1..n (n may be 0). */
static int is_sequence(lua_State *L, int idx, lua_Integer *n)
{
	lua_Integer count = 0;
	*n = (lua_Integer)lua_rawlen(L, idx);
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		lua_pop(L, 1);
		if (!lua_isinteger(L, -1)) {
			lua_pop(L, 1);
			return 0;
		}
		lua_Integer k = lua_tointeger(L, -1);
		if (k < 1 || k > *n) {
			lua_pop(L, 1);
			return 0;
		}
		count++;
	}
	return count == *n;
}

static int convert(lua_State *L, int idx, const char *path, int depth, gf_value *out, char *err, size_t errsize)
{
	idx = lua_absindex(L, idx);
	*out = gf_value_nil();
	switch (lua_type(L, idx)) {
	case LUA_TNIL:
		return 0;
	case LUA_TBOOLEAN:
		*out = gf_value_bool(lua_toboolean(L, idx));
		return 0;
	case LUA_TNUMBER:
		*out = lua_isinteger(L, idx) ? gf_value_int(lua_tointeger(L, idx)) : gf_value_num(lua_tonumber(L, idx));
		return 0;
	case LUA_TSTRING:
		*out = gf_value_str(lua_tostring(L, idx));
		return out->type == GF_VSTR ? 0 : -ENOMEM;
	case LUA_TTABLE:
		break;
	default:
		snprintf(err, errsize, "%s: a %s cannot be a parameter (only nil, booleans, numbers, strings and tables)",
		         path, lua_typename(L, lua_type(L, idx)));
		return GF_ELUA;
	}
	if (depth >= MAX_DEPTH) {
		snprintf(err, errsize, "%s: tables nested deeper than %d (a cycle?)", path, MAX_DEPTH);
		return GF_ELUA;
	}
	if (!lua_checkstack(L, 4)) {
		snprintf(err, errsize, "%s: Lua stack exhausted", path);
		return GF_ELUA;
	}
	char sub[512];
	lua_Integer n;
	if (is_sequence(L, idx, &n)) {
		*out = gf_value_list();
		for (lua_Integer i = 1; i <= n; i++) {
			gf_value child;
			lua_rawgeti(L, idx, i);
			snprintf(sub, sizeof(sub), "%s[%lld]", path, (long long)i);
			int rc = convert(L, -1, sub, depth + 1, &child, err, errsize);
			lua_pop(L, 1);
			if (rc == 0)
				rc = gf_value_append(out, child);
			if (rc) {
				gf_value_free(out);
				return rc;
			}
		}
		return 0;
	}
	*out = gf_value_map();
	/* Array items first, in order, so maps keep a stable, readable order. */
	lua_Integer len = (lua_Integer)lua_rawlen(L, idx);
	for (lua_Integer i = 1; i <= len; i++) {
		gf_value child;
		char key[24];
		lua_rawgeti(L, idx, i);
		snprintf(sub, sizeof(sub), "%s[%lld]", path, (long long)i);
		snprintf(key, sizeof(key), "%lld", (long long)i);
		int rc = convert(L, -1, sub, depth + 1, &child, err, errsize);
		lua_pop(L, 1);
		if (rc == 0)
			rc = gf_value_set(out, key, child);
		if (rc) {
			gf_value_free(out);
			return rc;
		}
	}
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		int kt = lua_type(L, -2);
		if (kt == LUA_TNUMBER && lua_isinteger(L, -2)) {
			lua_Integer k = lua_tointeger(L, -2);
			if (k >= 1 && k <= len) {
				lua_pop(L, 1);
				continue;
			}
		}
		child_path(sub, sizeof(sub), path, L, -2);
		if (kt != LUA_TSTRING && !(kt == LUA_TNUMBER && lua_isinteger(L, -2))) {
			snprintf(err, errsize, "%s: table keys must be strings or integers", sub);
			lua_pop(L, 2);
			gf_value_free(out);
			return GF_ELUA;
		}
		char key[256];
		if (kt == LUA_TSTRING)
			snprintf(key, sizeof(key), "%s", lua_tostring(L, -2));
		else
			snprintf(key, sizeof(key), "%lld", (long long)lua_tointeger(L, -2));
		gf_value child;
		int rc = convert(L, -1, sub, depth + 1, &child, err, errsize);
		lua_pop(L, 1);
		if (rc == 0)
			rc = gf_value_set(out, key, child);
		if (rc) {
			lua_pop(L, 1);
			gf_value_free(out);
			return rc;
		}
	}
	return 0;
}

int gf_lua_to_value(lua_State *L, int idx, const char *path, gf_value *out, char *err, size_t errsize)
{
	int top = lua_gettop(L);
	int rc = convert(L, idx, path, 0, out, err, errsize);
	lua_settop(L, top);
	if (rc == -ENOMEM)
		snprintf(err, errsize, "%s: out of memory", path);
	return rc;
}

/* ---- gf_value -> Lua ---- */

static int integer_key(const char *k, lua_Integer *out)
{
	char *end;
	long long v = strtoll(k, &end, 10);
	if (!*k || *end || v < 1)
		return 0;
	*out = (lua_Integer)v;
	return 1;
}

void gf_lua_push_value(lua_State *L, const gf_value *v)
{
	luaL_checkstack(L, 4, "gf_lua_push_value");
	switch (v ? v->type : GF_VNIL) {
	case GF_VNIL: lua_pushnil(L); break;
	case GF_VBOOL: lua_pushboolean(L, v->u.b); break;
	case GF_VINT: lua_pushinteger(L, (lua_Integer)v->u.i); break;
	case GF_VNUM: lua_pushnumber(L, v->u.n); break;
	case GF_VSTR: lua_pushstring(L, v->u.s); break;
	case GF_VLIST:
		lua_createtable(L, (int)v->u.c.len, 0);
		for (size_t i = 0; i < v->u.c.len; i++) {
			gf_lua_push_value(L, &v->u.c.items[i]);
			lua_rawseti(L, -2, (lua_Integer)i + 1);
		}
		break;
	case GF_VMAP:
		lua_createtable(L, 0, (int)v->u.c.len);
		for (size_t i = 0; i < v->u.c.len; i++) {
			lua_Integer k;
			gf_lua_push_value(L, &v->u.c.items[i]);
			if (integer_key(v->u.c.keys[i], &k))
				lua_rawseti(L, -2, k);
			else
				lua_setfield(L, -2, v->u.c.keys[i]);
		}
		break;
	}
}

/* ---- gf_lua_eval ---- */

static int traceback(lua_State *L)
{
	luaL_traceback(L, L, lua_tostring(L, 1), 1);
	return 1;
}

int gf_lua_eval(const char *code, gf_value *out)
{
	*out = gf_value_nil();
	lua_State *L = luaL_newstate();
	if (!L)
		return gf_seterr(-ENOMEM, "cannot create a Lua state");
	luaL_openlibs(L);
	gf_lua_set_path(L);
	lua_pushcfunction(L, traceback);
	int rc = 0;
	if (luaL_loadbuffer(L, code, strlen(code), "=eval") != LUA_OK ||
	    lua_pcall(L, 0, 1, 1) != LUA_OK) {
		rc = gf_seterr(GF_ELUA, "%s", lua_tostring(L, -1));
	} else {
		char err[512];
		rc = gf_lua_to_value(L, -1, "result", out, err, sizeof(err));
		if (rc)
			gf_seterr(GF_ELUA, "%s", err);
	}
	lua_close(L);
	return rc;
}
