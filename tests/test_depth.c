/* Tests of the adaptive depth controller (<ganflow/depth.h>) with synthetic
 * timings, so each rule is checked exactly: steady producers keep the
 * minimum, a bursty producer gets a depth that covers its gaps, a slow
 * producer (with or without jitter) gets nothing, quiet windows lower the
 * depth one step at a time, fixed edges never move, and the time-weighted
 * statistics add up. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ganflow/depth.h>
#include <ganflow/ring.h>

struct edge {
	gf_ring *r;
	gf_depth *d;
	double now;
};

static void edge_open(struct edge *e, uint32_t cap, const gf_depth_opts *o)
{
	assert_int_equal(gf_ring_create(cap, 1, &e->r), 0);
	assert_int_equal(gf_depth_create(e->r, o, &e->d), 0);
	e->now = 1000.0;
	gf_depth_start(e->d, e->now);
}

static void edge_close(struct edge *e)
{
	gf_depth_destroy(e->d);
	gf_ring_destroy(e->r);
}

/* One item through the edge: the producer took `produce` s to make it, the
 * consumer `service` s to use the previous one, and waited `wait` s (a
 * stall when > 0). */
static void item(struct edge *e, double produce, double service, double wait)
{
	gf_depth_on_push(e->d, produce, 0);
	e->now += service + wait;
	gf_depth_on_pop(e->d, service, wait > 0, wait, e->now);
}

static void test_create(void **state)
{
	(void)state;
	gf_ring *r;
	gf_depth *d;
	assert_int_equal(gf_ring_create(16, 16, &r), 0);
	gf_depth_opts bad = { .fixed = 32 };
	assert_int_equal(gf_depth_create(r, &bad, &d), -EINVAL);
	gf_depth_opts badmin = { .min = 17 };
	assert_int_equal(gf_depth_create(r, &badmin, &d), -EINVAL);
	assert_int_equal(gf_depth_create(r, NULL, &d), 0);
	/* adaptive edges start at the minimum, and say so to the ring */
	assert_int_equal(gf_ring_depth(r), GF_DEPTH_MIN_DEFAULT);
	gf_depth_destroy(d);
	gf_depth_opts fixed = { .fixed = 5 };
	assert_int_equal(gf_depth_create(r, &fixed, &d), 0);
	assert_int_equal(gf_ring_depth(r), 5);
	gf_depth_destroy(d);
	gf_ring_destroy(r);
}

static void test_steady_keeps_minimum(void **state)
{
	(void)state;
	struct edge e;
	edge_open(&e, 64, NULL);
	for (int i = 0; i < 5000; i++)
		item(&e, 0.5e-3, 1e-3, 0);
	gf_edge_stat st;
	gf_depth_stat(e.d, e.now, &st);
	assert_int_equal(st.depth, 2);
	assert_int_equal(st.depth_max, 2);
	assert_int_equal(st.stalls, 0);
	assert_int_equal(st.items, 5000);
	assert_true(fabs(gf_depth_service_mean(e.d) - 1e-3) < 1e-9);
	assert_true(fabs(gf_depth_interarrival_mean(e.d) - 0.5e-3) < 1e-9);
	edge_close(&e);
}

static void test_bursty_raises_to_cover_gap(void **state)
{
	(void)state;
	struct edge e;
	edge_open(&e, 64, NULL);
	/* producer: 0.2 ms per item, a 20 ms pause before every 40th item;
	 * consumer: 1 ms per item, so the pause empties a shallow ring and the
	 * consumer waits out most of it */
	uint32_t first_raise = 0;
	int raised_at = -1;
	for (int i = 0; i < 400; i++) {
		int burst = i % 40 == 39;
		double produce = burst ? 20.2e-3 : 0.2e-3;
		double wait = burst ? 18e-3 : 0;
		item(&e, produce, 1e-3, wait);
		if (raised_at < 0 && gf_ring_depth(e.r) > 2) {
			raised_at = i;
			first_raise = gf_ring_depth(e.r);
		}
	}
	/* the first stall after the warm-up raised the depth by the 18 slots
	 * the consumer would have needed */
	assert_int_equal(raised_at, 39);
	assert_int_equal(first_raise, 2 + 18);
	gf_edge_stat st;
	gf_depth_stat(e.d, e.now, &st);
	assert_true(st.depth_max >= 20);
	assert_true(st.depth_max <= 64);
	assert_int_equal(st.stalls, 10);
	edge_close(&e);
}

static void test_slow_producer_gets_nothing(void **state)
{
	(void)state;
	struct edge e;
	/* steady but slower than the consumer: every pop stalls, no jitter */
	edge_open(&e, 64, NULL);
	for (int i = 0; i < 2000; i++)
		item(&e, 2e-3, 1e-3, 1e-3);
	assert_int_equal(gf_ring_depth(e.r), 2);
	edge_close(&e);
	/* jittery and slower on average: depth cannot help, it stays low */
	edge_open(&e, 64, NULL);
	for (int i = 0; i < 2000; i++)
		item(&e, i % 2 ? 0.5e-3 : 4e-3, 1e-3, i % 2 ? 0 : 3e-3);
	assert_int_equal(gf_ring_depth(e.r), 2);
	edge_close(&e);
}

