/* libFuzzer target: the Lua pipeline loader (core/lua/lua.c, with the
 * placement, parameter and graph checks behind it): what `ganflow run
 * SCRIPT` does with a script up to the point where the graph would run.
 * Every gf.stage / gf.connect / gf.run call checks its input, and a bad
 * one must come back as a Lua error naming the line, never as a crash,
 * an out-of-bounds access or a leak.
 *
 * The input is the script. lua.c is compiled into this target with
 * GF_LUA_FUZZ (tests/fuzz.cmake): gf_fuzz_lua_setup below sandboxes each
 * state (no os, io, debug or C modules; Lua memory capped at 64 MiB and
 * 2 million instructions, both Lua errors), and gf.run returns after
 * validating the pipeline, so nothing is created, written or run. The
 * rest of libganflow and the stage plug-ins are the built ones
 * (GANFLOW_STAGE_PATH). Seeds: tests/fuzz/corpus_lua/ and the dictionary
 * tests/fuzz/lua.dict.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <ganflow/err.h>
#include <ganflow/lua.h>

#define MEM_LIMIT (64u << 20)
#define INSN_LIMIT 2000000
#define INSN_STEP 10000

void gf_fuzz_lua_setup(lua_State *L);

struct budget {
	long long used; /* may go below 0: blocks made before the switch are freed through it */
	long insns;
};

static struct budget budget;

/* Lua's allocator with a cap: the same realloc/free as the default one,
 * so blocks made before the switch are released correctly. */
static void *capped_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	struct budget *b = ud;
	long long old = ptr ? (long long)osize : 0;
	if (nsize == 0) {
		free(ptr);
		b->used -= old;
		return NULL;
	}
	if ((long long)nsize > old && b->used - old + (long long)nsize > (long long)MEM_LIMIT)
		return NULL; /* Lua raises "not enough memory" */
	void *p = realloc(ptr, nsize);
	if (p)
		b->used = b->used - old + (long long)nsize;
	return p;
}

static void count_hook(lua_State *L, lua_Debug *ar)
{
	(void)ar;
	budget.insns += INSN_STEP;
	if (budget.insns > INSN_LIMIT)
		luaL_error(L, "fuzz: instruction budget spent");
}

void gf_fuzz_lua_setup(lua_State *L)
{
	budget.insns = 0;
	/* what the state allocated so far is not counted: a fresh budget */
	budget.used = 0;
	lua_setallocf(L, capped_alloc, &budget);
	lua_sethook(L, count_hook, LUA_MASKCOUNT, INSN_STEP);
	static const char *const gone[] = { "os", "io", "debug", "print", "collectgarbage" };
	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
		lua_pushnil(L);
		lua_setglobal(L, gone[i]);
	}
	lua_getglobal(L, "package");
	if (lua_istable(L, -1)) {
		lua_pushstring(L, "");
		lua_setfield(L, -2, "cpath");
		lua_pushnil(L);
		lua_setfield(L, -2, "loadlib");
	}
	lua_pop(L, 1);
}

static char script[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(script, sizeof(script), "/tmp/gf_fuzz_lua.%d.lua", (int)getpid());
	setenv("GANFLOW_LOG", "error", 0);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *f = fopen(script, "wb");
	if (!f)
		abort();
	if (size && fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
	char err[4096];
	gf_pipeline_status status;
	int rc = gf_lua_run_pipeline(script, 0, NULL, &status, err, sizeof(err));
	if (rc && !err[0])
		abort(); /* every failure says why */
	unlink(script);
	gf_clearerr();
	return 0;
}
