/* Tests of the SPSC ring (<ganflow/ring.h>): bounds and active depth, close /
 * detach / stop semantics, every blocking wait's wake-up path, and stress
 * runs of millions of items between two threads (complete and in order)
 * while a third thread keeps moving the active depth. Run under TSan too. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <ganflow/log.h>
#include <ganflow/ring.h>

#define ITEM(i) ((void *)(uintptr_t)((i) + 1))
#define INDEX(p) ((uint64_t)(uintptr_t)(p) - 1)

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Items for the stress runs: fewer under sanitizers, still millions. */
static uint64_t stress_items(uint64_t normal)
{
	const char *e = getenv("GF_RING_STRESS_ITEMS");
	if (e)
		return strtoull(e, NULL, 10);
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	return normal / 2;
#else
	return normal;
#endif
}

/* ---- single-threaded behaviour ---- */

static void test_create_bounds(void **state)
{
	(void)state;
	gf_ring *r;
	assert_int_equal(gf_ring_create(0, 1, &r), -EINVAL);
	assert_null(r);
	assert_int_equal(gf_ring_create(3, 1, &r), -EINVAL);
	assert_int_equal(gf_ring_create(GF_RING_MAX_CAPACITY * 2, 1, &r), -EINVAL);
	assert_int_equal(gf_ring_create(1, 1, &r), 0);
	assert_int_equal(gf_ring_capacity(r), 1);
	gf_ring_destroy(r);
	assert_int_equal(gf_ring_create(16, 100, &r), 0);
	assert_int_equal(gf_ring_depth(r), 16); /* clamped to the capacity */
	gf_ring_set_depth(r, 0);
	assert_int_equal(gf_ring_depth(r), 1);
	gf_ring_set_depth(r, 7);
	assert_int_equal(gf_ring_depth(r), 7);
	gf_ring_destroy(r);
}

