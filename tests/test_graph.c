/* Tests of graphs (<ganflow/graph.h>) with the runtime's test stages and a
 * few stages compiled in here: items arrive complete and in order through
 * plain edges, multi-worker stages (with dropped placeholders), fan-out
 * and multi-edge inputs; back edges; every way a run ends (end of data,
 * step target, graceful and hard stop requests, grace timeout, failure in
 * create and mid-run) ends promptly with the right reason and message;
 * validation errors name what is wrong; a stop agreed across ranks
 * ends after the step under way; the FLOPs and device peaks stages report
 * add up as a run's MFU needs. Run under TSan too. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <ganflow/err.h>
#include <ganflow/graph.h>
#include <ganflow/log.h>
#include <ganflow/lua.h>
#include <ganflow/params.h>

#define MAX_EDGES 32

static gf_value lua_params(const char *code)
{
	gf_value v;
	char full[1024];
	snprintf(full, sizeof(full), "return %s", code);
	if (gf_lua_eval(full, &v))
		fail_msg("bad parameter literal %s: %s", code, gf_errmsg());
	return v;
}

/* Adds a stage; fails the test on error. */
static int add(gf_graph *g, const char *stage, const char *name, const char *params, int workers)
{
	gf_value v = params ? lua_params(params) : gf_value_nil();
	int node = -1;
	int rc = gf_graph_add(g, stage, name, params ? &v : NULL, workers, &node);
	gf_value_free(&v);
	if (rc)
		fail_msg("gf_graph_add(%s): %s", stage, gf_graph_error(g));
	return node;
}

static void link_(gf_graph *g, int a, const char *out, int b, const char *in, const gf_edge_opts *o)
{
	if (gf_graph_connect(g, a, out, b, in, o))
		fail_msg("connect: %s", gf_graph_error(g));
}

static double value(gf_graph *g, const char *name)
{
	double v = -1;
	if (!gf_graph_value(g, name, &v))
		fail_msg("no value '%s' was reported", name);
	return v;
}

static int run(gf_graph *g, int64_t steps)
{
	gf_run_info info = { .steps = steps, .seed = 1234, .world = 1, .backend = "cpu" };
	return gf_graph_run(g, &info, GF_GRAPH_QUIET);
}

static void expect_error(gf_graph *g, int rc, int want, const char *text)
{
	assert_int_equal(rc, want);
	if (!strstr(gf_graph_error(g), text))
		fail_msg("error \"%s\" lacks \"%s\"", gf_graph_error(g), text);
}

static double sum_range(int64_t a, int64_t n)
{
	return (double)n * (double)(2 * a + n - 1) / 2.0;
}

/* ---- data flow ---- */

static void test_source_sink(void **state)
{
	(void)state;
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int src = add(g, "count_source", "src", "{ n = 20000, width = 4 }", 1);
	int sink = add(g, "check_sink", "sink", "{ expect = 20000 }", 1);
	link_(g, src, "out", sink, "inp", NULL);
	assert_int_equal(run(g, 0), 0);
	assert_int_equal(gf_graph_stop_reason(g), GF_STOP_EOF);
	assert_true(value(g, "sink_items") == 20000);
	assert_true(value(g, "sink_sum") == sum_range(0, 20000));
	assert_int_equal(gf_graph_step(g), 20000);
	assert_int_equal(gf_graph_items(g), 20000);
	gf_edge_stat st[MAX_EDGES];
	assert_int_equal(gf_graph_edge_stats(g, st, MAX_EDGES), 1);
	assert_string_equal(st[0].from, "src.out");
	assert_string_equal(st[0].to, "sink.inp");
	assert_int_equal(st[0].items, 20000);
	assert_int_equal(st[0].capacity, 64);
	assert_int_equal(st[0].fixed, 0);
	assert_true(st[0].depth_min >= 2 && st[0].depth_max <= 64);
	gf_graph_destroy(g);
}

static void test_workers_keep_order(void **state)
{
	(void)state;
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int src = add(g, "count_source", "src", "{ n = 3000, width = 2 }", 1);
	int jit = add(g, "jitter", "jitter", "{ dist = 'uniform', mean_us = 10, seed = 7 }", 3);
	int sink = add(g, "check_sink", "sink", "{ expect = 3000 }", 1);
	link_(g, src, "out", jit, "inp", NULL);
	link_(g, jit, "out", sink, "inp", NULL);
	assert_int_equal(run(g, 0), 0);
	assert_true(value(g, "sink_items") == 3000);
	assert_true(value(g, "sink_sum") == sum_range(0, 3000));
	gf_edge_stat st[MAX_EDGES];
	int n = gf_graph_edge_stats(g, st, MAX_EDGES);
	assert_int_equal(n, 6); /* 3 dealt rings in, 3 merged rings out */
	uint64_t in = 0, out = 0;
	for (int i = 0; i < n; i++) {
		if (!strcmp(st[i].from, "src.out")) {
			in += st[i].items;
			assert_non_null(strstr(st[i].to, "jitter#"));
			assert_int_equal(st[i].items, 1000); /* dealt round-robin */
		} else {
			out += st[i].items;
			assert_string_equal(st[i].to, "sink.inp");
		}
	}
	assert_int_equal(in, 3000);
	assert_int_equal(out, 3000);
	gf_graph_destroy(g);
}

static void test_workers_drop_placeholders(void **state)
{
	(void)state;
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int src = add(g, "count_source", "src", "{ n = 5000 }", 1);
	int jit = add(g, "jitter", NULL, "{ drop_every = 7 }", 2);
	int sink = add(g, "check_sink", "sink", "{ expect = 4286, drop_every = 7 }", 1);
	link_(g, src, "out", jit, "inp", NULL);
	link_(g, jit, "out", sink, "inp", NULL);
	assert_int_equal(run(g, 0), 0);
	assert_true(value(g, "sink_items") == 5000 - 714);
	gf_graph_destroy(g);
}

