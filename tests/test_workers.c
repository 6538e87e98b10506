/* Tests of adaptive worker counts (workers = "auto", <ganflow/workers.h>).
 *
 * The controller with synthetic observations, so each rule is checked
 * exactly: a starved consumer with idle cores grows the count (to the
 * estimate at once, at most by the idle cores, at most to the maximum), a
 * consumer that is not starved, a busy machine and workers starved by their
 * own input do not; a surplus shrinks it one worker at a time after two
 * windows; between the thresholds nothing moves (no oscillation).
 *
 * The deal table (core/runtime/deal.h) that keeps order when the count
 * changes: by hand, and with real threads and rings (a dealer changing the
 * count every few messages, workers, a merger checking every message in
 * order), which ThreadSanitizer checks in build-tsan.
 *
 * Whole graphs with the runtime's test stages: a slow worker stage feeding a
 * fast consumer grows to the count the consumer needs, a fast one stays at
 * one, a stage whose work stops shrinks back, all with check_sink checking
 * order and sequence numbers across the changes; the end of data, a
 * failure, a hard stop and a step target with parked workers; the checks
 * at build time. Assertions on the graphs use what the controller saw and
 * decided, with margins that hold on a loaded 2-core machine.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <ganflow/graph.h>
#include <ganflow/log.h>
#include <ganflow/lua.h>
#include <ganflow/ring.h>
#include <ganflow/workers.h>

#include "../core/runtime/deal.h"

/* ---- the controller ---- */

static gf_workers *ctl(int max, int start)
{
	gf_workers *w;
	gf_workers_opts o = { .max = max, .start = start };
	assert_int_equal(gf_workers_create(&o, &w), 0);
	gf_workers_start(w, 100.0);
	return w;
}

/* A window of 0.5 s in which n workers were busy `busy` of it each (on a
 * core: decoders), the consumer waited `starved` of it, the workers waited
 * `in` of it for input. */
static double cpu_share = 1.0; /* cores a working worker keeps busy */

static int window(gf_workers *w, double *now, int n, double busy, double starved, double in, double idle)
{
	*now += 0.5;
	gf_workers_obs o = { .t = 0.5, .busy = n * busy * 0.5, .in_wait = n * in * 0.5, .starved = starved * 0.5,
		                 .idle = idle, .cpu = cpu_share * n * busy * 0.5, .items = 100 };
	return gf_workers_observe(w, &o, *now);
}

static void test_create(void **state)
{
	(void)state;
	gf_workers *w;
	gf_workers_opts bad = { .max = 0 };
	assert_int_equal(gf_workers_create(&bad, &w), -EINVAL);
	gf_workers_opts bad2 = { .max = 2, .start = 3 };
	assert_int_equal(gf_workers_create(&bad2, &w), -EINVAL);
	w = ctl(4, 0);
	assert_int_equal(gf_workers_count(w), 1); /* starts small */
	gf_workers_destroy(w);
	int cores = gf_workers_cores();
	assert_true(cores >= 1 && cores <= sysconf(_SC_NPROCESSORS_ONLN));
}

static void test_grows_when_starved(void **state)
{
	(void)state;
	gf_workers *w = ctl(16, 1);
	double now = 100.0;
	/* one worker always busy, the consumer waits 3/4 of the time: it
	 * needs 4, and gets ceil(1.1 * 4) = 5 at once (12 cores idle) */
	assert_int_equal(window(w, &now, 1, 1.0, 0.75, 0, 12), 5);
	assert_int_equal(window(w, &now, 5, 0.5, 0.5, 0, 12), 5); /* the window after a change is not judged */
	/* fed: it stays (4 needed of 5: one fewer would be fully busy) */
	for (int i = 0; i < 20; i++)
		assert_int_equal(window(w, &now, 5, 0.8, 0.0, 0, 12), 5);
	gf_worker_stat st;
	gf_workers_stat(w, now, &st);
	assert_int_equal(st.workers, 5);
	assert_int_equal(st.min, 1);
	assert_int_equal(st.max, 5);
	assert_int_equal(st.limit, 16);
	assert_int_equal(st.changes, 1);
	assert_int_equal(st.adaptive, 1);
	assert_true(st.needed > 3.99 && st.needed < 4.01);
	gf_workers_destroy(w);
}

