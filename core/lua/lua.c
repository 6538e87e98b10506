/* core/lua: running a pipeline script. This folder owns the `ganflow`
 * Lua module and what its functions do (pipeline.c), the arguments of a
 * run and their rules (args.c), and the run directory and resume rules
 * (rundir.c). It may use every layer below it (base, runtime, data, dist,
 * train's checkpoint names) and is used only by the `ganflow` command
 * (core/cli); nothing else in core/ calls up into it.
 *
 * This file is the binding. `ganflow run PIPELINE.lua key=value ...` lands
 * here: the script runs in a fresh Lua 5.4 state where `require "ganflow"`
 * gives
 *
 *	gf.stage "name" { params..., name = "x", workers = n | "auto", rank = r }   a stage instance
 *	gf.connect(a.out, b.inp [, { depth =, capacity =, min =, transport =, address =, timeout =, latency = }])
 *	gf.run { steps =, seed =, dir =, backend =, threads =, resume = }
 *	gf.arg("key", default)   command-line value converted to default's type
 *	gf.rank(), gf.world(), gf.dataset(path)
 *
 * plus whatever luaconf/ganflow_ext.lua adds. It only turns Lua values
 * into C values and C errors into Lua errors raised at the script line
 * that made them: every check happens in C (placement.h, pipeline.c,
 * args.c, rundir.c), stage code never runs inside a Lua call that could
 * unwind through it, and only this file and base/lua_value.c touch the
 * Lua API. docs/runtime.md is the user's guide, docs/dist.md for ranks.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <ganflow/dist.h>
#include <ganflow/dataset.h>
#include <ganflow/err.h>
#include <ganflow/graph.h>
#include <ganflow/lua.h>
#include <ganflow/params.h>
#include <ganflow/ring.h>

#include "../base/lua_value.h"
#include "../dist/placement.h"
#include "args.h"
#include "pipeline.h"
#include "rundir.h"

#ifdef GF_LUA_FUZZ
/* The fuzz target over this file (tests/fuzz/fuzz_lua.c) compiles it with
 * GF_LUA_FUZZ: it sandboxes each new state (no os or io, a memory and an
 * instruction budget), and gf.run stops after validating the pipeline
 * (nothing is created or run). */
void gf_fuzz_lua_setup(lua_State *L);
#endif

#define STAGE_MT "ganflow.stage"
#define PORT_MT "ganflow.port"

struct runner {
	const char *script;
	gf_args args;         /* the command line's key=value (args.c) */
	int rank, world;      /* this process in the run's world */
	gf_placement *pl;     /* the pipeline being declared, NULL before the first gf.stage */
	unsigned gen;         /* bumped for every new pipeline: stale stage objects are refused */
	int runs;             /* gf.run calls so far */
	int failed;           /* a graph failed: err holds the message */
	int interrupted;      /* a graph was stopped by a signal */
	int lock_fd;          /* the run directory's lock (rank 0), -1 when none */
	struct given {        /* stage parameters given a value the command line typed under */
		char inst[64];    /* another name (d_steps = n_dis), for messages that name them */
		char param[64];
		char args[192];   /* "n_dis=0" */
	} given[64];
	int ngiven;
	char err[8192];
};

struct stage_ref {
	int node;             /* placement id */
	unsigned gen;
	char name[64];
	char stage[64];
};

struct port_ref {
	int node;             /* placement id */
	unsigned gen;
	char name[64];  /* instance */
	char port[64];
};

/* ---- helpers ---- */

static struct runner *get_runner(lua_State *L)
{
	return lua_touserdata(L, lua_upvalueindex(1));
}

/* Raises "WHAT: unknown option 'K'; did you mean 'X'?" (args.c) for a
 * key of the option table at idx that known lacks. */
static void check_keys(lua_State *L, int idx, const char *what, const char *const *known, size_t n)
{
	char err[512];
	idx = lua_absindex(L, idx);
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		lua_pop(L, 1);
		if (lua_type(L, -1) != LUA_TSTRING)
			luaL_error(L, "%s: option keys must be names", what);
		if (gf_args_check_option(what, lua_tostring(L, -1), known, n, err, sizeof(err)))
			luaL_error(L, "%s", err);
	}
}