static void test_fanout_and_multi_input(void **state)
{
	(void)state;
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int a = add(g, "count_source", "a", "{ n = 1000 }", 1);
	int b = add(g, "count_source", "b", "{ n = 500, start = 10000 }", 1);
	int col = add(g, "collect", "col", "{ expect = 1501 }", 1);
	int sink = add(g, "check_sink", "sink", "{ expect = 1000 }", 1);
	link_(g, a, "out", col, "inp", NULL);
	link_(g, a, "out", sink, "inp", NULL);   /* fan-out: both get every item */
	link_(g, b, "out", col, "inp", NULL);    /* several producers, one input */
	link_(g, a, "stats", col, "inp", NULL);  /* "metrics" into an "any" input */
	assert_int_equal(run(g, 0), 0);
	assert_true(value(g, "collect_items") == 1501);
	assert_true(value(g, "collect_sum") == sum_range(0, 1000) + sum_range(10000, 500));
	assert_true(value(g, "collect_stats") == 1000);
	assert_true(value(g, "sink_items") == 1000);
	gf_graph_destroy(g);
}

static void test_fixed_depth_edge(void **state)
{
	(void)state;
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int src = add(g, "count_source", "src", "{ n = 2000 }", 1);
	int sink = add(g, "check_sink", "sink", "{ expect = 2000 }", 1);
	gf_edge_opts o = { .capacity = 128, .depth = 4 };
	link_(g, src, "out", sink, "inp", &o);
	assert_int_equal(run(g, 0), 0);
	gf_edge_stat st[1];
	assert_int_equal(gf_graph_edge_stats(g, st, 1), 1);
	assert_int_equal(st[0].fixed, 1);
	assert_int_equal(st[0].capacity, 128);
	assert_int_equal(st[0].depth, 4);
	assert_int_equal(st[0].depth_min, 4);
	assert_int_equal(st[0].depth_max, 4);
	assert_int_equal(st[0].items, 2000);
	gf_graph_destroy(g);
}

/* ---- how runs end ---- */

static void test_step_target(void **state)
{
	(void)state;
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int src = add(g, "count_source", "src", "{ n = 0 }", 1);
	int sink = add(g, "check_sink", "sink", NULL, 1);
	int col = add(g, "collect", "col", NULL, 1);
	link_(g, src, "out", sink, "inp", NULL);
	link_(g, src, "stats", col, "inp", NULL);
	assert_int_equal(run(g, 300), 0);
	assert_int_equal(gf_graph_stop_reason(g), GF_STOP_STEPS);
	assert_true(gf_graph_step(g) >= 300);
	/* the source's flush ran after the stop and told how many it sent;
	 * everything it sent arrived (a graceful stop drains) */
	assert_true(value(g, "collect_items") == 1);
	assert_true(value(g, "collect_stats") == value(g, "sink_items"));
	assert_true(value(g, "sink_items") >= 300);
	gf_graph_destroy(g);
}

struct requester {
	gf_graph *g;
	int hard;
	int ms;
};

static void *request_later(void *arg)
{
	struct requester *r = arg;
	struct timespec ts = { 0, (long)r->ms * 1000000L };
	nanosleep(&ts, NULL);
	gf_graph_request_stop(r->g, r->hard);
	return NULL;
}

static void run_with_request(int hard, int *rc, double *elapsed, gf_graph **gp)
{
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int src = add(g, "count_source", "src", "{ n = 0 }", 1);
	int jit = add(g, "jitter", "jit", "{ mean_us = 50 }", 1);
	int sink = add(g, "check_sink", "sink", NULL, 1);
	int col = add(g, "collect", "col", NULL, 1);
	link_(g, src, "out", jit, "inp", NULL);
	link_(g, jit, "out", sink, "inp", NULL);
	link_(g, src, "stats", col, "inp", NULL);
	struct requester r = { g, hard, 150 };
	pthread_t t;
	double t0 = gf_now();
	assert_int_equal(pthread_create(&t, NULL, request_later, &r), 0);
	*rc = run(g, 0);
	*elapsed = gf_now() - t0;
	pthread_join(t, NULL);
	*gp = g;
}

static void test_graceful_request(void **state)
{
	(void)state;
	gf_graph *g;
	int rc;
	double el;
	run_with_request(0, &rc, &el, &g);
	assert_int_equal(rc, 0);
	assert_int_equal(gf_graph_stop_reason(g), GF_STOP_REQUEST);
	assert_true(el < 10.0);
	assert_true(value(g, "collect_stats") > 0);                         /* flush ran */
	assert_true(value(g, "collect_stats") == value(g, "sink_items")); /* drained */
	gf_graph_destroy(g);
}

static void test_hard_request(void **state)
{
	(void)state;
	gf_graph *g;
	int rc;
	double el;
	run_with_request(1, &rc, &el, &g);
	assert_int_equal(rc, GF_ESTOP);
	assert_int_equal(gf_graph_stop_reason(g), GF_STOP_HARD);
	assert_true(el < 10.0);
	assert_non_null(strstr(gf_graph_error(g), "stopped"));
	/* no flush: src's stats message (pushed by its flush) never came. col
	 * reports nothing when the hard stop reaches it first, or 0 when src's
	 * end of stream does (both orders happen) */
	double v = 0;
	if (gf_graph_value(g, "collect_stats", &v))
		assert_true(v == 0);
	gf_graph_destroy(g);
}

static void test_grace_timeout(void **state)
{
	(void)state;
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int src = add(g, "count_source", "src", "{ n = 0, ignore_stop = true }", 1);
	int sink = add(g, "check_sink", "sink", NULL, 1);
	link_(g, src, "out", sink, "inp", NULL);
	gf_graph_set_grace(g, 0.3);
	double t0 = gf_now();
	assert_int_equal(run(g, 50), GF_ESTOP);
	assert_true(gf_now() - t0 < 10.0);
	assert_int_equal(gf_graph_stop_reason(g), GF_STOP_GRACE);
	gf_graph_destroy(g);
}

/* A stage that computes in its flush for longer than the grace (a final
 * evaluation on a loaded machine) is not stopped hard: the grace counts
 * time without progress, and a flush that uses CPU is progress. */
static void test_grace_busy_flush(void **state)
{
	(void)state;
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int src = add(g, "count_source", "src", "{ n = 0 }", 1);
	int sink = add(g, "check_sink", "sink", "{ flush_cpu_s = 3 }", 1);
	link_(g, src, "out", sink, "inp", NULL);
	gf_graph_set_grace(g, 1.0);
	assert_int_equal(run(g, 50), 0);
	assert_int_equal(gf_graph_stop_reason(g), GF_STOP_STEPS);
	double v = 0;
	assert_int_equal(gf_graph_value(g, "sink_items", &v), 1); /* published after the computing */
	assert_true(v >= 50);
	gf_graph_destroy(g);
}