static void test_quiet_window_lowers_slowly(void **state)
{
	(void)state;
	struct edge e;
	edge_open(&e, 64, NULL);
	/* warm up, then one big stall with high jitter: depth 2 + 30 */
	for (int i = 0; i < 60; i++)
		item(&e, 0.2e-3, 1e-3, 0);
	item(&e, 30e-3, 1e-3, 30e-3);
	assert_int_equal(gf_ring_depth(e.r), 32);
	/* quiet: window = max(32, 2 d) = 64 pops per step down */
	for (int i = 0; i < 63; i++)
		item(&e, 0.2e-3, 1e-3, 0);
	assert_int_equal(gf_ring_depth(e.r), 32);
	item(&e, 0.2e-3, 1e-3, 0);
	assert_int_equal(gf_ring_depth(e.r), 31);
	for (int i = 0; i < 62; i++)
		item(&e, 0.2e-3, 1e-3, 0);
	assert_int_equal(gf_ring_depth(e.r), 30);
	/* a long quiet spell goes all the way down to the minimum, no lower */
	for (int i = 0; i < 5000; i++)
		item(&e, 0.2e-3, 1e-3, 0);
	assert_int_equal(gf_ring_depth(e.r), 2);
	gf_edge_stat st;
	gf_depth_stat(e.d, e.now, &st);
	assert_int_equal(st.depth_min, 2);
	assert_int_equal(st.depth_max, 32);
	edge_close(&e);
}

static void test_full_ring_with_fast_consumer_doubles(void **state)
{
	(void)state;
	struct edge e;
	edge_open(&e, 64, NULL);
	/* the consumer takes 0.1 ms per item but the producer (1 ms per item)
	 * keeps finding the ring full: the consumer is busy elsewhere (the
	 * ordered merge of workers). The depth doubles, at most once per d pops. */
	uint32_t seen[8] = { 0 };
	int nseen = 0;
	for (int i = 0; i < 200; i++) {
		gf_depth_on_push(e.d, 1e-3, 1);
		e.now += 1e-3;
		gf_depth_on_pop(e.d, 0.1e-3, 0, 0, e.now);
		uint32_t d = gf_ring_depth(e.r);
		if (nseen < 8 && (nseen == 0 || seen[nseen - 1] != d))
			seen[nseen++] = d;
	}
	assert_int_equal(nseen, 6);
	assert_int_equal(seen[0], 2);
	assert_int_equal(seen[1], 4);
	assert_int_equal(seen[2], 8);
	assert_int_equal(seen[3], 16);
	assert_int_equal(seen[4], 32);
	assert_int_equal(seen[5], 64);
	edge_close(&e);
	/* the same full ring with a slower consumer: it is the bottleneck, a
	 * deeper ring would only hold more memory */
	edge_open(&e, 64, NULL);
	for (int i = 0; i < 200; i++) {
		gf_depth_on_push(e.d, 0.5e-3, 1);
		e.now += 1e-3;
		gf_depth_on_pop(e.d, 1e-3, 0, 0, e.now);
	}
	assert_int_equal(gf_ring_depth(e.r), 2);
	edge_close(&e);
}

static void test_fixed_never_moves(void **state)
{
	(void)state;
	struct edge e;
	gf_depth_opts o = { .fixed = 4 };
	edge_open(&e, 64, &o);
	for (int i = 0; i < 200; i++)
		item(&e, i % 10 == 9 ? 50e-3 : 0.1e-3, 1e-3, i % 10 == 9 ? 45e-3 : 0);
	gf_edge_stat st;
	gf_depth_stat(e.d, e.now, &st);
	assert_int_equal(st.fixed, 1);
	assert_int_equal(st.depth, 4);
	assert_int_equal(st.depth_min, 4);
	assert_int_equal(st.depth_max, 4);
	assert_true(fabs(st.depth_mean - 4.0) < 1e-9);
	assert_int_equal(st.stalls, 20);
	edge_close(&e);
}

static void test_time_weighted_mean(void **state)
{
	(void)state;
	struct edge e;
	gf_depth_opts o = { .min = 2 };
	edge_open(&e, 64, &o);
	/* 1 s at depth 2 ... */
	for (int i = 0; i < 20; i++)
		item(&e, 0.2e-3, 1e-3, 0);
	double t_before = e.now;
	/* ... then a stall raises it to 2 + 10 = 12 ... */
	item(&e, 10.2e-3, 1e-3, 10e-3);
	assert_int_equal(gf_ring_depth(e.r), 12);
	double t_raise = e.now;
	/* ... held for 1 s (no pops: the statistics clock still runs) */
	gf_edge_stat st;
	gf_depth_stat(e.d, t_raise + 1.0, &st);
	double expect = (2.0 * (t_raise - 1000.0) + 12.0 * 1.0) / (t_raise + 1.0 - 1000.0);
	assert_true(fabs(st.depth_mean - expect) < 1e-9);
	assert_true(t_before > 1000.0);
	/* finish freezes the clock */
	gf_depth_finish(e.d, t_raise + 1.0);
	gf_depth_stat(e.d, t_raise + 100.0, &st);
	assert_true(fabs(st.depth_mean - expect) < 1e-9);
	edge_close(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create),
		cmocka_unit_test(test_steady_keeps_minimum),
		cmocka_unit_test(test_bursty_raises_to_cover_gap),
		cmocka_unit_test(test_slow_producer_gets_nothing),
		cmocka_unit_test(test_quiet_window_lowers_slowly),
		cmocka_unit_test(test_full_ring_with_fast_consumer_doubles),
		cmocka_unit_test(test_fixed_never_moves),
		cmocka_unit_test(test_time_weighted_mean),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