/* ---- gf.stage ---- */

static int stage_tostring(lua_State *L)
{
	struct stage_ref *s = luaL_checkudata(L, 1, STAGE_MT);
	lua_pushfstring(L, "stage '%s' (%s)", s->name, s->stage);
	return 1;
}

static int stage_index(lua_State *L)
{
	struct stage_ref *s = luaL_checkudata(L, 1, STAGE_MT);
	const char *port = luaL_checkstring(L, 2);
	struct port_ref *p = lua_newuserdatauv(L, sizeof(*p), 0);
	memset(p, 0, sizeof(*p));
	p->node = s->node;
	p->gen = s->gen;
	snprintf(p->name, sizeof(p->name), "%s", s->name);
	snprintf(p->port, sizeof(p->port), "%s", port);
	luaL_setmetatable(L, PORT_MT);
	return 1;
}

static int stage_newindex(lua_State *L)
{
	struct stage_ref *s = luaL_checkudata(L, 1, STAGE_MT);
	return luaL_error(L, "stage '%s' is read-only (set parameters in gf.stage \"%s\" { ... })", s->name, s->stage);
}

static int port_tostring(lua_State *L)
{
	struct port_ref *p = luaL_checkudata(L, 1, PORT_MT);
	lua_pushfstring(L, "%s.%s", p->name, p->port);
	return 1;
}

/* A message about a stage parameter names it as the stage does (d_steps)
 * while the user typed the pipeline's option (n_dis=0): with msg, appends
 * where the value of the parameter msg is about came from (args.c); with
 * inst, keeps the parameters of that instance that took a typed value, for
 * the messages of the run (explain_run). */
static void explain_params(struct runner *r, const gf_value *params, const char *inst, char *msg, size_t size)
{
	for (size_t i = 0; params->type == GF_VMAP && i < params->u.c.len; i++) {
		const char *k = params->u.c.keys[i];
		char given[192];
		if (!gf_args_source(&r->args, k, &params->u.c.items[i], given, sizeof(given)))
			continue;
		if (msg && gf_args_explain(msg, size, k, given))
			return;
		if (inst && r->ngiven < (int)(sizeof(r->given) / sizeof(r->given[0]))) {
			struct given *g = &r->given[r->ngiven++];
			snprintf(g->inst, sizeof(g->inst), "%s", inst);
			snprintf(g->param, sizeof(g->param), "%s", k);
			snprintf(g->args, sizeof(g->args), "%s", given);
		}
	}
}

/* The same for a message of the run (a stage's create or run): a
 * parameter of the instance the message names. */
static void explain_run(struct runner *r, char *msg, size_t size)
{
	for (int i = 0; i < r->ngiven; i++) {
		char inst[80];
		snprintf(inst, sizeof(inst), "'%s'", r->given[i].inst);
		if (strstr(msg, inst) && gf_args_explain(msg, size, r->given[i].param, r->given[i].args))
			return;
	}
}

/* gf.stage(name)(params) and gf.stage(name, params) */
static int stage_make(lua_State *L, struct runner *r, const char *stage, int pidx)
{
	gf_value all = gf_value_nil(), params = gf_value_nil();
	char err[2048], name[64];
	int workers = 1, rank = -1;
	if (!lua_isnoneornil(L, pidx) && !lua_istable(L, pidx))
		return luaL_error(L, "gf.stage \"%s\": parameters must be a table, got a %s", stage, luaL_typename(L, pidx));
	if (lua_istable(L, pidx) && gf_lua_to_value(L, pidx, stage, &all, err, sizeof(err)))
		return luaL_error(L, "%s", err);
	int bad = gf_pipeline_stage_keys(stage, &all, &params, name, sizeof(name), &workers, &rank, err, sizeof(err));
	gf_value_free(&all);
	if (bad)
		return luaL_error(L, "%s", err);
	if (!r->pl) {
		if (gf_placement_create(&r->pl, r->rank, r->world)) {
			gf_value_free(&params);
			return luaL_error(L, "out of memory");
		}
		r->gen++;
	}
	int node;
	int rc = gf_placement_add(r->pl, stage, name[0] ? name : NULL, &params, workers, rank, &node);
	if (rc) {
		snprintf(err, sizeof(err), "%s", gf_placement_error(r->pl));
		explain_params(r, &params, NULL, err, sizeof(err));
		gf_value_free(&params);
		return luaL_error(L, "%s", err);
	}
	const char *inst = gf_placement_name(r->pl, node);
	explain_params(r, &params, inst, NULL, 0);
	gf_value_free(&params);
	struct stage_ref *s = lua_newuserdatauv(L, sizeof(*s), 0);
	memset(s, 0, sizeof(*s));
	s->node = node;
	s->gen = r->gen;
	snprintf(s->name, sizeof(s->name), "%s", inst);
	snprintf(s->stage, sizeof(s->stage), "%s", stage);
	luaL_setmetatable(L, STAGE_MT);
	return 1;
}