static void test_failure_mid_run(void **state)
{
	(void)state;
	for (int workers = 1; workers <= 2; workers++) {
		gf_graph *g;
		assert_int_equal(gf_graph_create(&g), 0);
		int src = add(g, "count_source", "src", "{ n = 0 }", 1);
		int jit = add(g, "jitter", "jit", "{ fail_at = 100 }", workers);
		int sink = add(g, "check_sink", "sink", NULL, 1);
		link_(g, src, "out", jit, "inp", NULL);
		link_(g, jit, "out", sink, "inp", NULL);
		double t0 = gf_now();
		assert_int_equal(run(g, 0), GF_EFAIL);
		assert_true(gf_now() - t0 < 10.0);
		assert_int_equal(gf_graph_stop_reason(g), GF_STOP_FAILURE);
		/* item 100 goes to worker 100 % 2 == 0 */
		assert_string_equal(gf_graph_error(g), workers == 1 ? "stage 'jit' failed: injected failure at item 100"
		                                                    : "stage 'jit#0' failed: injected failure at item 100");
		gf_graph_destroy(g);
	}
}

/* A source whose create() fails after allocating its state, as a stage
 * does when what a parameter names cannot be used (a missing file):
 * nothing a declared range could have caught. destroy() must still run. */
static const gf_port_desc refuse_out[] = { { "out", "items", 0, "" } };

static int refuse_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	(void)p;
	*self = malloc(64);
	return gf_fail(ctx, "cannot open 'nowhere.dat': No such file or directory");
}

static int refuse_run(void *self, gf_ctx *ctx)
{
	(void)self;
	return gf_fail(ctx, "run() called after create() failed");
}

static void refuse_destroy(void *self)
{
	free(self);
}

static const gf_stage_desc refuse = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "refuse", .doc = "",
	.outputs = refuse_out, .noutputs = 1, .create = refuse_create, .run = refuse_run, .destroy = refuse_destroy,
};

static void test_failure_in_create(void **state)
{
	(void)state;
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int src = -1;
	assert_int_equal(gf_graph_add_desc(g, &refuse, "src", NULL, 1, &src), 0);
	int sink = add(g, "check_sink", "sink", NULL, 1);
	link_(g, src, "out", sink, "inp", NULL);
	double t0 = gf_now();
	assert_int_equal(run(g, 0), GF_EFAIL);
	assert_true(gf_now() - t0 < 10.0);
	assert_int_equal(gf_graph_stop_reason(g), GF_STOP_FAILURE);
	assert_string_equal(gf_graph_error(g), "stage 'src' failed: cannot open 'nowhere.dat': No such file or directory");
	gf_graph_destroy(g);

	/* a value outside a declared range never reaches create(): the
	 * runtime refuses it when the stage is added (count_source: n 0..) */
	assert_int_equal(gf_graph_create(&g), 0);
	gf_value bad = lua_params("{ n = -5 }");
	assert_int_equal(gf_graph_add(g, "count_source", "src", &bad, 1, NULL), GF_EPARAM);
	assert_string_equal(gf_graph_error(g), "stage 'src' (count_source): parameter 'n' is -5, outside its range 0..");
	gf_value_free(&bad);
	gf_graph_destroy(g);
}

/* ---- validation ---- */

static void test_validation_errors(void **state)
{
	(void)state;
	gf_graph *g;
	int rc;

	assert_int_equal(gf_graph_create(&g), 0);
	expect_error(g, run(g, 0), GF_EGRAPH, "declares no stages");
	gf_graph_destroy(g);

	assert_int_equal(gf_graph_create(&g), 0);
	int src = add(g, "count_source", "src", NULL, 1);
	int sink = add(g, "check_sink", "sink", NULL, 1);
	expect_error(g, gf_graph_add(g, "check_sink", "sink", NULL, 1, NULL), GF_EGRAPH, "two stages are named 'sink'");
	expect_error(g, gf_graph_add(g, "nosuch_stage", NULL, NULL, 1, NULL), GF_ENOTFOUND,
	             "unknown stage 'nosuch_stage' (searched:");
	expect_error(g, gf_graph_add(g, GF_BAD_STAGE_DIR "/bad_abi.so", NULL, NULL, 1, NULL), GF_EABI,
	             "bad_abi.so: stage ABI version 1, but this runtime speaks version 2 (rebuild the stage");
	expect_error(g, gf_graph_add(g, GF_BAD_STAGE_DIR "/no_desc.so", NULL, NULL, 1, NULL), GF_EABI,
	             "no_desc.so: no 'ganflow_stage' descriptor");
	expect_error(g, gf_graph_add(g, "check_sink", "s2", NULL, 2, NULL), GF_EPARAM,
	             "cannot run 2 workers (the stage does not declare GF_STAGE_WORKERS)");
	gf_value bad = lua_params("{ expct = 3 }");
	expect_error(g, gf_graph_add(g, "check_sink", "s3", &bad, 1, NULL), GF_EPARAM,
	             "stage 's3' (check_sink): unknown parameter 'expct'; did you mean 'expect'?");
	gf_value_free(&bad);
	expect_error(g, gf_graph_connect(g, src, "outt", sink, "inp", NULL), GF_ENOTFOUND,
	             "stage 'src' (count_source) has no output port 'outt' (outputs: out, stats)");
	expect_error(g, gf_graph_connect(g, src, "out", sink, "in", NULL), GF_ENOTFOUND,
	             "stage 'sink' (check_sink) has no input port 'in' (inputs: inp)");
	rc = gf_graph_connect(g, src, "stats", sink, "inp", NULL);
	expect_error(g, rc, GF_EKIND,
	             "cannot connect 'src.stats' to 'sink.inp': stage 'src' sends \"metrics\" messages, stage 'sink' expects \"items\"");
	gf_edge_opts cap3 = { .capacity = 3 };
	expect_error(g, gf_graph_connect(g, src, "out", sink, "inp", &cap3), GF_EPARAM, "capacity 3 is not a power of two");
	gf_edge_opts deep = { .capacity = 8, .depth = 9 };
	expect_error(g, gf_graph_connect(g, src, "out", sink, "inp", &deep), GF_EPARAM, "depth 9 exceeds the capacity 8");
	/* unconnected input, then unconnected output */
	expect_error(g, run(g, 0), GF_EGRAPH,
	             "input 'sink.inp' of stage 'sink' (check_sink) is not connected (it expects \"items\" messages)");
	gf_graph_destroy(g);

	assert_int_equal(gf_graph_create(&g), 0);
	src = add(g, "count_source", "src", NULL, 1);
	expect_error(g, run(g, 0), GF_EGRAPH, "output 'src.out' of stage 'src' (count_source) is not connected");
	gf_graph_destroy(g);

	assert_int_equal(gf_graph_create(&g), 0);
	src = add(g, "count_source", "src", NULL, 1);
	sink = add(g, "check_sink", "sink", NULL, 1);
	link_(g, src, "out", sink, "inp", NULL);
	expect_error(g, gf_graph_connect(g, src, "out", sink, "inp", NULL), GF_EGRAPH,
	             "input 'sink.inp' is already connected (from 'src.out')");
	int j1 = add(g, "jitter", "j1", NULL, 2), j2 = add(g, "jitter", "j2", NULL, 2);
	expect_error(g, gf_graph_connect(g, j1, "out", j2, "inp", NULL), GF_EGRAPH, "both stages run several workers");
	assert_string_equal(gf_graph_node_name(g, add(g, "jitter", NULL, NULL, 1)), "jitter");
	assert_string_equal(gf_graph_node_name(g, add(g, "jitter", NULL, NULL, 1)), "jitter2");
	gf_graph_destroy(g);
}