static void test_grow_limits(void **state)
{
	(void)state;
	double now = 100.0;
	/* to the estimate: needed 1.5 -> ceil(1.1 * 1.5) = 2 */
	gf_workers *w = ctl(16, 1);
	assert_int_equal(window(w, &now, 1, 1.0, 1.0 / 3.0, 0, 12), 2);
	gf_workers_destroy(w);
	/* to the idle cores: needs 16, 2.2 cores idle -> 2 more, then 2.6 -> 3 more */
	w = ctl(16, 1);
	assert_int_equal(window(w, &now, 1, 1.0, 15.0 / 16, 0, 2.2), 3);
	assert_int_equal(window(w, &now, 3, 1.0, 13.0 / 16, 0, 2.6), 3);
	assert_int_equal(window(w, &now, 3, 1.0, 13.0 / 16, 0, 2.6), 6);
	gf_workers_destroy(w);
	/* half an idle core still adds one */
	w = ctl(16, 4);
	assert_int_equal(window(w, &now, 4, 1.0, 0.75, 0, 0.6), 5);
	gf_workers_destroy(w);
	/* workers that mostly wait on something else (10% of a core each when
	 * busy): 2 idle cores run 20 more, so the estimate at once */
	cpu_share = 0.1;
	w = ctl(16, 1);
	assert_int_equal(window(w, &now, 1, 1.0, 15.0 / 16, 0, 1.9), 16);
	gf_workers_destroy(w);
	w = ctl(16, 1);
	assert_int_equal(window(w, &now, 1, 1.0, 0.75, 0, 1.9), 5);
	gf_workers_destroy(w);
	cpu_share = 1.0;
	/* to the maximum */
	w = ctl(3, 2);
	assert_int_equal(window(w, &now, 2, 1.0, 0.9, 0, 12), 3);
	assert_int_equal(window(w, &now, 3, 1.0, 0.9, 0, 12), 3);
	assert_int_equal(window(w, &now, 3, 1.0, 0.9, 0, 12), 3);
	gf_workers_destroy(w);
}

static void test_no_grow(void **state)
{
	(void)state;
	double now = 100.0;
	gf_workers *w = ctl(8, 1);
	/* a fast worker (busy 10%), consumer never waits */
	for (int i = 0; i < 10; i++)
		assert_int_equal(window(w, &now, 1, 0.1, 0.0, 0.0, 1.5), 1);
	/* starved, but no core idle: another worker would not run */
	for (int i = 0; i < 10; i++)
		assert_int_equal(window(w, &now, 1, 1.0, 0.5, 0.0, 0.3), 1);
	/* starved, but the worker itself waits for its input half the time:
	 * the stage upstream is the slow one */
	for (int i = 0; i < 10; i++)
		assert_int_equal(window(w, &now, 1, 0.5, 0.7, 0.5, 1.5), 1);
	/* starved a little (3%): not enough to act on */
	for (int i = 0; i < 10; i++)
		assert_int_equal(window(w, &now, 1, 1.0, 0.03, 0.0, 1.5), 1);
	/* a window in which nothing moved is not judged */
	now += 0.5;
	gf_workers_obs idle = { .t = 0.5, .busy = 0, .starved = 0.5, .idle = 2 };
	assert_int_equal(gf_workers_observe(w, &idle, now), 1);
	gf_worker_stat st;
	gf_workers_stat(w, now, &st);
	assert_int_equal(st.changes, 0);
	gf_workers_destroy(w);
}

static void test_shrinks(void **state)
{
	(void)state;
	double now = 100.0;
	gf_workers *w = ctl(8, 4);
	/* four workers, the consumer takes what 1 makes: output rings full */
	assert_int_equal(window(w, &now, 4, 0.25, 0.0, 0, 1), 4); /* one surplus window */
	assert_int_equal(window(w, &now, 4, 0.25, 0.0, 0, 1), 3); /* two: one fewer */
	assert_int_equal(window(w, &now, 3, 1.0 / 3, 0.0, 0, 1), 3); /* after a change: not judged */
	assert_int_equal(window(w, &now, 3, 1.0 / 3, 0.0, 0, 1), 3);
	assert_int_equal(window(w, &now, 3, 1.0 / 3, 0.0, 0, 1), 2);
	/* one worker would be busy all the time: two stay (20% to spare) */
	for (int i = 0; i < 10; i++)
		assert_int_equal(window(w, &now, 2, 0.5, 0.0, 0, 1), 2);
	/* the consumer slows down: one is enough */
	assert_int_equal(window(w, &now, 2, 0.35, 0.0, 0, 1), 2);
	assert_int_equal(window(w, &now, 2, 0.35, 0.0, 0, 1), 1);
	for (int i = 0; i < 10; i++)
		assert_int_equal(window(w, &now, 1, 0.7, 0.0, 0, 1), 1);
	/* a surplus must hold two windows in a row */
	gf_workers_destroy(w);
	w = ctl(8, 3);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(window(w, &now, 3, 0.3, 0.0, 0, 1), 3);
		assert_int_equal(window(w, &now, 3, 0.9, 0.0, 0, 1), 3);
	}
	gf_workers_destroy(w);
}