static void test_depth_limits_producer(void **state)
{
	(void)state;
	gf_ring *r;
	assert_int_equal(gf_ring_create(8, 4, &r), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(gf_ring_try_push(r, ITEM(i)), 0);
	assert_int_equal(gf_ring_try_push(r, ITEM(4)), -EAGAIN);
	assert_int_equal(gf_ring_count(r), 4);
	gf_ring_set_depth(r, 8);
	for (int i = 4; i < 8; i++)
		assert_int_equal(gf_ring_try_push(r, ITEM(i)), 0);
	assert_int_equal(gf_ring_try_push(r, ITEM(8)), -EAGAIN);
	/* lowering the depth keeps every item; the producer waits until the
	 * count drops below the new depth */
	gf_ring_set_depth(r, 2);
	void *p;
	for (int i = 0; i < 6; i++) {
		assert_int_equal(gf_ring_try_pop(r, &p), 0);
		assert_int_equal(INDEX(p), (uint64_t)i);
		assert_int_equal(gf_ring_try_push(r, ITEM(100)), -EAGAIN);
	}
	assert_int_equal(gf_ring_try_pop(r, &p), 0);
	assert_int_equal(INDEX(p), 6);
	assert_int_equal(gf_ring_count(r), 1);
	assert_int_equal(gf_ring_try_push(r, ITEM(8)), 0);
	assert_int_equal(gf_ring_try_pop(r, &p), 0);
	assert_int_equal(INDEX(p), 7);
	assert_int_equal(gf_ring_try_pop(r, &p), 0);
	assert_int_equal(INDEX(p), 8);
	assert_int_equal(gf_ring_try_pop(r, &p), -EAGAIN);
	gf_ring_destroy(r);
}

static void test_wraparound(void **state)
{
	(void)state;
	gf_ring *r;
	assert_int_equal(gf_ring_create(4, 4, &r), 0);
	void *p;
	for (uint64_t i = 0; i < 1000; i++) {
		assert_int_equal(gf_ring_try_push(r, ITEM(i)), 0);
		if (i % 3 == 2) {
			for (uint64_t k = i - 2; k <= i; k++) {
				assert_int_equal(gf_ring_try_pop(r, &p), 0);
				assert_int_equal(INDEX(p), k);
			}
		}
	}
	assert_int_equal(gf_ring_try_pop(r, &p), 0);
	assert_int_equal(INDEX(p), 999);
	gf_ring_destroy(r);
}

static void test_close_drains_then_eof(void **state)
{
	(void)state;
	gf_ring *r;
	void *p;
	assert_int_equal(gf_ring_create(8, 8, &r), 0);
	assert_int_equal(gf_ring_try_push(r, ITEM(1)), 0);
	assert_int_equal(gf_ring_try_push(r, ITEM(2)), 0);
	gf_ring_close(r);
	assert_true(gf_ring_is_closed(r));
	assert_int_equal(gf_ring_pop(r, &p), 0);
	assert_int_equal(INDEX(p), 1);
	assert_int_equal(gf_ring_try_pop(r, &p), 0);
	assert_int_equal(INDEX(p), 2);
	assert_int_equal(gf_ring_try_pop(r, &p), GF_EEOF);
	assert_int_equal(gf_ring_pop(r, &p), GF_EEOF);
	gf_ring_destroy(r);
}

static void test_detach_and_stop(void **state)
{
	(void)state;
	gf_ring *r;
	void *p;
	assert_int_equal(gf_ring_create(8, 8, &r), 0);
	assert_int_equal(gf_ring_try_push(r, ITEM(1)), 0);
	gf_ring_detach(r);
	assert_true(gf_ring_is_detached(r));
	assert_int_equal(gf_ring_try_push(r, ITEM(2)), GF_ESTOP);
	assert_int_equal(gf_ring_push(r, ITEM(2)), GF_ESTOP);
	/* the queued item is still there for its owner to drain */
	assert_int_equal(gf_ring_try_pop(r, &p), 0);
	assert_int_equal(INDEX(p), 1);
	gf_ring_destroy(r);

	assert_int_equal(gf_ring_create(8, 8, &r), 0);
	assert_int_equal(gf_ring_try_push(r, ITEM(1)), 0);
	gf_ring_stop(r);
	assert_true(gf_ring_is_stopped(r));
	/* a hard stop wins over queued items */
	assert_int_equal(gf_ring_try_pop(r, &p), GF_ESTOP);
	assert_int_equal(gf_ring_pop(r, &p), GF_ESTOP);
	assert_int_equal(gf_ring_push(r, ITEM(2)), GF_ESTOP);
	gf_ring_destroy(r);
}

/* ---- wake-ups of blocked sides ---- */

struct waiter {
	gf_ring *r;
	int rc;
	void *item;
	double woke;
};

static void *blocked_pop(void *arg)
{
	struct waiter *w = arg;
	w->rc = gf_ring_pop(w->r, &w->item);
	w->woke = gf_now();
	return NULL;
}

static void *blocked_push(void *arg)
{
	struct waiter *w = arg;
	w->rc = gf_ring_push(w->r, w->item);
	w->woke = gf_now();
	return NULL;
}

/* Starts fn on a ring in a known blocked state, applies `wake` after
 * 50 ms, and checks the thread returned `want` promptly afterwards. */
static void check_wakeup(void *(*fn)(void *), void (*prep)(gf_ring *), void (*wake)(gf_ring *), int want,
                         uint64_t want_item)
{
	gf_ring *r;
	assert_int_equal(gf_ring_create(4, 2, &r), 0);
	if (prep)
		prep(r);
	struct waiter w = { .r = r, .rc = 12345, .item = ITEM(77) };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, fn, &w), 0);
	sleep_ms(50);
	double t_wake = gf_now();
	wake(r);
	pthread_join(t, NULL);
	assert_int_equal(w.rc, want);
	assert_true(w.woke - t_wake < 2.0);
	if (want == 0 && fn == blocked_pop)
		assert_int_equal(INDEX(w.item), want_item);
	gf_ring_destroy(r);
}

static void fill2(gf_ring *r)
{
	assert_int_equal(gf_ring_try_push(r, ITEM(0)), 0);
	assert_int_equal(gf_ring_try_push(r, ITEM(1)), 0);
}

static void push5(gf_ring *r) { assert_int_equal(gf_ring_try_push(r, ITEM(5)), 0); }
static void pop1(gf_ring *r)
{
	void *p;
	assert_int_equal(gf_ring_try_pop(r, &p), 0);
	assert_int_equal(INDEX(p), 0);
}
static void raise_depth(gf_ring *r) { gf_ring_set_depth(r, 4); }