static int stage_closure(lua_State *L)
{
	struct runner *r = get_runner(L);
	const char *stage = lua_tostring(L, lua_upvalueindex(2));
	return stage_make(L, r, stage, 1);
}

static int l_stage(lua_State *L)
{
	struct runner *r = get_runner(L);
	const char *stage = luaL_checkstring(L, 1);
	if (lua_gettop(L) >= 2)
		return stage_make(L, r, stage, 2);
	lua_pushlightuserdata(L, r);
	lua_pushvalue(L, 1);
	lua_pushcclosure(L, stage_closure, 2);
	return 1;
}

/* ---- gf.connect ---- */

static uint32_t opt_u32(lua_State *L, int idx, const char *key, const char *what)
{
	lua_getfield(L, idx, key);
	uint32_t v = 0;
	if (!lua_isnil(L, -1)) {
		int isint;
		lua_Integer i = lua_tointegerx(L, -1, &isint);
		if (!isint || i < 1 || i > (lua_Integer)GF_RING_MAX_CAPACITY)
			luaL_error(L, "%s: %s must be a positive integer", what, key);
		v = (uint32_t)i;
	}
	lua_pop(L, 1);
	return v;
}

static int l_connect(lua_State *L)
{
	struct runner *r = get_runner(L);
	struct port_ref *a = luaL_testudata(L, 1, PORT_MT);
	struct port_ref *b = luaL_testudata(L, 2, PORT_MT);
	if (!a || !b)
		return luaL_error(L, "gf.connect(from, to): both arguments must be stage ports, such as src.out and sink.inp");
	if (!r->pl || a->gen != r->gen || b->gen != r->gen)
		return luaL_error(L, "gf.connect: port of a stage from a graph that has already run");
	gf_place_opts o = { 0 };
	char what[300], transport[16] = "mpi", address[256] = "", latency[16] = "";
	snprintf(what, sizeof(what), "gf.connect(%s.%s, %s.%s)", a->name, a->port, b->name, b->port);
	if (!lua_isnoneornil(L, 3)) {
		static const char *const known[] = { "depth", "capacity", "min", "transport", "address", "timeout", "latency" };
		luaL_checktype(L, 3, LUA_TTABLE);
		check_keys(L, 3, what, known, 7);
		o.ring.depth = opt_u32(L, 3, "depth", what);
		o.ring.capacity = opt_u32(L, 3, "capacity", what);
		o.ring.min_depth = opt_u32(L, 3, "min", what);
		lua_getfield(L, 3, "transport");
		if (!lua_isnil(L, -1)) {
			const char *t = lua_tostring(L, -1);
			if (!t || (strcmp(t, "mpi") && strcmp(t, "tcp") && strcmp(t, "nccl")))
				return luaL_error(L, "%s: transport must be \"mpi\", \"tcp\" or \"nccl\"", what);
			snprintf(transport, sizeof(transport), "%s", t);
		}
		lua_getfield(L, 3, "address");
		if (!lua_isnil(L, -1)) {
			const char *t = lua_tostring(L, -1);
			if (!t || lua_type(L, -1) != LUA_TSTRING)
				return luaL_error(L, "%s: address must be a string \"host:port\"", what);
			snprintf(address, sizeof(address), "%s", t);
		}
		lua_getfield(L, 3, "timeout");
		if (!lua_isnil(L, -1)) {
			int isnum;
			o.timeout = lua_tonumberx(L, -1, &isnum);
			if (!isnum || o.timeout <= 0)
				return luaL_error(L, "%s: timeout must be a number of seconds > 0", what);
		}
		lua_getfield(L, 3, "latency");
		if (!lua_isnil(L, -1)) {
			const char *t = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
			if (!t || (strcmp(t, "low") && strcmp(t, "relaxed")))
				return luaL_error(L, "%s: latency must be \"low\" or \"relaxed\"", what);
			snprintf(latency, sizeof(latency), "%s", t);
		}
		lua_pop(L, 4);
	}
	o.transport = transport;
	o.address = address;
	o.latency = latency;
	if (gf_placement_connect(r->pl, a->node, a->port, b->node, b->port, &o))
		return luaL_error(L, "%s", gf_placement_error(r->pl));
	return 0;
}