static void test_no_oscillation(void **state)
{
	(void)state;
	double now = 100.0;
	/* a consumer that needs 1.3 workers, measured with noise: it grows
	 * to 2 once and stays */
	gf_workers *w = ctl(8, 1);
	int n = 1;
	for (int i = 0; i < 200; i++) {
		double need = 1.3 + 0.25 * ((i * 7919) % 11 - 5) / 5.0; /* 1.05 .. 1.55 */
		/* n workers: busy need / n each (capped at 1), the consumer
		 * waits for what they cannot make */
		double busy = need / n < 1.0 ? need / n : 1.0;
		double starved = need > n ? 1.0 - n / need : 0.0;
		n = window(w, &now, n, busy, starved, 0, 1.5);
	}
	gf_worker_stat st;
	gf_workers_stat(w, now, &st);
	assert_int_equal(n, 2);
	assert_int_equal(st.changes, 1);
	gf_workers_destroy(w);
}

static void test_mean(void **state)
{
	(void)state;
	gf_workers *w = ctl(8, 1);
	double now = 100.0;
	gf_workers_obs o = { .t = 1.0, .busy = 1.0, .starved = 0.4, .idle = 4, .cpu = 1.0, .items = 10 };
	now = 101.0;
	assert_int_equal(gf_workers_observe(w, &o, now), 2); /* 1 worker for 1 s, then 2 */
	gf_workers_finish(w, 103.0);
	gf_worker_stat st;
	gf_workers_stat(w, 200.0, &st);
	assert_true(st.mean > 5.0 / 3 - 1e-9 && st.mean < 5.0 / 3 + 1e-9);
	gf_workers_destroy(w);
}

/* ---- the deal table ---- */

static void test_deal_by_hand(void **state)
{
	(void)state;
	gf_deal d;
	gf_deal_cursor dealer, merger;
	assert_int_equal(gf_deal_init(&d, 3, 1), 0);
	assert_int_equal(gf_deal_cursor_init(&d, &dealer, 0), 0);
	assert_int_equal(gf_deal_cursor_init(&d, &merger, 1), 0);
	gf_deal_cursor extra;
	assert_int_equal(gf_deal_cursor_init(&d, &extra, 1), -ENOSPC);
	/* round-robin over 3; at message 10 down to 2, at 13 up to 4 */
	static const int want[] = { 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 0, 1, 0, 0, 1, 2, 3, 0 };
	for (int64_t s = 0; s < 18; s++) {
		int w = gf_deal_worker(&d, &dealer, s);
		if (s == 9)
			assert_int_equal(gf_deal_change(&d, 10, 2), 0);
		if (s == 12)
			assert_int_equal(gf_deal_change(&d, 13, 4), 0);
		assert_int_equal(w, want[s]);
	}
	for (int64_t s = 0; s < 18; s++)
		assert_int_equal(gf_deal_worker(&d, &merger, s), want[s]);
	/* asking again for the same message gives the same worker */
	assert_int_equal(gf_deal_worker(&d, &merger, 17), 0);
	gf_deal_free(&d);
}