/* ---- stages compiled into the test ---- */

static const gf_port_desc tok_in[] = { { "inp", "tokens", 0, "" } };
static const gf_port_desc tok_out[] = { { "out", "tokens", 0, "" } };
static const gf_port_desc back_in[] = { { "back", "tokens", 0, "" } };
static const gf_port_desc back_out[] = { { "back", "tokens", 0, "" } };

static int null_create(gf_ctx *c, const gf_value *p, void **self)
{
	(void)c;
	(void)p;
	*self = NULL;
	return 0;
}

#define ROUNDS 2000

/* ping sends token k and waits for pong's answer 2k on the back edge. */
static int ping_run(void *self, gf_ctx *ctx)
{
	(void)self;
	int64_t rounds = 0;
	for (int64_t k = 1; k <= ROUNDS; k++) {
		gf_msg *m;
		int rc = gf_msg_get(ctx, 0, &m);
		if (rc)
			return rc;
		m->key = (uint64_t)k;
		if ((rc = gf_push(ctx, 0, m)))
			return rc;
		if ((rc = gf_pop(ctx, 0, &m)))
			return gf_fail(ctx, "round %lld: no answer (%s)", (long long)k, gf_strerror(rc));
		uint64_t got = m->key;
		gf_msg_release(m);
		if (got != (uint64_t)(2 * k))
			return gf_fail(ctx, "round %lld: answer %llu", (long long)k, (unsigned long long)got);
		rounds++;
	}
	gf_report_value(ctx, "rounds", (double)rounds);
	return 0;
}

static int pong_run(void *self, gf_ctx *ctx)
{
	(void)self;
	for (;;) {
		gf_msg *in, *out;
		int rc = gf_pop(ctx, 0, &in);
		if (rc)
			return rc;
		if ((rc = gf_msg_get(ctx, 0, &out))) {
			gf_msg_release(in);
			return rc;
		}
		out->key = in->key * 2;
		gf_msg_release(in);
		if ((rc = gf_push(ctx, 0, out)))
			return rc;
	}
}

/* ping sends first: it declares that it starts the cycle */
static const gf_stage_desc ping = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "ping", .doc = "",
	.inputs = back_in, .ninputs = 1, .outputs = tok_out, .noutputs = 1,
	.flags = GF_STAGE_CYCLE_START, .create = null_create, .run = ping_run,
};

/* the same ports without the declaration: a loop nothing starts */
static const gf_stage_desc ping_mute = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "ping_mute", .doc = "",
	.inputs = back_in, .ninputs = 1, .outputs = tok_out, .noutputs = 1,
	.create = null_create, .run = pong_run,
};

static const gf_stage_desc pong = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "pong", .doc = "",
	.inputs = tok_in, .ninputs = 1, .outputs = back_out, .noutputs = 1,
	.create = null_create, .run = pong_run,
};

static void test_back_edge_lockstep(void **state)
{
	(void)state;
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int a, b;
	assert_int_equal(gf_graph_add_desc(g, &ping, NULL, NULL, 1, &a), 0);
	assert_int_equal(gf_graph_add_desc(g, &pong, NULL, NULL, 1, &b), 0);
	gf_edge_opts one = { .depth = 1 };
	link_(g, a, "out", b, "inp", &one);
	link_(g, b, "back", a, "back", &one); /* the back edge */
	assert_int_equal(run(g, 0), 0);
	assert_true(value(g, "rounds") == ROUNDS);
	gf_graph_destroy(g);
}

/* a loop fed from outside: items in, tokens round the loop (never run) */
static const gf_port_desc fed_in[] = { { "inp", "items", 0, "" }, { "back", "tokens", 0, "" } };
static const gf_stage_desc fed = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "fed", .doc = "",
	.inputs = fed_in, .ninputs = 2, .outputs = tok_out, .noutputs = 1,
	.create = null_create, .run = pong_run,
};

/* Cycles nothing feeds are refused at validation, naming their stages;
 * a cycle fed from outside or started by a GF_STAGE_CYCLE_START stage is
 * not. */