/* ---- gf.arg, gf.rank, gf.world ---- */

/* Pushes arg value s converted to the type of the value at def_idx. */
static void push_converted(lua_State *L, const char *key, const char *s, int def_idx)
{
	switch (lua_type(L, def_idx)) {
	case LUA_TNUMBER:
		if (!lua_stringtonumber(L, s))
			luaL_error(L, "argument %s=%s: expected a number", key, s);
		if (lua_isinteger(L, def_idx) && !lua_isinteger(L, -1)) {
			lua_Number n = lua_tonumber(L, -1);
			lua_pop(L, 1);
			lua_Integer i = 0;
			if (!lua_numbertointeger(n, &i) || (lua_Number)i != n)
				luaL_error(L, "argument %s=%s: expected an integer", key, s);
			lua_pushinteger(L, i);
		}
		return;
	case LUA_TBOOLEAN: {
		int b;
		if (gf_args_parse_bool(s, &b))
			luaL_error(L, "argument %s=%s: expected true or false", key, s);
		lua_pushboolean(L, b);
		return;
	}
	case LUA_TNIL:
	case LUA_TNONE:
	case LUA_TSTRING:
		lua_pushstring(L, s);
		return;
	default:
		luaL_error(L, "gf.arg(\"%s\", default): the default must be a number, boolean, string or nil", key);
	}
}

static int l_arg(lua_State *L)
{
	struct runner *r = get_runner(L);
	const char *key = luaL_checkstring(L, 1);
	const char *val = gf_args_use(&r->args, key, 1);
	if (!val) {
		lua_settop(L, 2);
		return 1;
	}
	push_converted(L, key, val, 2);
	return 1;
}

/* The world comes from core/dist/dist.c: MPI's after `ganflow run` started it
 * under a launcher, the launcher's environment otherwise. */
static int l_rank(lua_State *L)
{
	lua_pushinteger(L, gf_dist_rank());
	return 1;
}

static int l_world(lua_State *L)
{
	lua_pushinteger(L, gf_dist_world());
	return 1;
}

/* gf.dataset(path) -> { count, classes, class_names = {...}, min_height,
 * max_height, min_width, max_width, channels }: a dataset's metadata, so
 * a pipeline can size its networks from its data (biggan_imagenet.lua
 * takes the class count from the dataset). Raises naming the path. */
