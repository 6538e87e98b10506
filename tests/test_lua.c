/* Tests of Lua pipelines (gf_lua_run_pipeline, <ganflow/lua.h>): a pipeline
 * runs and writes its run directory, command-line arguments override run
 * options and convert to the type gf.arg asks for, ganflow_ext helpers are
 * there, rank/world come from the launcher's environment, and every kind
 * of bad input gives a clear error with the script's file:line. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <ganflow/err.h>
#include <ganflow/lua.h>

static char tmp[256];
static char err[16384];
static gf_pipeline_status status;

static int setup(void **state)
{
	(void)state;
	snprintf(tmp, sizeof(tmp), "/tmp/gf_test_lua_XXXXXX");
	return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	return system(cmd) == 0 ? 0 : -1;
}

/* Writes tmp/name with body, where every "@DIR@" becomes tmp and "@BAD@"
 * the directory of the broken test stages. Returns the path (static). */
static const char *script(const char *name, const char *body)
{
	static char path[512];
	char text[8192];
	size_t len = 0;
	for (const char *p = body; *p && len < sizeof(text) - 300;) {
		if (!strncmp(p, "@DIR@", 5)) {
			len += (size_t)snprintf(text + len, sizeof(text) - len, "%s", tmp);
			p += 5;
		} else if (!strncmp(p, "@BAD@", 5)) {
			len += (size_t)snprintf(text + len, sizeof(text) - len, "%s", GF_BAD_STAGE_DIR);
			p += 5;
		} else {
			text[len++] = *p++;
		}
	}
	text[len] = '\0';
	snprintf(path, sizeof(path), "%s/%s", tmp, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static int run_script(const char *path, int nargs, const char **args)
{
	err[0] = '\0';
	return gf_lua_run_pipeline(path, nargs, (char *const *)args, &status, err, sizeof(err));
}

static void expect_ok(int rc)
{
	if (rc)
		fail_msg("pipeline failed (%d): %s", rc, err);
	assert_int_equal(status, GF_PIPELINE_OK);
}

static void expect_err(int rc, int want, const char *text)
{
	assert_int_equal(rc, want);
	assert_int_equal(status, GF_PIPELINE_ERROR);
	if (!strstr(err, text))
		fail_msg("error \"%s\" lacks \"%s\"", err, text);
}

static char *slurp(const char *path)
{
	static char buf[16384];
	FILE *f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s", path);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* ---- pipelines that work ---- */

static const char *const basic =
	"local gf = require \"ganflow\"\n"
	"local n = gf.arg(\"n\", 100)\n"
	"local src = gf.stage \"count_source\" { n = n, width = 2 }\n"
	"local sink = gf.stage \"check_sink\" { expect = n, name = \"sink\" }\n"
	"assert(tostring(src) == \"stage 'count_source' (count_source)\", tostring(src))\n"
	"assert(tostring(src.out) == \"count_source.out\")\n"
	"gf.connect(src.out, sink.inp)\n"
	"local r = gf.run { steps = 0, dir = \"@DIR@/run1\", quiet = true }\n"
	"assert(r.items == n, r.items)\n"
	"assert(r.step == n, r.step)\n"
	"assert(r.reason == \"end of data\", r.reason)\n"
	"assert(r.dir == \"@DIR@/run1\")\n"
	"assert(gf.rank() == 0 and gf.world() == 1)\n";

static void test_basic_run(void **state)
{
	(void)state;
	const char *args[] = { "n=250" };
	const char *path = script("basic.lua", basic);
	expect_ok(run_script(path, 1, args));
	char file[600];
	snprintf(file, sizeof(file), "%s/run1/pipeline.lua", tmp);
	assert_non_null(strstr(slurp(file), "gf.arg(\"n\", 100)"));
	snprintf(file, sizeof(file), "%s/run1/args.txt", tmp);
	const char *a = slurp(file);
	assert_non_null(strstr(a, "\nsteps=0\n"));
	assert_non_null(strstr(a, "\nseed=0\n"));
	assert_non_null(strstr(a, "\nbackend=auto\n"));
	assert_non_null(strstr(a, "\nn=250\n"));
}

static void test_cli_overrides_run_options(void **state)
{
	(void)state;
	const char *path = script("steps.lua",
	                          "local gf = require 'ganflow'\n"
	                          "local src = gf.stage 'count_source' { n = 0 }\n"
	                          "local sink = gf.stage 'check_sink' {}\n"
	                          "gf.connect(src.out, sink.inp)\n"
	                          "local r = gf.run { steps = 1000000, dir = '@DIR@/never', seed = 5, quiet = true }\n"
	                          "assert(r.reason == 'step target reached', r.reason)\n"
	                          "assert(r.step >= 40 and r.step < 1000000, r.step)\n"
	                          "assert(r.dir == '@DIR@/run2')\n");
	char dirarg[400];
	snprintf(dirarg, sizeof(dirarg), "dir=%s/run2", tmp);
	const char *args[] = { "steps=40", dirarg, "seed=9" };
	expect_ok(run_script(path, 3, args));
	char file[600];
	snprintf(file, sizeof(file), "%s/run2/args.txt", tmp);
	const char *a = slurp(file);
	assert_non_null(strstr(a, "\nsteps=40\n"));
	assert_non_null(strstr(a, "\nseed=9\n"));
	snprintf(file, sizeof(file), "%s/never", tmp);
	struct stat st;
	assert_int_not_equal(stat(file, &st), 0);
}

static const char *const minimal_graph =
	"local src = gf.stage 'count_source' { n = 10 }\n"
	"local sink = gf.stage 'check_sink' { expect = 10 }\n"
	"gf.connect(src.out, sink.inp, { depth = 4, capacity = 128 })\n"
	"gf.run { dir = '@DIR@/min', quiet = true }\n";

static void test_arg_types_and_ext(void **state)
{
	(void)state;
	char body[4096];
	snprintf(body, sizeof(body),
	         "local gf = require 'ganflow'\n"
	         "local a, b, c, d = gf.arg('a', 1), gf.arg('b', 0.5), gf.arg('c', false), gf.arg('d', 'x')\n"
	         "assert(math.type(a) == 'integer' and a == 3, tostring(a))\n"
	         "assert(math.type(b) == 'float' and b == 2.5)\n"
	         "assert(c == true)\n"
	         "assert(d == 'hello')\n"
	         "assert(gf.arg('e') == 'zz')\n"
	         "assert(gf.arg('missing', 7) == 7)\n"
	         "local o = gf.args { n = 10, lr = 0.1, name = 'x' }\n"
	         "assert(o.n == 20 and o.lr == 0.1 and o.name == 'x')\n"
	         "local m = gf.merge({ a = 1, b = 2 }, { b = 3 }, { c = 4 })\n"
	         "assert(m.a == 1 and m.b == 3 and m.c == 4)\n"
	         "assert(type(gf.version) == 'string')\n"
	         "%s",
	         minimal_graph);
	const char *path = script("args.lua", body);
	const char *args[] = { "a=3", "b=2.5", "c=true", "d=hello", "e=zz", "n=20" };
	expect_ok(run_script(path, 6, args));

	const char *bad[] = { "a=abc" };
	expect_err(run_script(path, 1, bad), GF_ELUA, "args.lua:2: argument a=abc: expected a number");
	const char *notint[] = { "a=2.5" };
	expect_err(run_script(path, 1, notint), GF_ELUA, "argument a=2.5: expected an integer");
	const char *notbool[] = { "a=1", "b=1", "c=maybe" };
	expect_err(run_script(path, 3, notbool), GF_ELUA, "argument c=maybe: expected true or false");
	const char *malformed[] = { "noequals" };
	assert_int_equal(run_script(path, 1, malformed), GF_EPARAM);
	assert_non_null(strstr(err, "argument 'noequals' is not of the form key=value"));
}

static void test_rank_from_launcher(void **state)
{
	(void)state;
	char body[2048];
	snprintf(body, sizeof(body),
	         "local gf = require 'ganflow'\n"
	         "assert(gf.rank() == 2 and gf.world() == 4, gf.rank() .. '/' .. gf.world())\n%s",
	         minimal_graph);
	const char *path = script("rank.lua", body);
	setenv("OMPI_COMM_WORLD_RANK", "2", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
	int rc = run_script(path, 0, NULL);
	unsetenv("OMPI_COMM_WORLD_RANK");
	unsetenv("OMPI_COMM_WORLD_SIZE");
	expect_ok(rc);
	setenv("SLURM_PROCID", "2", 1);
	setenv("SLURM_NTASKS", "4", 1);
	rc = run_script(path, 0, NULL);
	unsetenv("SLURM_PROCID");
	unsetenv("SLURM_NTASKS");
	expect_ok(rc);
}

static void test_workers_in_lua(void **state)
{
	(void)state;
	const char *path = script("workers.lua",
	                          "local gf = require 'ganflow'\n"
	                          "local src = gf.stage 'count_source' { n = 600 }\n"
	                          "local j = gf.stage 'jitter' { dist = 'uniform', mean_us = 5, workers = 3, name = 'j' }\n"
	                          "local sink = gf.stage 'check_sink' { expect = 600 }\n"
	                          "gf.connect(src.out, j.inp)\n"
	                          "gf.connect(j.out, sink.inp)\n"
	                          "local r = gf.run { dir = '@DIR@/w', quiet = true }\n"
	                          "assert(r.items == 600)\n");
	expect_ok(run_script(path, 0, NULL));
}

/* workers = "auto" (with max_workers), and a count given as text, which is
 * what a command-line decoders=3 makes of a default of "auto" */
static void test_workers_auto_in_lua(void **state)
{
	(void)state;
	const char *path = script("auto.lua",
	                          "local gf = require 'ganflow'\n"
	                          "local opt = gf.args { jw = 'auto' }\n"
	                          "local src = gf.stage 'count_source' { n = 600 }\n"
	                          "local j = gf.stage 'jitter' { mean_us = 5, workers = opt.jw, max_workers = 3, name = 'j' }\n"
	                          "local sink = gf.stage 'check_sink' { expect = 600 }\n"
	                          "gf.connect(src.out, j.inp)\n"
	                          "gf.connect(j.out, sink.inp)\n"
	                          "local r = gf.run { dir = '@DIR@/a', quiet = true }\n"
	                          "assert(r.items == 600)\n");
	expect_ok(run_script(path, 0, NULL));
	path = script("text.lua",
	              "local gf = require 'ganflow'\n"
	              "local opt = gf.args { jw = 'auto' }\n"
	              "local src = gf.stage 'count_source' { n = 600 }\n"
	              "local j = gf.stage 'jitter' { mean_us = 5, workers = opt.jw, name = 'j' }\n"
	              "local sink = gf.stage 'check_sink' { expect = 600 }\n"
	              "gf.connect(src.out, j.inp)\n"
	              "gf.connect(j.out, sink.inp)\n"
	              "local r = gf.run { dir = '@DIR@/t', quiet = true }\n"
	              "assert(r.items == 600)\n");
	const char *args[] = { "jw=3" };
	expect_ok(run_script(path, 1, args));
	/* the bad ones, each at the script line */
	static const char *const bad[][2] = {
		{ "workers = 0", "w.lua:2: gf.stage \"jitter\": workers must be \"auto\" or an integer from 1 to 64, got 0" },
		{ "workers = 'many'", "w.lua:2: gf.stage \"jitter\": workers must be \"auto\" or an integer from 1 to 64, got \"many\"" },
		{ "workers = '3x'", "w.lua:2: gf.stage \"jitter\": workers must be \"auto\" or an integer from 1 to 64, got \"3x\"" },
		{ "workers = 1.5", "w.lua:2: gf.stage \"jitter\": workers must be \"auto\" or an integer from 1 to 64, got 1.5" },
		{ "workers = 2, max_workers = 4", "w.lua:2: gf.stage \"jitter\": max_workers = 4 is the limit of workers = \"auto\", not of workers = 2" },
		{ "workers = 'auto', max_workers = 0", "w.lua:2: gf.stage \"jitter\": max_workers must be an integer from 1 to 64, got 0" },
		{ "workers = 'auto', max_workers = 65", "w.lua:2: gf.stage \"jitter\": max_workers must be an integer from 1 to 64, got 65" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char body[512];
		snprintf(body, sizeof(body), "local gf = require 'ganflow'\nlocal j = gf.stage 'jitter' { %s }\n", bad[i][0]);
		expect_err(run_script(script("w.lua", body), 0, NULL), GF_ELUA, bad[i][1]);
	}
	const char *p = script("wa.lua", "local gf = require 'ganflow'\nlocal s = gf.stage 'check_sink' { workers = 'auto' }\n");
	expect_err(run_script(p, 0, NULL), GF_ELUA,
	           "wa.lua:2: stage 'check_sink' (check_sink): cannot run workers = \"auto\" (the stage does not declare GF_STAGE_WORKERS)");
}

/* ---- bad input ---- */

static void test_script_errors(void **state)
{
	(void)state;
	const char *p = script("syntax.lua", "local gf = require 'ganflow'\nlocal x = = 1\n");
	expect_err(run_script(p, 0, NULL), GF_ELUA, "syntax.lua:2:");
	p = script("rt.lua", "local gf = require 'ganflow'\nlocal t = {}\nerror('boom')\n");
	expect_err(run_script(p, 0, NULL), GF_ELUA, "rt.lua:3: boom");
	assert_non_null(strstr(err, "stack traceback"));
	p = script("norun.lua", "local gf = require 'ganflow'\nlocal s = gf.stage 'count_source' {}\n");
	expect_err(run_script(p, 0, NULL), GF_ELUA, "stages were declared but gf.run{} was never called");
	p = script("empty.lua", "local gf = require 'ganflow'\n");
	expect_err(run_script(p, 0, NULL), GF_ELUA, "the pipeline never called gf.run{}");
	char missing[400];
	snprintf(missing, sizeof(missing), "%s/does_not_exist.lua", tmp);
	expect_err(run_script(missing, 0, NULL), GF_ELUA, "does_not_exist.lua");
}

static void test_stage_errors(void **state)
{
	(void)state;
	const char *p = script("unknown.lua", "local gf = require 'ganflow'\nlocal s = gf.stage 'nosuch' {}\n");
	expect_err(run_script(p, 0, NULL), GF_ELUA, "unknown.lua:2: unknown stage 'nosuch' (searched:");
	assert_non_null(strstr(err, "/stages")); /* the search path is listed */
	p = script("param.lua", "local gf = require 'ganflow'\nlocal s = gf.stage 'count_source' { nn = 3 }\n");
	expect_err(run_script(p, 0, NULL), GF_ELUA,
	           "param.lua:2: stage 'count_source' (count_source): unknown parameter 'nn'; did you mean 'n'?");
	p = script("type.lua", "local gf = require 'ganflow'\n\nlocal s = gf.stage 'count_source' { n = 'ten' }\n");
	expect_err(run_script(p, 0, NULL), GF_ELUA,
	           "type.lua:3: stage 'count_source' (count_source): parameter 'n' must be an integer, got string \"ten\"");
	/* a pipeline's option passed on under the stage's name: the message
	 * also names what the user typed */
	p = script("given.lua", "local gf = require 'ganflow'\nlocal s = gf.stage 'count_source' { n = gf.arg('count', 10) }\n");
	const char *count[] = { "count=-3" };
	expect_err(run_script(p, 1, count), GF_ELUA,
	           "given.lua:2: stage 'count_source' (count_source): parameter 'n' is -3, outside its range 0..: the "
	           "pipeline passes the command line's count=-3 as n");
	p = script("fn.lua", "local gf = require 'ganflow'\nlocal s = gf.stage 'count_source' { n = print }\n");
	expect_err(run_script(p, 0, NULL), GF_ELUA, "fn.lua:2: count_source.n: a function cannot be a parameter");
	p = script("workers.lua", "local gf = require 'ganflow'\nlocal s = gf.stage 'check_sink' { workers = 2 }\n");
	expect_err(run_script(p, 0, NULL), GF_ELUA, "workers.lua:2: stage 'check_sink' (check_sink): cannot run 2 workers");
	p = script("abi.lua", "local gf = require 'ganflow'\nlocal s = gf.stage '@BAD@/bad_abi.so' {}\n");
	expect_err(run_script(p, 0, NULL), GF_ELUA, "abi.lua:2: ");
	assert_non_null(strstr(err, "bad_abi.so: stage ABI version 1, but this runtime speaks version 2 (rebuild the stage"));
	p = script("nodesc.lua", "local gf = require 'ganflow'\nlocal s = gf.stage '@BAD@/no_desc.so' {}\n");
	expect_err(run_script(p, 0, NULL), GF_ELUA, "no_desc.so: no 'ganflow_stage' descriptor");
	p = script("dup.lua", "local gf = require 'ganflow'\nlocal a = gf.stage 'check_sink' { name = 's' }\n"
	                      "local b = gf.stage 'check_sink' { name = 's' }\n");
	expect_err(run_script(p, 0, NULL), GF_ELUA, "dup.lua:3: two stages are named 's'");
}

static void test_connect_errors(void **state)
{
	(void)state;
	const char *head = "local gf = require 'ganflow'\n"
	                   "local src = gf.stage 'count_source' { name = 'src' }\n"
	                   "local sink = gf.stage 'check_sink' { name = 'sink' }\n";
	char body[2048];
	snprintf(body, sizeof(body), "%sgf.connect(src.stats, sink.inp)\n", head);
	expect_err(run_script(script("kind.lua", body), 0, NULL), GF_ELUA,
	           "kind.lua:4: cannot connect 'src.stats' to 'sink.inp': stage 'src' sends \"metrics\" messages, stage 'sink' expects \"items\"");
	snprintf(body, sizeof(body), "%sgf.connect(src.out, sink.inpt)\n", head);
	expect_err(run_script(script("port.lua", body), 0, NULL), GF_ELUA,
	           "port.lua:4: stage 'sink' (check_sink) has no input port 'inpt' (inputs: inp)");
	snprintf(body, sizeof(body), "%sgf.connect(src.out, sink.inp, { dept = 4 })\n", head);
	expect_err(run_script(script("opt.lua", body), 0, NULL), GF_ELUA,
	           "opt.lua:4: gf.connect(src.out, sink.inp): unknown option 'dept'; did you mean 'depth'?");
	snprintf(body, sizeof(body), "%sgf.connect(src.out, 'sink')\n", head);
	expect_err(run_script(script("notport.lua", body), 0, NULL), GF_ELUA,
	           "notport.lua:4: gf.connect(from, to): both arguments must be stage ports");
	snprintf(body, sizeof(body), "%s\ngf.run { dir = '@DIR@/u', quiet = true }\n", head);
	expect_err(run_script(script("unconn.lua", body), 0, NULL), GF_ELUA,
	           "unconn.lua:5: input 'sink.inp' of stage 'sink' (check_sink) is not connected");
	char never[400];
	struct stat st;
	snprintf(never, sizeof(never), "%s/u", tmp);
	assert_int_not_equal(stat(never, &st), 0); /* no run directory for a graph that cannot run */
	snprintf(body, sizeof(body), "%sgf.connect(src.out, sink.inp)\ngf.run { stpes = 3 }\n", head);
	expect_err(run_script(script("runopt.lua", body), 0, NULL), GF_ELUA,
	           "runopt.lua:5: gf.run: unknown option 'stpes'; did you mean 'steps'?");
	snprintf(body, sizeof(body),
	         "%sgf.connect(src.out, sink.inp)\ngf.run { dir = '@DIR@/s1', quiet = true }\n"
	         "local s2 = gf.stage 'check_sink' {}\ngf.connect(src.out, s2.inp)\n",
	         head);
	expect_err(run_script(script("stale.lua", body), 0, NULL), GF_ELUA,
	           "stale.lua:7: gf.connect: port of a stage from a graph that has already run");
}

static void test_run_dir_errors(void **state)
{
	(void)state;
	char body[2048];
	snprintf(body, sizeof(body),
	         "local gf = require 'ganflow'\n"
	         "local src = gf.stage 'count_source' { n = 1 }\n"
	         "local sink = gf.stage 'check_sink' {}\n"
	         "gf.connect(src.out, sink.inp)\n"
	         "gf.run { dir = gf.arg('where', '') }\n");
	const char *p = script("dir.lua", body);
	const char *proc[] = { "where=/proc/ganflow-test/run" };
	expect_err(run_script(p, 1, proc), GF_ELUA, "dir.lua:5: cannot create run directory '/proc/ganflow-test/run'");
	char file[400], arg[420];
	snprintf(file, sizeof(file), "%s/a_file", tmp);
	FILE *f = fopen(file, "w");
	fclose(f);
	snprintf(arg, sizeof(arg), "where=%s/run", file);
	const char *notdir[] = { arg };
	expect_err(run_script(p, 1, notdir), GF_ELUA, "cannot create run directory");
	assert_non_null(strstr(err, "a_file/run"));
}

static void test_stage_failure(void **state)
{
	(void)state;
	const char *p = script("fail.lua",
	                       "local gf = require 'ganflow'\n"
	                       "local src = gf.stage 'count_source' { n = 0 }\n"
	                       "local j = gf.stage 'jitter' { fail_at = 5, name = 'j' }\n"
	                       "local sink = gf.stage 'check_sink' {}\n"
	                       "gf.connect(src.out, j.inp)\n"
	                       "gf.connect(j.out, sink.inp)\n"
	                       "gf.run { dir = '@DIR@/f', quiet = true }\n"
	                       "error('not reached')\n");
	expect_err(run_script(p, 0, NULL), GF_EFAIL, "stage 'j' failed: injected failure at item 5");
	assert_string_equal(err, "stage 'j' failed: injected failure at item 5");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic_run),
		cmocka_unit_test(test_cli_overrides_run_options),
		cmocka_unit_test(test_arg_types_and_ext),
		cmocka_unit_test(test_rank_from_launcher),
		cmocka_unit_test(test_workers_in_lua),
		cmocka_unit_test(test_workers_auto_in_lua),
		cmocka_unit_test(test_script_errors),
		cmocka_unit_test(test_stage_errors),
		cmocka_unit_test(test_connect_errors),
		cmocka_unit_test(test_run_dir_errors),
		cmocka_unit_test(test_stage_failure),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