static void test_cycles_without_source(void **state)
{
	(void)state;
	gf_graph *g;
	/* two stages joined in a loop */
	assert_int_equal(gf_graph_create(&g), 0);
	int j1 = add(g, "jitter", "j1", NULL, 1), j2 = add(g, "jitter", "j2", NULL, 1);
	link_(g, j1, "out", j2, "inp", NULL);
	link_(g, j2, "out", j1, "inp", NULL);
	expect_error(g, gf_graph_validate(g), GF_EGRAPH, "stages 'j1', 'j2' form a cycle that nothing outside feeds");
	expect_error(g, run(g, 0), GF_EGRAPH, "stages 'j1', 'j2' form a cycle");
	gf_graph_destroy(g);
	/* a stage wired to itself */
	assert_int_equal(gf_graph_create(&g), 0);
	j1 = add(g, "jitter", "loop", NULL, 1);
	link_(g, j1, "out", j1, "inp", NULL);
	expect_error(g, gf_graph_validate(g), GF_EGRAPH,
	             "stage 'loop' (jitter) is wired to itself ('loop.out' -> 'loop.inp') and nothing outside feeds it");
	gf_graph_destroy(g);
	/* ping/pong without a stage that starts the loop */
	assert_int_equal(gf_graph_create(&g), 0);
	int a, b;
	assert_int_equal(gf_graph_add_desc(g, &ping_mute, NULL, NULL, 1, &a), 0);
	assert_int_equal(gf_graph_add_desc(g, &pong, NULL, NULL, 1, &b), 0);
	link_(g, a, "out", b, "inp", NULL);
	link_(g, b, "back", a, "back", NULL);
	expect_error(g, gf_graph_validate(g), GF_EGRAPH, "stages 'ping_mute', 'pong' form a cycle");
	gf_graph_destroy(g);
	/* the same loop started by ping, and a loop fed from outside: fine */
	assert_int_equal(gf_graph_create(&g), 0);
	assert_int_equal(gf_graph_add_desc(g, &ping, NULL, NULL, 1, &a), 0);
	assert_int_equal(gf_graph_add_desc(g, &pong, NULL, NULL, 1, &b), 0);
	link_(g, a, "out", b, "inp", NULL);
	link_(g, b, "back", a, "back", NULL);
	assert_int_equal(gf_graph_validate(g), 0);
	gf_graph_destroy(g);
	assert_int_equal(gf_graph_create(&g), 0);
	int src = add(g, "count_source", "src", "{ n = 10 }", 1);
	assert_int_equal(gf_graph_add_desc(g, &fed, NULL, NULL, 1, &a), 0);
	assert_int_equal(gf_graph_add_desc(g, &pong, NULL, NULL, 1, &b), 0);
	link_(g, src, "out", a, "inp", NULL);
	link_(g, a, "out", b, "inp", NULL);
	link_(g, b, "back", a, "back", NULL);
	assert_int_equal(gf_graph_validate(g), 0);
	gf_graph_destroy(g);
}

/* ---- message memory for devices (gf_port_set_allocator and friends) ----
 *
 * A "producer" pushes N messages with a tensor; "consumer" stages ask, in
 * create(), for the producer's buffers from a counting allocator of
 * theirs (dir 0) and declare the device memory their input accepts; the
 * producer asks in run() whether all its consumers take device memory,
 * and reports the answer. */

#define MEM_N 20

static atomic_int mem_allocs, mem_frees;

static void *mem_alloc(void *ud, size_t bytes)
{
	(void)ud;
	atomic_fetch_add(&mem_allocs, 1);
	return malloc(bytes ? bytes : 1);
}

static void mem_free(void *ud, void *p)
{
	(void)ud;
	if (p)
		atomic_fetch_add(&mem_frees, 1);
	free(p);
}

static void *other_alloc(void *ud, size_t bytes)
{
	return mem_alloc(ud, bytes);
}

static int mem_prod_run(void *self, gf_ctx *ctx)
{
	(void)self;
	gf_report_value(ctx, "device_ok_0", gf_port_device_ok(ctx, 0, GF_CUDA, 0));
	gf_report_value(ctx, "device_ok_1", gf_port_device_ok(ctx, 0, GF_CUDA, 1));
	for (int i = 0; i < MEM_N; i++) {
		gf_msg *m;
		int rc = gf_msg_get(ctx, 0, &m);
		if (rc)
			return rc;
		int64_t sh[1] = { 16 };
		float *x = gf_msg_tensor(m, 0, GF_F32, 1, sh);
		if (!x) {
			gf_msg_release(m);
			return gf_fail(ctx, "out of memory");
		}
		x[0] = (float)i;
		if ((rc = gf_push(ctx, 0, m)))
			return rc;
	}
	return 0;
}

/* parameters: dev = device index accepted (-1: none), alloc = 0 none, 1
 * the counting allocator, 2 another one */
static int mem_cons_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	*self = NULL;
	int dev = (int)gf_value_as_int(gf_value_get(p, "dev"), -1, NULL);
	int which = (int)gf_value_as_int(gf_value_get(p, "alloc"), 0, NULL);
	if (dev >= 0)
		gf_port_accept_device(ctx, 0, GF_CUDA, dev);
	if (which) {
		gf_allocator a = { which == 1 ? mem_alloc : other_alloc, mem_free, NULL };
		int rc = gf_port_set_allocator(ctx, 0, 0, &a);
		gf_report_value(ctx, which == 1 ? "set_1" : "set_2", rc);
	}
	return 0;
}

static int mem_cons_run(void *self, gf_ctx *ctx)
{
	(void)self;
	for (int i = 0;; i++) {
		gf_msg *m;
		int rc = gf_pop(ctx, 0, &m);
		if (rc)
			return rc == GF_EEOF ? 0 : rc;
		float v = ((const float *)m->t[0].data)[0];
		gf_msg_release(m);
		if (v != (float)i)
			return gf_fail(ctx, "message %d holds %g", i, (double)v);
	}
}

static const gf_param_desc mem_params[] = {
	{ "dev", GF_PARAM_INT, "-1", "", NULL },
	{ "alloc", GF_PARAM_INT, "0", "", NULL },
};
static const gf_stage_desc mem_prod = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "mem_prod", .doc = "",
	.outputs = tok_out, .noutputs = 1, .create = null_create, .run = mem_prod_run,
};
static const gf_stage_desc mem_cons = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "mem_cons", .doc = "",
	.inputs = tok_in, .ninputs = 1, .params = mem_params, .nparams = 2,
	.create = mem_cons_create, .run = mem_cons_run,
};