static int l_dataset(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	gf_dataset *ds;
	if (gf_dataset_open(path, &ds))
		return luaL_error(L, "gf.dataset('%s'): %s", path, gf_errmsg());
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	lua_newtable(L);
	lua_pushinteger(L, (lua_Integer)m->count);
	lua_setfield(L, -2, "count");
	lua_pushinteger(L, (lua_Integer)m->nclasses);
	lua_setfield(L, -2, "classes");
	lua_createtable(L, (int)m->nclasses, 0);
	for (uint32_t i = 0; i < m->nclasses; i++) {
		lua_pushstring(L, m->class_names[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lua_setfield(L, -2, "class_names");
	static const char *const keys[] = { "min_height", "max_height", "min_width", "max_width", "channels" };
	const uint32_t vals[] = { m->min_height, m->max_height, m->min_width, m->max_width, m->max_channels };
	for (int i = 0; i < 5; i++) {
		lua_pushinteger(L, vals[i]);
		lua_setfield(L, -2, keys[i]);
	}
	gf_dataset_close(ds);
	return 1;
}

/* ---- gf.run ---- */

/* Reads option key: from the command line if given there (it wins), else
 * from the table at idx. Pushes the value (nil when absent). */
static void push_option(lua_State *L, struct runner *r, int idx, const char *key, int *from_cli)
{
	const char *val = gf_args_use(&r->args, key, 0);
	*from_cli = val != NULL;
	if (val) {
		lua_pushstring(L, val);
	} else if (idx) {
		lua_getfield(L, idx, key);
	} else {
		lua_pushnil(L);
	}
}

static int64_t option_int(lua_State *L, struct runner *r, int idx, const char *key, int64_t def, int64_t min)
{
	int cli;
	push_option(L, r, idx, key, &cli);
	int64_t v = def;
	if (!lua_isnil(L, -1)) {
		int isint = 0;
		lua_Integer i = 0;
		if (lua_type(L, -1) == LUA_TSTRING) {
			if (lua_stringtonumber(L, lua_tostring(L, -1))) {
				i = lua_tointegerx(L, -1, &isint);
				lua_pop(L, 1);
			}
		} else {
			i = lua_tointegerx(L, -1, &isint);
		}
		if (!isint || i < min)
			luaL_error(L, "gf.run: %s must be an integer >= %d%s", key, (int)min,
			           cli ? " (from the command line)" : "");
		v = i;
	}
	lua_pop(L, 1);
	return v;
}

static double option_num(lua_State *L, struct runner *r, int idx, const char *key, double def)
{
	int cli;
	push_option(L, r, idx, key, &cli);
	double v = def;
	if (!lua_isnil(L, -1)) {
		int isnum;
		v = lua_tonumberx(L, -1, &isnum);
		if (!isnum || v < 0)
			luaL_error(L, "gf.run: %s must be a number >= 0%s", key, cli ? " (from the command line)" : "");
	}
	lua_pop(L, 1);
	return v;
}

static void option_str(lua_State *L, struct runner *r, int idx, const char *key, char *out, size_t size)
{
	int cli;
	push_option(L, r, idx, key, &cli);
	if (!lua_isnil(L, -1)) {
		if (lua_type(L, -1) != LUA_TSTRING)
			luaL_error(L, "gf.run: %s must be a string", key);
		snprintf(out, size, "%s", lua_tostring(L, -1));
	}
	lua_pop(L, 1);
}

static int option_bool(lua_State *L, struct runner *r, int idx, const char *key, int def)
{
	int cli;
	push_option(L, r, idx, key, &cli);
	int v = def;
	if (lua_type(L, -1) == LUA_TBOOLEAN)
		v = lua_toboolean(L, -1);
	else if (lua_type(L, -1) == LUA_TSTRING) {
		if (gf_args_parse_bool(lua_tostring(L, -1), &v))
			luaL_error(L, "gf.run: %s must be true or false", key);
	} else if (!lua_isnil(L, -1))
		luaL_error(L, "gf.run: %s must be true or false", key);
	lua_pop(L, 1);
	return v;
}

/* gf.run's result: { step, items, seconds, reason, dir }. */
static void push_result(lua_State *L, int64_t step, int64_t items, double seconds, const char *reason,
                        const char *dir)
{
	lua_createtable(L, 0, 5);
	lua_pushinteger(L, step);
	lua_setfield(L, -2, "step");
	lua_pushinteger(L, items);
	lua_setfield(L, -2, "items");
	lua_pushnumber(L, seconds);
	lua_setfield(L, -2, "seconds");
	lua_pushstring(L, reason);
	lua_setfield(L, -2, "reason");
	lua_pushstring(L, dir);
	lua_setfield(L, -2, "dir");
}

static int l_run(lua_State *L)
{
	struct runner *r = get_runner(L);
	int idx = 0;
	if (!lua_isnoneornil(L, 1)) {
		luaL_checktype(L, 1, LUA_TTABLE);
		check_keys(L, 1, "gf.run", gf_run_keys, GF_NRUN_KEYS);
		idx = 1;
	}
	if (r->runs > 0)
		return luaL_error(L, "gf.run: called a second time in this script; a script runs one pipeline "
		                     "(run each pipeline from its own script)");
	if (!r->pl || gf_placement_stages(r->pl) == 0)
		return luaL_error(L, "gf.run: the pipeline declares no stages");
	/* every rank must have declared the same stages and cross-rank edges
	 * (their tags pair the transport stages) before anything runs */
	if (gf_placement_check_ranks(r->pl))
		return luaL_error(L, "%s", gf_placement_error(r->pl));
	char err[10000];
	gf_run_opts o;
	memset(&o, 0, sizeof(o));
	snprintf(o.backend, sizeof(o.backend), "auto");
	o.steps = option_int(L, r, idx, "steps", 0, 0);
	o.seed = option_int(L, r, idx, "seed", 0, 0);
	o.threads = option_int(L, r, idx, "threads", 0, 0);
	o.checkpoint_every = option_int(L, r, idx, "checkpoint_every", 0, 0);
	o.grace = option_num(L, r, idx, "grace", 30.0);
	o.stall = option_num(L, r, idx, "stall", 0);
	o.stall_stop = option_num(L, r, idx, "stall_stop", 0);
	o.quiet = option_bool(L, r, idx, "quiet", 0);
	o.force = option_bool(L, r, idx, "force", 0);
	option_str(L, r, idx, "dir", o.dir, sizeof(o.dir));
	option_str(L, r, idx, "backend", o.backend, sizeof(o.backend));
	option_str(L, r, idx, "resume", o.resume, sizeof(o.resume));
	if (gf_pipeline_check(r->pl, &o, &r->args, err, sizeof(err)))
		return luaL_error(L, "%s", err);
#ifdef GF_LUA_FUZZ
	r->runs++;
	gf_placement_destroy(r->pl);
	r->pl = NULL;
	return 0;
#endif
	if (gf_rundir_open(&o, r->script, r->rank, r->world, &r->lock_fd, err, sizeof(err)))
		return luaL_error(L, "%s", err);
	/* stage objects of this pipeline are stale from here on */
	gf_graph *g = gf_placement_take_graph(r->pl);
	gf_placement_destroy(r->pl);
	r->pl = NULL;
	r->runs++;
	gf_pipeline_end end;
	int rc = gf_pipeline_run(g, &o, r->script, &r->args, r->rank, r->world, &end, r->err, sizeof(r->err));
	if (rc)
		explain_run(r, r->err, sizeof(r->err));
	if (rc == GF_EGRAPH) /* validation: an error of the script, at the gf.run line */
		return luaL_error(L, "%s", r->err);
	if (rc) {
		if (rc == GF_ESTOP)
			r->interrupted = end.signal;
		else
			r->failed = 1;
		/* ends the script; the runner reports r->err, not this */
		return luaL_error(L, "%s", r->err);
	}
	push_result(L, end.step, end.items, end.seconds, end.reason, o.dir);
	return 1;
}

/* ---- the module ---- */

static int open_ganflow(lua_State *L)
{
	struct runner *r = lua_touserdata(L, lua_upvalueindex(1));
	static const luaL_Reg fns[] = {
		{ "stage", l_stage }, { "connect", l_connect }, { "run", l_run },
		{ "arg", l_arg },     { "rank", l_rank },       { "world", l_world },
		{ "dataset", l_dataset },
		{ NULL, NULL },
	};
	lua_newtable(L);
	lua_pushlightuserdata(L, r);
	luaL_setfuncs(L, fns, 1);
	lua_pushstring(L, GF_VERSION);
	lua_setfield(L, -2, "version");
	int mod = lua_gettop(L);
	/* luaconf/ganflow_ext.lua, when on the path, returns function(gf) that
	 * adds pure-Lua helpers to the module table */
	lua_getglobal(L, "package");
	lua_getfield(L, -1, "searchpath");
	lua_pushstring(L, "ganflow_ext");
	lua_getfield(L, -3, "path");
	lua_call(L, 2, 1);
	int found = lua_isstring(L, -1);
	lua_pop(L, 2);
	if (found) {
		lua_getglobal(L, "require");
		lua_pushstring(L, "ganflow_ext");
		lua_call(L, 1, 1);
		if (lua_isfunction(L, -1)) {
			lua_pushvalue(L, mod);
			lua_call(L, 1, 0);
		} else {
			lua_pop(L, 1);
		}
	}
	lua_settop(L, mod);
	return 1;
}

static void register_module(lua_State *L, struct runner *r)
{
	luaL_newmetatable(L, STAGE_MT);
	lua_pushcfunction(L, stage_index);
	lua_setfield(L, -2, "__index");
	lua_pushcfunction(L, stage_newindex);
	lua_setfield(L, -2, "__newindex");
	lua_pushcfunction(L, stage_tostring);
	lua_setfield(L, -2, "__tostring");
	lua_pop(L, 1);
	luaL_newmetatable(L, PORT_MT);
	lua_pushcfunction(L, port_tostring);
	lua_setfield(L, -2, "__tostring");
	lua_pop(L, 1);

	lua_getglobal(L, "package");
	lua_getfield(L, -1, "preload");
	lua_pushlightuserdata(L, r);
	lua_pushcclosure(L, open_ganflow, 1);
	lua_setfield(L, -2, "ganflow");
	lua_pop(L, 2);
}

static int traceback(lua_State *L)
{
	const char *msg = lua_tostring(L, 1);
	if (!msg)
		msg = luaL_tolstring(L, 1, NULL);
	luaL_traceback(L, L, msg, 1);
	return 1;
}

/* ---- entry points ---- */

const char *gf_lua_version(void)
{
	return LUA_RELEASE;
}

int gf_lua_run_pipeline(const char *script, int nargs, char *const *args, gf_pipeline_status *status, char *err,
                        size_t errsize)
{
	struct runner r;
	memset(&r, 0, sizeof(r));
	r.script = script;
	r.lock_fd = -1;
	r.rank = gf_dist_rank();
	r.world = gf_dist_world();
	err[0] = '\0';
	if (status)
		*status = GF_PIPELINE_OK;
	int rc = gf_args_parse(&r.args, nargs, args, err, errsize);
	if (!rc)
		rc = gf_rundir_resume_in_place(&r.args, r.rank, err, errsize);
	lua_State *L = NULL;
	if (rc)
		goto out;
	L = luaL_newstate();
	if (!L) {
		rc = -ENOMEM;
		goto out;
	}
	luaL_openlibs(L);
	gf_lua_set_path(L);
	register_module(L, &r);
#ifdef GF_LUA_FUZZ
	gf_fuzz_lua_setup(L);
#endif
	/* arg, as the standalone interpreter sets it */
	lua_createtable(L, nargs, 1);
	lua_pushstring(L, script);
	lua_rawseti(L, -2, 0);
	for (int i = 0; i < nargs; i++) {
		lua_pushstring(L, args[i]);
		lua_rawseti(L, -2, i + 1);
	}
	lua_setglobal(L, "arg");

	lua_pushcfunction(L, traceback);
	int lrc = luaL_loadfile(L, script);
	if (lrc == LUA_OK)
		lrc = lua_pcall(L, 0, 0, 1);
	if (lrc != LUA_OK) {
		if (r.failed) {
			snprintf(err, errsize, "%s", r.err);
			rc = GF_EFAIL;
		} else if (r.interrupted) {
			snprintf(err, errsize, "interrupted");
			rc = GF_ESTOP;
			if (status)
				*status = r.interrupted == SIGTERM ? GF_PIPELINE_SIGTERM : GF_PIPELINE_SIGINT;
		} else {
			snprintf(err, errsize, "%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "error in the script");
			rc = GF_ELUA;
		}
		goto out;
	}
	if (r.pl && gf_placement_stages(r.pl) > 0) {
		snprintf(err, errsize, "%s: stages were declared but gf.run{} was never called", script);
		rc = GF_ELUA;
		goto out;
	}
	if (r.runs == 0) {
		snprintf(err, errsize, "%s: the pipeline never called gf.run{}", script);
		rc = GF_ELUA;
		goto out;
	}
	gf_args_warn_unused(&r.args, gf_run_keys, GF_NRUN_KEYS);
out:
	if (rc && status && *status == GF_PIPELINE_OK)
		*status = GF_PIPELINE_ERROR;
	if (rc == -ENOMEM && !err[0])
		snprintf(err, errsize, "out of memory");
	if (L)
		lua_close(L);
	if (r.lock_fd >= 0)
		close(r.lock_fd); /* the run directory is free again */
	gf_placement_destroy(r.pl);
	gf_args_free(&r.args);
	return rc;
}