static void test_deal_lagging_merger(void **state)
{
	(void)state;
	gf_deal d;
	gf_deal_cursor dealer, merger;
	assert_int_equal(gf_deal_init(&d, 1, 1), 0);
	gf_deal_cursor_init(&d, &dealer, 0);
	gf_deal_cursor_init(&d, &merger, 1);
	/* the merger still at message 0: the table fills its slots, then the
	 * dealer must wait for it */
	int64_t s = 0;
	int changes = 0;
	for (; s < 1000; s++) {
		gf_deal_worker(&d, &dealer, s);
		if (gf_deal_change(&d, s + 1, 1 + (int)(s % 3)) == 0)
			changes++;
		else
			break;
	}
	assert_int_equal(changes, GF_DEAL_CAP - 1);
	assert_int_equal(gf_deal_change(&d, s + 1, 2), -EAGAIN);
	/* once the merger moves on, the slots come free, and it saw every
	 * epoch the dealer dealt by */
	gf_deal_cursor check;
	gf_deal_cursor_init(&d, &check, 0);
	for (int64_t k = 0; k <= s; k++)
		assert_int_equal(gf_deal_worker(&d, &merger, k), gf_deal_worker(&d, &check, k));
	assert_int_equal(gf_deal_change(&d, s + 1, 2), 0);
	gf_deal_free(&d);
}

/* Threads: a dealer deals N numbers to W workers through rings, changing
 * the count at random every few messages; each worker passes what it gets
 * on; a merger takes them back by the table and checks the order. */
#define DW 4
#define DN 30000

struct deal_run {
	gf_deal deal;
	gf_deal_cursor merger; /* placed before the threads start, as the graph does */
	gf_ring *in[DW], *out[DW];
	int64_t merged;
	uintptr_t got;  /* what the merger found where message `merged` belonged */
	int bad;        /* 1: a wrong message, 2: no message within the time limit */
};

static void *dealer_main(void *arg)
{
	struct deal_run *r = arg;
	gf_deal_cursor cur;
	gf_deal_cursor_init(&r->deal, &cur, 0);
	uint64_t rng = 12345;
	for (int64_t s = 0; s < DN; s++) {
		int w = gf_deal_worker(&r->deal, &cur, s);
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		if ((rng >> 33) % 97 == 0) /* every ~100 messages: another count */
			gf_deal_change(&r->deal, s + 1, 1 + (int)((rng >> 40) % DW));
		if (gf_ring_push(r->in[w], (void *)(uintptr_t)(s + 1)))
			break;
	}
	for (int k = 0; k < DW; k++)
		gf_ring_close(r->in[k]);
	return NULL;
}

static void *deal_worker_main(void *arg)
{
	gf_ring **rings = arg; /* in, out */
	void *p;
	while (gf_ring_pop(rings[0], &p) == 0)
		if (gf_ring_push(rings[1], p))
			break;
	gf_ring_close(rings[1]);
	return NULL;
}

static void *merger_main(void *arg)
{
	struct deal_run *r = arg;
	for (;;) {
		void *p;
		int w = gf_deal_worker(&r->deal, &r->merger, r->merged);
		int rc = gf_ring_pop(r->out[w], &p);
		if (rc == GF_EEOF)
			break;
		if (rc || (uintptr_t)p != (uintptr_t)(r->merged + 1)) {
			r->got = rc ? 0 : (uintptr_t)p;
			if (!r->bad)
				r->bad = rc ? 2 : 1;
			break;
		}
		r->merged++;
	}
	return NULL;
}

static void test_deal_threads(void **state)
{
	(void)state;
	struct deal_run r;
	memset(&r, 0, sizeof(r));
	assert_int_equal(gf_deal_init(&r.deal, 1, 1), 0);
	assert_int_equal(gf_deal_cursor_init(&r.deal, &r.merger, 1), 0);
	gf_ring *pairs[DW][2];
	for (int k = 0; k < DW; k++) {
		assert_int_equal(gf_ring_create(32, 32, &r.in[k]), 0);
		assert_int_equal(gf_ring_create(16, 16, &r.out[k]), 0);
		pairs[k][0] = r.in[k];
		pairs[k][1] = r.out[k];
	}
	pthread_t td, tm, tw[DW];
	assert_int_equal(pthread_create(&tm, NULL, merger_main, &r), 0);
	for (int k = 0; k < DW; k++)
		assert_int_equal(pthread_create(&tw[k], NULL, deal_worker_main, pairs[k]), 0);
	assert_int_equal(pthread_create(&td, NULL, dealer_main, &r), 0);
	/* a merger that waits on a ring its message never reaches waits
	 * forever: after 120 s (a few seconds are enough on a loaded 2-core
	 * machine) the rings stop and the test fails */
	struct timespec limit;
	clock_gettime(CLOCK_REALTIME, &limit);
	limit.tv_sec += 120;
	if (pthread_timedjoin_np(tm, NULL, &limit)) {
		r.bad = 2;
		for (int k = 0; k < DW; k++)
			gf_ring_stop(r.out[k]);
		pthread_join(tm, NULL);
	}
	/* a merger that gave up leaves the others blocked on full rings */
	for (int k = 0; r.bad && k < DW; k++) {
		gf_ring_stop(r.in[k]);
		gf_ring_stop(r.out[k]);
	}
	pthread_join(td, NULL);
	for (int k = 0; k < DW; k++)
		pthread_join(tw[k], NULL);
	if (r.bad == 1)
		fail_msg("message %lld: got %lld", (long long)r.merged + 1, (long long)r.got);
	if (r.bad)
		fail_msg("message %lld did not arrive within 120 s", (long long)r.merged + 1);
	assert_int_equal(r.merged, DN);
	assert_true(gf_load_relaxed_u64(&r.deal.n) > 3 * GF_DEAL_CAP); /* the count did change, often */
	for (int k = 0; k < DW; k++) {
		gf_ring_destroy(r.in[k]);
		gf_ring_destroy(r.out[k]);
	}
	gf_deal_free(&r.deal);
}