static void test_wakeups(void **state)
{
	(void)state;
	/* consumer asleep on an empty ring */
	check_wakeup(blocked_pop, NULL, push5, 0, 5);
	check_wakeup(blocked_pop, NULL, gf_ring_close, GF_EEOF, 0);
	check_wakeup(blocked_pop, NULL, gf_ring_stop, GF_ESTOP, 0);
	/* producer asleep on a ring at its active depth (2 of 4) */
	check_wakeup(blocked_push, fill2, pop1, 0, 0);
	check_wakeup(blocked_push, fill2, raise_depth, 0, 0);
	check_wakeup(blocked_push, fill2, gf_ring_detach, GF_ESTOP, 0);
	check_wakeup(blocked_push, fill2, gf_ring_stop, GF_ESTOP, 0);
}

/* ---- stress ---- */

struct stress {
	gf_ring *r;
	uint64_t n;
	int close_at_end;
	uint64_t got;
	uint64_t bad;  /* first out-of-order index + 1, 0 when all in order */
	int rc;
};

static void *stress_producer(void *arg)
{
	struct stress *s = arg;
	for (uint64_t i = 0; i < s->n; i++) {
		int rc = gf_ring_push(s->r, ITEM(i));
		if (rc) {
			s->rc = rc;
			return NULL;
		}
	}
	if (s->close_at_end)
		gf_ring_close(s->r);
	return NULL;
}

static void *stress_consumer(void *arg)
{
	struct stress *s = arg;
	for (;;) {
		void *p;
		int rc = gf_ring_pop(s->r, &p);
		if (rc == GF_EEOF)
			break;
		if (rc) {
			s->rc = rc;
			break;
		}
		if (INDEX(p) != s->got && !s->bad)
			s->bad = s->got + 1;
		s->got++;
		if (!s->close_at_end && s->got == s->n)
			break;
	}
	return NULL;
}

struct mover {
	gf_ring *r;
	int *stop;
	uint64_t moves;
};

static void *depth_mover(void *arg)
{
	struct mover *m = arg;
	uint64_t x = 88172645463325252ull;
	while (!__atomic_load_n(m->stop, __ATOMIC_RELAXED)) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		gf_ring_set_depth(m->r, (uint32_t)(x % gf_ring_capacity(m->r)) + 1);
		m->moves++;
		struct timespec ts = { 0, 20000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void run_stress(uint32_t cap, uint32_t depth, uint64_t n, int close_at_end, int move_depth)
{
	struct stress s = { .n = n, .close_at_end = close_at_end };
	assert_int_equal(gf_ring_create(cap, depth, &s.r), 0);
	int stop = 0;
	struct mover m = { .r = s.r, .stop = &stop };
	pthread_t p, c, mv;
	double t0 = gf_now();
	assert_int_equal(pthread_create(&c, NULL, stress_consumer, &s), 0);
	assert_int_equal(pthread_create(&p, NULL, stress_producer, &s), 0);
	if (move_depth)
		assert_int_equal(pthread_create(&mv, NULL, depth_mover, &m), 0);
	pthread_join(p, NULL);
	pthread_join(c, NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	if (move_depth)
		pthread_join(mv, NULL);
	double el = gf_now() - t0;
	print_message("  ring cap %u depth %u%s: %llu items in %.3f s (%.1f M/s)%s\n", cap, depth,
	              move_depth ? " (moving)" : "", (unsigned long long)n, el, (double)n / el / 1e6,
	              move_depth ? "" : "");
	assert_int_equal(s.rc, 0);
	assert_int_equal(s.bad, 0);
	assert_int_equal(s.got, n);
	void *q;
	assert_int_equal(gf_ring_try_pop(s.r, &q), close_at_end ? GF_EEOF : -EAGAIN);
	gf_ring_destroy(s.r);
}

static void test_stress_large(void **state)
{
	(void)state;
	run_stress(1024, 1024, stress_items(4000000), 1, 0);
}

static void test_stress_moving_depth(void **state)
{
	(void)state;
	run_stress(64, 8, stress_items(2000000), 1, 1);
}

static void test_stress_lockstep(void **state)
{
	(void)state;
	/* depth 1: every item is a hand-over, most of them through the futex */
	run_stress(1, 1, stress_items(200000), 0, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_bounds),
		cmocka_unit_test(test_depth_limits_producer),
		cmocka_unit_test(test_wraparound),
		cmocka_unit_test(test_close_drains_then_eof),
		cmocka_unit_test(test_detach_and_stop),
		cmocka_unit_test(test_wakeups),
		cmocka_unit_test(test_stress_large),
		cmocka_unit_test(test_stress_moving_depth),
		cmocka_unit_test(test_stress_lockstep),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