/* One producer, consumers with params a and b (b NULL: one consumer). */
static gf_graph *mem_graph(const char *a, const char *b)
{
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int p, c1, c2;
	assert_int_equal(gf_graph_add_desc(g, &mem_prod, "p", NULL, 1, &p), 0);
	gf_value va = lua_params(a), vb = b ? lua_params(b) : gf_value_nil();
	assert_int_equal(gf_graph_add_desc(g, &mem_cons, "c1", &va, 1, &c1), 0);
	link_(g, p, "out", c1, "inp", NULL);
	if (b) {
		assert_int_equal(gf_graph_add_desc(g, &mem_cons, "c2", &vb, 1, &c2), 0);
		link_(g, p, "out", c2, "inp", NULL);
	}
	gf_value_free(&va);
	gf_value_free(&vb);
	return g;
}

static void test_port_memory(void **state)
{
	(void)state;
	/* a consumer's allocator serves the producer's buffers, all freed
	 * with the graph; the producer sees its consumer's device */
	atomic_store(&mem_allocs, 0);
	atomic_store(&mem_frees, 0);
	gf_graph *g = mem_graph("{ dev = 0, alloc = 1 }", NULL);
	assert_int_equal(run(g, 0), 0);
	assert_true(value(g, "set_1") == 0);
	assert_true(value(g, "device_ok_0") == 1);
	assert_true(value(g, "device_ok_1") == 0); /* another device index */
	int allocs = atomic_load(&mem_allocs);
	assert_true(allocs >= 1 && allocs <= MEM_N);
	gf_graph_destroy(g);
	assert_int_equal(atomic_load(&mem_frees), allocs);

	/* two consumers on one device asking for the same allocator: fine;
	 * one that takes no device memory makes the answer 0 */
	g = mem_graph("{ dev = 0, alloc = 1 }", "{ dev = 0, alloc = 1 }");
	assert_int_equal(run(g, 0), 0);
	assert_true(value(g, "set_1") == 0);
	assert_true(value(g, "device_ok_0") == 1);
	gf_graph_destroy(g);
	g = mem_graph("{ dev = 0 }", "{ }");
	assert_int_equal(run(g, 0), 0);
	assert_true(value(g, "device_ok_0") == 0);
	gf_graph_destroy(g);

	/* two consumers asking for different allocators: the second is told */
	g = mem_graph("{ alloc = 1 }", "{ alloc = 2 }");
	assert_int_equal(run(g, 0), 0);
	assert_true(value(g, "set_2") == -EEXIST);
	gf_graph_destroy(g);
}

/* The stall watchdog: a run where no step completes reports the starved
 * edge and the busy stage, then stops with GF_EFAIL: at once before the
 * first step, gracefully (stages flush) after it. */
static void stall_run(int64_t stall_at, int64_t want_step)
{
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int src = add(g, "count_source", "src", "{ n = 0 }", 1);
	char p[64];
	snprintf(p, sizeof(p), "{ stall_at = %lld }", (long long)stall_at);
	int j = add(g, "jitter", "j", p, 1);
	int sink = add(g, "check_sink", "sink", NULL, 1);
	link_(g, src, "out", j, "inp", NULL);
	link_(g, j, "out", sink, "inp", NULL);
	gf_graph_set_stall(g, 0.3, 0.8);
	double t0 = gf_now();
	int rc = run(g, 0);
	double el = gf_now() - t0;
	expect_error(g, rc, GF_EFAIL, "the run stalled: no step completed for");
	expect_error(g, rc, GF_EFAIL, "edge j.out -> sink.inp is starved ('sink' waits on it)");
	expect_error(g, rc, GF_EFAIL, "busy: 'j'");
	expect_error(g, rc, GF_EFAIL, want_step ? "stopped gracefully" : "stopped without a checkpoint");
	assert_int_equal(gf_graph_stop_reason(g), GF_STOP_STALL);
	assert_int_equal(gf_graph_step(g), want_step);
	assert_true(el < 10);
	gf_graph_destroy(g);
}

static void test_stall_watchdog(void **state)
{
	(void)state;
	stall_run(0, 0);   /* nothing ever reaches the sink */
	stall_run(20, 20); /* 20 steps, then nothing */
}

/* ---- the agreed stop of a distributed run ----
 *
 * A synchronous GAN in miniature: `lead` (g_step) begins step k when the
 * follower's token k - 1 is back, sends its fakes k and then computes for
 * a long time; `follow` (d_step) takes fakes k, reports step k at once and
 * sends its token back, then waits for fakes k + 1. A stop requested while
 * the lead computes step K must end the run after K, the step under way:
 * the follower has finished K but cannot begin K + 1 without the lead.
 * Ending after K + 1 (what the follower's last report alone allows) would
 * cost the lead a whole step more, past mpirun's 2 s (docs/dist.md). The
 * peers table stands in for core/dist: rank 0 of a world of 2 whose other
 * rank answers at once with nothing further to run; its answer, from a
 * thread of its own, goes through the calls dist.c's responder makes. */

#define AGREE_K 3

static atomic_int agree_go;           /* the test lets the lead finish step K */
static atomic_llong agree_s = -1;     /* the step the "ranks" agreed on */
static atomic_llong lead_done;        /* steps the lead completed */
static pthread_t agree_t;
static atomic_int agree_started;

static void *agree_thread(void *arg)
{
	(void)arg;
	int64_t s = gf_graph_hold_running(); /* as dist.c's responder does for each rank */
	atomic_store(&agree_s, s);
	gf_graph_stop_running(s);
	return NULL;
}

static int agree_request(void)
{
	if (pthread_create(&agree_t, NULL, agree_thread, NULL))
		return gf_seterr(-EAGAIN, "cannot start the agreement thread");
	atomic_store(&agree_started, 1);
	return 0;
}

static const gf_graph_peers agree_peers = { .stop_request = agree_request };