/* ---- whole graphs ---- */

#define MAX_EDGES 64

static gf_value lua_params(const char *code)
{
	gf_value v;
	char full[1024];
	snprintf(full, sizeof(full), "return %s", code);
	if (gf_lua_eval(full, &v))
		fail_msg("bad parameter literal %s: %s", code, gf_errmsg());
	return v;
}

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

static void link_(gf_graph *g, int a, const char *out, int b, const char *in)
{
	if (gf_graph_connect(g, a, out, b, in, NULL))
		fail_msg("connect: %s", gf_graph_error(g));
}

static int run(gf_graph *g, int64_t steps)
{
	gf_run_info info = { .steps = steps, .seed = 1, .world = 1, .backend = "cpu" };
	return gf_graph_run(g, &info, GF_GRAPH_QUIET);
}

/* src (n items, 0: until stopped) -> jit (workers) -> sink; returns the
 * graph after the run, with the run's result in *rc. */
static gf_graph *pipeline(int64_t n, const char *jit, int workers, const char *sink, int64_t steps, int *rc)
{
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	char p[128];
	snprintf(p, sizeof(p), "{ n = %lld, width = 2 }", (long long)n);
	int a = add(g, "count_source", "src", p, 1);
	int b = add(g, "jitter", "jit", jit, workers);
	int c = add(g, "check_sink", "sink", sink, 1);
	link_(g, a, "out", b, "inp");
	link_(g, b, "out", c, "inp");
	*rc = run(g, steps);
	return g;
}

static gf_worker_stat worker_stat(gf_graph *g)
{
	gf_worker_stat st[4];
	assert_int_equal(gf_graph_worker_stats(g, st, 4), 1);
	assert_string_equal(st[0].stage, "jit");
	return st[0];
}

static void test_graph_grows_to_need(void **state)
{
	(void)state;
	/* 2 ms a worker per item (a sleep: no core is busy), the consumer
	 * 0.4 ms: it needs 5, the stage may use 4 */
	int rc;
	gf_graph *g = pipeline(0, "{ mean_us = 2000 }", GF_WORKERS_AUTO_MAX(4), "{ service_us = 400 }", 6000, &rc);
	assert_int_equal(rc, 0);
	gf_worker_stat st = worker_stat(g);
	assert_int_equal(st.limit, 4);
	assert_int_equal(st.min, 1);
	assert_int_equal(st.max, 4);
	assert_int_equal(st.workers, 4);
	assert_true(st.changes >= 1 && st.changes <= 3); /* 1 -> 4, or by 3 (idle cores permitting), never down */
	/* every worker got messages: 4 rings in, 4 out */
	gf_edge_stat es[MAX_EDGES];
	assert_int_equal(gf_graph_edge_stats(g, es, MAX_EDGES), 8);
	gf_graph_destroy(g);
}

static void test_graph_fast_stays(void **state)
{
	(void)state;
	/* the workers take microseconds, the consumer 1 ms: never starved;
	 * at the end of the data three parked workers end too */
	int rc;
	gf_graph *g = pipeline(3000, "{ mean_us = 0 }", GF_WORKERS_AUTO_MAX(4), "{ expect = 3000, service_us = 1000 }", 0, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(gf_graph_stop_reason(g), GF_STOP_EOF);
	assert_int_equal(gf_graph_items(g), 3000);
	gf_worker_stat st = worker_stat(g);
	assert_int_equal(st.workers, 1);
	assert_int_equal(st.max, 1);
	assert_int_equal(st.changes, 0);
	assert_int_equal(st.limit, 4);
	/* the rings of the parked workers are left out of the table */
	gf_edge_stat es[MAX_EDGES];
	int n = gf_graph_edge_stats(g, es, MAX_EDGES);
	assert_int_equal(n, 2);
	assert_string_equal(es[0].to, "jit#0.inp");
	assert_string_equal(es[1].from, "jit#0.out");
	assert_int_equal(es[1].items, 3000);
	gf_graph_destroy(g);
}

static void test_graph_shrinks_and_keeps_order(void **state)
{
	(void)state;
	/* the first 3000 items take 2 ms each (needs 4 at a 0.5 ms consumer),
	 * the other 10000 nothing: the output rings stay full and the count
	 * comes down; check_sink checks keys and sequence numbers all along */
	int rc;
	gf_graph *g = pipeline(13000, "{ mean_us = 2000, delay_until = 3000 }", GF_WORKERS_AUTO_MAX(4),
	                       "{ expect = 13000, service_us = 500 }", 0, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(gf_graph_items(g), 13000);
	gf_worker_stat st = worker_stat(g);
	assert_true(st.max >= 3);
	/* 5 s of the second part: one down step takes 0.75 s (two windows, and
	 * the one after a change); parked workers wait, they do not work */
	assert_int_equal(st.workers, 1);
	/* up once or more, then down one at a time from the most to 1 */
	assert_true(st.changes >= (uint64_t)st.max);
	gf_graph_destroy(g);
}

static void test_graph_failure_with_parked_workers(void **state)
{
	(void)state;
	int rc;
	gf_graph *g = pipeline(1000, "{ fail_at = 300 }", GF_WORKERS_AUTO_MAX(4), "{ expect = 1000 }", 0, &rc);
	assert_int_equal(rc, GF_EFAIL);
	assert_non_null(strstr(gf_graph_error(g), "failed: injected failure at item 300"));
	gf_graph_destroy(g);
}

static void *stop_later(void *arg)
{
	usleep(600 * 1000);
	gf_graph_request_stop(arg, 1);
	return NULL;
}

static void test_graph_hard_stop_with_parked_workers(void **state)
{
	(void)state;
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	int a = add(g, "count_source", "src", "{ n = 100000000 }", 1);
	int b = add(g, "jitter", "jit", "{ mean_us = 0 }", GF_WORKERS_AUTO_MAX(8));
	int c = add(g, "check_sink", "sink", "{ service_us = 1000 }", 1);
	link_(g, a, "out", b, "inp");
	link_(g, b, "out", c, "inp");
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, stop_later, g), 0);
	assert_int_equal(run(g, 0), GF_ESTOP);
	pthread_join(t, NULL);
	assert_int_equal(gf_graph_stop_reason(g), GF_STOP_HARD);
	gf_graph_destroy(g);
}

static void test_graph_step_target_with_parked_workers(void **state)
{
	(void)state;
	int rc;
	gf_graph *g = pipeline(0, "{ mean_us = 0 }", GF_WORKERS_AUTO_MAX(4), "{ service_us = 100 }", 2000, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(gf_graph_stop_reason(g), GF_STOP_STEPS);
	assert_true(gf_graph_step(g) >= 2000);
	gf_graph_destroy(g);
}

/* A pass-through worker stage whose input takes several edges, compiled
 * in: an adaptive count needs one dealer, so the graph refuses it. */
static int multi_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	(void)ctx;
	(void)p;
	*self = NULL;
	return 0;
}

static int multi_run(void *self, gf_ctx *ctx)
{
	(void)self;
	(void)ctx;
	return 0;
}

static const gf_port_desc multi_in[] = { { "inp", "items", GF_PORT_MULTI, "items" } };
static const gf_port_desc multi_out[] = { { "out", "items", 0, "items" } };
static const gf_stage_desc multi = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "multi", .doc = "test",
	.inputs = multi_in, .ninputs = 1, .outputs = multi_out, .noutputs = 1, .flags = GF_STAGE_WORKERS,
	.create = multi_create, .run = multi_run,
};