static int lead_run(void *self, gf_ctx *ctx)
{
	(void)self;
	for (int64_t k = 1;; k++) {
		gf_msg *m;
		int rc;
		if (k > 1 && (rc = gf_pop(ctx, 0, &m)))
			return rc == GF_EEOF || rc == GF_ESTOP ? 0 : rc;
		if (k > 1)
			gf_msg_release(m);
		if ((rc = gf_step_begin(ctx, k)))
			return rc == GF_ESTOP ? 0 : rc;
		if ((rc = gf_msg_get(ctx, 0, &m)))
			return rc == GF_ESTOP ? 0 : rc;
		m->step = k;
		if ((rc = gf_push(ctx, 0, m)))
			return rc == GF_ESTOP ? 0 : rc;
		while (k == AGREE_K && !atomic_load(&agree_go) && !gf_ctx_hard_stop(ctx)) /* the long step */
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
		atomic_store(&lead_done, k);
	}
}

static int follow_run(void *self, gf_ctx *ctx)
{
	(void)self;
	for (;;) {
		gf_msg *in, *out;
		int rc = gf_pop(ctx, 0, &in);
		if (rc)
			return rc == GF_EEOF || rc == GF_ESTOP ? 0 : rc;
		int64_t k = in->step;
		gf_msg_release(in);
		if ((rc = gf_step_begin(ctx, k)))
			return rc == GF_ESTOP ? 0 : rc;
		gf_report_step(ctx, k, 1);
		if ((rc = gf_msg_get(ctx, 0, &out)))
			return rc == GF_ESTOP ? 0 : rc;
		if ((rc = gf_push(ctx, 0, out)))
			return rc == GF_ESTOP ? 0 : rc;
	}
}

static const gf_stage_desc lead = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "lead", .doc = "",
	.inputs = back_in, .ninputs = 1, .outputs = tok_out, .noutputs = 1,
	.flags = GF_STAGE_CYCLE_START, .create = null_create, .run = lead_run,
};

static const gf_stage_desc follow = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "follow", .doc = "",
	.inputs = tok_in, .ninputs = 1, .outputs = back_out, .noutputs = 1,
	.create = null_create, .run = follow_run,
};

static void *stop_in_step_k(void *arg)
{
	gf_graph *g = arg;
	while (gf_graph_step(g) < AGREE_K)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	/* the follower has reported K and now waits for fakes K + 1 */
	nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
	gf_graph_request_stop(g, 0);
	while (atomic_load(&agree_s) < 0)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	atomic_store(&agree_go, 1);
	return NULL;
}

static void test_agreed_stop_in_flight(void **state)
{
	(void)state;
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int a, b;
	assert_int_equal(gf_graph_add_desc(g, &lead, NULL, NULL, 1, &a), 0);
	assert_int_equal(gf_graph_add_desc(g, &follow, NULL, NULL, 1, &b), 0);
	gf_edge_opts one = { .depth = 1 };
	link_(g, a, "out", b, "inp", &one);
	link_(g, b, "back", a, "back", &one);
	gf_graph_set_peers(&agree_peers);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, stop_in_step_k, g), 0);
	gf_run_info info = { .steps = 0, .seed = 1, .world = 2, .backend = "cpu" };
	int rc = gf_graph_run(g, &info, GF_GRAPH_QUIET);
	pthread_join(t, NULL);
	/* the answer's thread may still be inside gf_graph_stop_running (its
	 * log line, the wake-up): gf_graph_run waited for it to leave g, and
	 * it is joined before the next test registers peers */
	if (atomic_load(&agree_started))
		pthread_join(agree_t, NULL);
	gf_graph_set_peers(NULL);
	assert_int_equal(rc, 0);
	assert_int_equal(gf_graph_stop_reason(g), GF_STOP_REQUEST);
	/* the step under way, not the one after it */
	assert_int_equal(atomic_load(&agree_s), AGREE_K);
	assert_int_equal(atomic_load(&lead_done), AGREE_K);
	assert_int_equal(gf_graph_step(g), AGREE_K);
	gf_graph_destroy(g);
}

/* The distributed layer's thread answers whenever its messages arrive,
 * also while a run ends and its graph is destroyed (a STOP_AT that crosses
 * the end of the run): gf_graph_hold_running / gf_graph_stop_running must
 * then find no graph rather than a freed one. A thread calls them without
 * pause while graphs of a world of 2 run, are stopped by it and are
 * destroyed at once; a call that reached a graph after its run returned
 * is a use after free (TSan and ASan report it, ctest -L tsan). */
static atomic_int answer_quit;
static atomic_llong answer_calls;

static void *answer_thread(void *arg)
{
	(void)arg;
	while (!atomic_load(&answer_quit)) {
		int64_t h = gf_graph_hold_running();
		gf_graph_stop_running(h > 0 ? -1 : 0); /* stop now: released at once */
		atomic_fetch_add(&answer_calls, 1);
	}
	return NULL;
}

static void test_answer_after_run(void **state)
{
	(void)state;
	pthread_t t;
	atomic_store(&answer_quit, 0);
	assert_int_equal(pthread_create(&t, NULL, answer_thread, NULL), 0);
	for (int i = 0; i < 40; i++) {
		gf_graph *g;
		assert_int_equal(gf_graph_create(&g), 0);
		int src = add(g, "count_source", "src", "{ n = 0 }", 1);
		int sink = add(g, "check_sink", "sink", NULL, 1);
		link_(g, src, "out", sink, "inp", NULL);
		gf_run_info info = { .steps = 0, .seed = 1, .world = 2, .backend = "cpu" };
		int rc = gf_graph_run(g, &info, GF_GRAPH_QUIET);
		if (rc)
			fail_msg("run %d: %s", i, gf_graph_error(g));
		/* only the answer's stop ends a source of n = 0 */
		assert_int_equal(gf_graph_stop_reason(g), GF_STOP_REQUEST);
		gf_graph_destroy(g);
	}
	atomic_store(&answer_quit, 1);
	pthread_join(t, NULL);
	assert_true(atomic_load(&answer_calls) > 40);
	/* no run in progress: nothing to hold */
	assert_int_equal(gf_graph_hold_running(), -1);
	gf_graph_stop_running(5);
}

static const gf_port_desc opt_in[] = { { "inp", "items", GF_PORT_OPTIONAL, "" } };
static const gf_port_desc opt_out[] = { { "out", "items", GF_PORT_OPTIONAL, "" } };
static const gf_param_desc opt_params[] = { { "tag", GF_PARAM_STR, "none", "", NULL } };