static void test_graph_checks(void **state)
{
	(void)state;
	gf_graph *g;
	assert_int_equal(gf_graph_create(&g), 0);
	assert_int_equal(gf_graph_add(g, "check_sink", "s", NULL, GF_WORKERS_AUTO, NULL), GF_EPARAM);
	assert_non_null(strstr(gf_graph_error(g), "stage 's' (check_sink): cannot run workers = \"auto\""));
	assert_int_equal(gf_graph_add(g, "jitter", "j", NULL, GF_WORKERS_AUTO_MAX(65), NULL), GF_EPARAM);
	assert_non_null(strstr(gf_graph_error(g), "max_workers must be 1 to 64, not 65"));
	/* the default maximum: the usable cores */
	int src = add(g, "count_source", "src", "{ n = 10 }", 1);
	int j = add(g, "jitter", "j", NULL, GF_WORKERS_AUTO);
	int sink = add(g, "check_sink", "sink", "{ expect = 10 }", 1);
	link_(g, src, "out", j, "inp");
	link_(g, j, "out", sink, "inp");
	assert_int_equal(run(g, 0), 0);
	gf_worker_stat st[2];
	int cores = gf_workers_cores() < GF_MAX_WORKERS ? gf_workers_cores() : GF_MAX_WORKERS;
	assert_int_equal(gf_graph_worker_stats(g, st, 2), cores > 1);
	if (cores > 1) {
		assert_int_equal(st[0].limit, cores);
		assert_int_equal(st[0].adaptive, 1);
	}
	gf_graph_destroy(g);

	assert_int_equal(gf_graph_create(&g), 0);
	int a = add(g, "count_source", "a", "{ n = 10 }", 1);
	int b = add(g, "count_source", "b", "{ n = 10 }", 1);
	int m;
	assert_int_equal(gf_graph_add_desc(g, &multi, "m", NULL, GF_WORKERS_AUTO_MAX(2), &m), 0);
	sink = add(g, "check_sink", "sink", NULL, 1);
	link_(g, a, "out", m, "inp");
	link_(g, b, "out", m, "inp");
	link_(g, m, "out", sink, "inp");
	assert_int_equal(gf_graph_validate(g), GF_EGRAPH);
	assert_non_null(strstr(gf_graph_error(g), "stage 'm' (multi) runs workers = \"auto\" but its input 'inp' has 2 edges"));
	gf_graph_destroy(g);
	/* a fixed count there is what it was */
	assert_int_equal(gf_graph_create(&g), 0);
	a = add(g, "count_source", "a", "{ n = 10 }", 1);
	b = add(g, "count_source", "b", "{ n = 10 }", 1);
	assert_int_equal(gf_graph_add_desc(g, &multi, "m", NULL, 2, &m), 0);
	sink = add(g, "check_sink", "sink", NULL, 1);
	link_(g, a, "out", m, "inp");
	link_(g, b, "out", m, "inp");
	link_(g, m, "out", sink, "inp");
	assert_int_equal(gf_graph_validate(g), 0);
	gf_graph_destroy(g);
}

int main(void)
{
	/* GF_TEST_ONLY=test_deal_threads runs only the tests it matches */
	if (getenv("GF_TEST_ONLY"))
		cmocka_set_test_filter(getenv("GF_TEST_ONLY"));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create),
		cmocka_unit_test(test_grows_when_starved),
		cmocka_unit_test(test_grow_limits),
		cmocka_unit_test(test_no_grow),
		cmocka_unit_test(test_shrinks),
		cmocka_unit_test(test_no_oscillation),
		cmocka_unit_test(test_mean),
		cmocka_unit_test(test_deal_by_hand),
		cmocka_unit_test(test_deal_lagging_merger),
		cmocka_unit_test(test_deal_threads),
		cmocka_unit_test(test_graph_checks),
		cmocka_unit_test(test_graph_grows_to_need),
		cmocka_unit_test(test_graph_fast_stays),
		cmocka_unit_test(test_graph_shrinks_and_keeps_order),
		cmocka_unit_test(test_graph_failure_with_parked_workers),
		cmocka_unit_test(test_graph_hard_stop_with_parked_workers),
		cmocka_unit_test(test_graph_step_target_with_parked_workers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