static int opt_run(void *self, gf_ctx *ctx)
{
	(void)self;
	int checks = 0;
	gf_msg *m;
	/* an unconnected optional input is at its end at once */
	checks += gf_pop(ctx, 0, &m) == GF_EEOF && m == NULL;
	checks += gf_try_pop(ctx, 0, &m) == GF_EEOF;
	/* a push to an unconnected optional output is a no-op */
	if (gf_msg_get(ctx, 0, &m) == 0)
		checks += gf_push(ctx, 0, m) == 0;
	checks += gf_port_edges(ctx, 0, 0) == 0 && gf_port_edges(ctx, 1, 0) == 0;
	const gf_run_info *info = gf_ctx_run(ctx);
	checks += info->seed == 1234 && info->world == 1 && !strcmp(info->backend, "cpu");
	checks += !strcmp(gf_ctx_name(ctx), "opt") && gf_ctx_worker(ctx) == 0 && gf_ctx_workers(ctx) == 1;
	checks += gf_should_stop(ctx) == 0;
	gf_report_value(ctx, "checks", checks);
	return 0;
}

static const gf_stage_desc opt = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "opt", .doc = "",
	.inputs = opt_in, .ninputs = 1, .outputs = opt_out, .noutputs = 1, .params = opt_params, .nparams = 1,
	.create = null_create, .run = opt_run,
};

static void test_optional_ports(void **state)
{
	(void)state;
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	assert_int_equal(gf_graph_add_desc(g, &opt, NULL, NULL, 1, NULL), 0);
	assert_int_equal(run(g, 0), 0);
	assert_true(value(g, "checks") == 7);
	gf_graph_destroy(g);
}

/* ---- FLOPs and peaks (a run's MFU) ---- */

static const gf_port_desc flop_out[] = { { "out", "flops", GF_PORT_OPTIONAL, "" } };
static const gf_port_desc flop_in[] = { { "inp", "flops", GF_PORT_MULTI, "" } };
static const gf_param_desc flop_params[] = {
	{ "dev", GF_PARAM_STR, "cpu", "", NULL },
	{ "peak", GF_PARAM_NUM, "0", "", NULL },
	{ "flops", GF_PARAM_NUM, "0", "", NULL },
};

/* reports its device's peak at create, then 100 steps of `flops` each */
static int flop_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	double *f = malloc(sizeof(double));
	if (!f)
		return -ENOMEM;
	*f = gf_param_num(p, "flops");
	*self = f;
	gf_report_peak(ctx, gf_param_str(p, "dev"), gf_param_num(p, "peak"), "a test figure");
	return 0;
}

static int flop_run(void *self, gf_ctx *ctx)
{
	for (int i = 0; i < 100; i++)
		gf_report_flops(ctx, *(double *)self);
	return 0;
}

/* once every source is done: what the graph holds */
static int flop_probe_run(void *self, gf_ctx *ctx)
{
	(void)self;
	gf_msg *m;
	int rc;
	while ((rc = gf_pop(ctx, 0, &m)) == 0)
		gf_msg_release(m);
	double f, p;
	gf_flops_stats(ctx, &f, &p);
	gf_report_value(ctx, "flops", f);
	gf_report_value(ctx, "peak", p);
	return rc == GF_EEOF ? 0 : rc;
}

static const gf_stage_desc flop_src = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "flop_src", .doc = "",
	.outputs = flop_out, .noutputs = 1, .params = flop_params, .nparams = 3,
	.create = flop_create, .run = flop_run, .destroy = free,
};
static const gf_stage_desc flop_probe = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "flop_probe", .doc = "",
	.inputs = flop_in, .ninputs = 1, .create = null_create, .run = flop_probe_run,
};

/* Stages on one device count its peak once (the largest), devices add up,
 * a device without a known peak leaves the run without one; every
 * instance's FLOPs add up. */
static void test_flops_and_peaks(void **state)
{
	(void)state;
	static const char *const srcs[] = { "{ dev = 'cpu', peak = 100, flops = 3 }",
	                                    "{ dev = 'cpu', peak = 150, flops = 5 }",
	                                    "{ dev = 'cuda:0', peak = 1000, flops = 7 }",
	                                    "{ dev = 'cuda:1', peak = 0, flops = 11 }" };
	for (int n = 3; n <= 4; n++) {
		gf_graph *g;
		assert_int_equal(gf_graph_create(&g), 0);
		int probe;
		assert_int_equal(gf_graph_add_desc(g, &flop_probe, "probe", NULL, 1, &probe), 0);
		for (int i = 0; i < n; i++) {
			char name[8];
			snprintf(name, sizeof(name), "s%d", i);
			gf_value v = lua_params(srcs[i]);
			int node;
			assert_int_equal(gf_graph_add_desc(g, &flop_src, name, &v, 1, &node), 0);
			gf_value_free(&v);
			link_(g, node, "out", probe, "inp", NULL);
		}
		assert_int_equal(run(g, 0), 0);
		assert_true(value(g, "flops") == (n == 3 ? 1500.0 : 2600.0));
		assert_true(value(g, "peak") == (n == 3 ? 1150.0 : 0.0));
		gf_graph_destroy(g);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_source_sink),
		cmocka_unit_test(test_workers_keep_order),
		cmocka_unit_test(test_workers_drop_placeholders),
		cmocka_unit_test(test_fanout_and_multi_input),
		cmocka_unit_test(test_fixed_depth_edge),
		cmocka_unit_test(test_step_target),
		cmocka_unit_test(test_graceful_request),
		cmocka_unit_test(test_hard_request),
		cmocka_unit_test(test_grace_timeout),
		cmocka_unit_test(test_grace_busy_flush),
		cmocka_unit_test(test_failure_mid_run),
		cmocka_unit_test(test_failure_in_create),
		cmocka_unit_test(test_validation_errors),
		cmocka_unit_test(test_back_edge_lockstep),
		cmocka_unit_test(test_cycles_without_source),
		cmocka_unit_test(test_port_memory),
		cmocka_unit_test(test_stall_watchdog),
		cmocka_unit_test(test_optional_ports),
		cmocka_unit_test(test_agreed_stop_in_flight),
		cmocka_unit_test(test_flops_and_peaks),
		cmocka_unit_test(test_answer_after_run),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
