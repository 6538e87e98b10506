/* The step machinery a GPU step stage runs, tested on the CPU:
 *
 *  - the CPU backend's results left in "device" memory (loss_dev,
 *    reduce_dev) equal its host results bit for bit;
 *  - the CPU backend as a checked device (GANFLOW_CPU_DEVICE_CHECK=1,
 *    core/nn/cpu/graph_cpu.c) refuses inside graph_begin/graph_end what the
 *    CUDA backend refuses (ops that need the host, host buffers), refuses
 *    a replay whose ops, buffers, shapes or constants differ from the
 *    capture but not one whose per-step scalars do, and checks events;
 *  - gf_stepgraph (warm-up, capture, replay per key), gf_readback (results
 *    read later, in order) and gf_devmsg (messages held until the
 *    consumer's copies ran) of <ganflow/train.h>;
 *  - a small GAN-like training step captured and replayed gives the eager
 *    step's parameters bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <ganflow/err.h>
#include <ganflow/msg.h>
#include <ganflow/nn.h>
#include <ganflow/train.h>

#include "test_nn_util.h"

static gf_backend *open_cpu(int check)
{
	return nn_cpu_dev(2, check);
}

static float *dev(gf_backend *be, size_t n)
{
	void *p;
	NN_OK(be->ops->alloc(be, &p, n * sizeof(float)));
	return p;
}

static void expect_err(int rc, int want, const char *text)
{
	nn_expect_err(rc, want, text);
}

/* ---- results on the device ---- */

static void test_loss_reduce_dev(void **state)
{
	(void)state;
	gf_backend *be = open_cpu(0);
	assert_true(GF_BACKEND_HAS(be, loss_dev) && GF_BACKEND_HAS(be, reduce_dev));
	assert_false(gf_train_async(be)); /* a host backend: no events */
	size_t n = 3 * 8192 + 77;
	float *x = dev(be, n), *dx1 = dev(be, n), *dx2 = dev(be, n);
	gf_rng r;
	gf_rng_init(&r, 5, 0);
	NN_OK(be->ops->rng_uniform(be, x, n, 0.01f, 0.99f, &r));
	double ss = 0, rs = 0, s = 0, seq = 0;
	NN_OK(be->ops->sumsq(be, &ss, x, n));
	NN_OK(be->ops->reduce_dev(be, &rs, x, n, 1));
	assert_memory_equal(&ss, &rs, sizeof(ss)); /* the norm gf_net_clip_grad_norm measures */
	NN_OK(be->ops->reduce_dev(be, &s, x, n, 0));
	for (size_t i = 0; i < n; i++)
		seq += x[i];
	assert_memory_equal(&s, &seq, sizeof(s)); /* the mean d_step took of a host copy */
	static const gf_loss_kind kinds[] = { GF_LOSS_BCE, GF_LOSS_NONSAT, GF_LOSS_HINGE_D, GF_LOSS_LS, GF_LOSS_WGAN };
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		int64_t sh[2] = { 64, (int64_t)(n / 64) };
		gf_tensor t = gf_tensor_make(x, GF_F32, 2, sh);
		float lh = 0, *ld = dev(be, 1);
		NN_OK(gf_loss(be, kinds[k], &lh, dx1, &t, NULL, 0.0f, 0.5f));
		NN_OK(gf_loss_dev(be, kinds[k], ld, dx2, &t, NULL, 0.0f, 0.5f));
		assert_memory_equal(&lh, ld, sizeof(lh));
		assert_memory_equal(dx1, dx2, (size_t)sh[0] * (size_t)sh[1] * sizeof(float));
		be->ops->free(be, ld);
	}
	be->ops->free(be, x);
	be->ops->free(be, dx1);
	be->ops->free(be, dx2);
	gf_backend_close(be);
}

/* ---- the checked device: what a graph step may not do ---- */

/* Runs `what` between graph_begin and graph_end of a fresh graph: it must
 * fail with GF_EUNSUPPORTED naming `text`, and so must graph_end. */
#define REFUSED(be, text, call)                                                                \
	do {                                                                                   \
		gf_graph *g_ = NULL;                                                           \
		NN_OK((be)->ops->graph_begin((be), &g_));                                      \
		expect_err((call), GF_EUNSUPPORTED, (text));                                   \
		expect_err((be)->ops->graph_end((be), g_), GF_EUNSUPPORTED, "was not captured"); \
		(be)->ops->graph_destroy((be), g_);                                            \
	} while (0)

static void test_check_refuses(void **state)
{
	(void)state;
	gf_backend *be = open_cpu(1);
	assert_true(gf_train_async(be));
	float *x = dev(be, 256), *y = dev(be, 256), *l = dev(be, 2);
	float host[256] = { 0 };
	double d;
	gf_backend_stats st;
	int64_t sh[2] = { 16, 16 };
	gf_tensor t = gf_tensor_make(x, GF_F32, 2, sh);
	NN_OK(be->ops->fill(be, x, 256, 0.5f));
	float lv;
	REFUSED(be, "loss with a host value", gf_loss(be, GF_LOSS_BCE, &lv, y, &t, NULL, 1.0f, 1.0f));
	REFUSED(be, "sumsq", be->ops->sumsq(be, &d, x, 256));
	REFUSED(be, "sync", be->ops->sync(be));
	REFUSED(be, "from host memory", be->ops->copy(be, x, host, sizeof(host), GF_COPY_H2D));
	REFUSED(be, "to host memory", be->ops->copy(be, host, x, sizeof(host), GF_COPY_D2H));
	REFUSED(be, "asynchronous host copy", be->ops->copy_async(be, x, host, sizeof(host), GF_COPY_H2D));
	REFUSED(be, "stats", be->ops->stats(be, &st));
	void *ev;
	NN_OK(be->ops->event_create(be, &ev));
	REFUSED(be, "event_record", be->ops->event_record(be, ev));
	/* host buffers inside a step, even through a device-to-device copy */
	REFUSED(be, "fill inside a graph step", be->ops->fill(be, host, 256, 1.0f));
	REFUSED(be, "a copy inside a graph step", be->ops->copy(be, x, host, sizeof(host), GF_COPY_D2D));
	REFUSED(be, "axpy", be->ops->axpy(be, y, host, 256, 1.0f));
	/* allowed: device buffers, a loss into a device float */
	gf_graph *g = NULL;
	NN_OK(be->ops->graph_begin(be, &g));
	NN_OK(gf_loss_dev(be, GF_LOSS_BCE, l, y, &t, NULL, 1.0f, 1.0f));
	NN_OK(be->ops->copy(be, y, x, 256 * sizeof(float), GF_COPY_D2D));
	expect_err(be->ops->graph_begin(be, &g), GF_EPARAM, "inside another"); /* nested */
	NN_OK(be->ops->graph_end(be, g));
	expect_err(be->ops->graph_end(be, g), GF_EPARAM, "without the matching graph_begin");
	be->ops->graph_destroy(be, g);
	/* events: waiting on one never recorded orders nothing on a GPU */
	expect_err(be->ops->event_wait(be, ev), GF_EPARAM, "never recorded");
	expect_err(be->ops->event_sync(be, ev), GF_EPARAM, "never recorded");
	NN_OK(be->ops->event_record(be, ev));
	NN_OK(be->ops->event_wait(be, ev));
	be->ops->event_destroy(be, ev);
	/* memory freed is not device memory any more */
	float *gone = dev(be, 16);
	be->ops->free(be, gone);
	REFUSED(be, "not device memory", be->ops->fill(be, gone, 16, 0.0f));
	be->ops->free(be, x);
	be->ops->free(be, y);
	be->ops->free(be, l);
	gf_backend_close(be);
}

/* ---- replays ---- */

struct mini {
	float *z, *w, *g, *state, *y, *dy, *loss;
	gf_rng rng;
	gf_optim_args a;
};

/* A "step": noise, a GEMM, a loss into a device float, an Adam update:
 * per-step scalars (noise offset, Adam's step) change, the rest does not
 * unless asked (n: rows; alpha: a GEMM constant). */
static int mini_step(gf_backend *be, struct mini *m, int n, float alpha)
{
	const gf_backend_ops *o = be->ops;
	gf_loss_desc d = { GF_LOSS_LS, n, 8, 0.0f, 1.0f };
	int rc = o->rng_normal(be, m->z, (size_t)n * 8, 0.0f, 1.0f, &m->rng);
	m->rng.offset += gf_rng_blocks((size_t)n * 8);
	if (!rc)
		rc = o->gemm(be, 0, 0, n, 8, 8, alpha, m->z, 8, m->w, 8, 0.0f, m->y, 8);
	if (!rc)
		rc = o->loss_dev(be, m->loss, m->dy, m->y, NULL, NULL, &d);
	if (!rc)
		rc = o->gemm(be, 1, 0, 8, 8, n, 1.0f, m->z, 8, m->dy, 8, 0.0f, m->g, 8);
	m->a.step++;
	m->a.step_size = m->a.lr / (float)m->a.step;
	if (!rc)
		rc = o->optim_step(be, m->w, m->g, m->state, 64, &m->a);
	return rc;
}

static void mini_init(gf_backend *be, struct mini *m)
{
	memset(m, 0, sizeof(*m));
	m->z = dev(be, 16 * 8);
	m->w = dev(be, 64);
	m->g = dev(be, 64);
	m->state = dev(be, 128);
	m->y = dev(be, 16 * 8);
	m->dy = dev(be, 16 * 8);
	m->loss = dev(be, 1);
	gf_rng_init(&m->rng, 3, 1);
	gf_rng r;
	gf_rng_init(&r, 4, 0);
	NN_OK(be->ops->rng_uniform(be, m->w, 64, -1.0f, 1.0f, &r));
	NN_OK(be->ops->fill(be, m->state, 128, 0.0f));
	m->a = (gf_optim_args){ .kind = GF_OPT_ADAM, .lr = 1e-2f, .beta1 = 0.5f, .beta2 = 0.999f, .eps = 1e-8f,
	                        .bc2_sqrt = 1.0f };
}

static void mini_free(gf_backend *be, struct mini *m)
{
	float *p[] = { m->z, m->w, m->g, m->state, m->y, m->dy, m->loss };
	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		be->ops->free(be, p[i]);
}

static void test_check_replay(void **state)
{
	(void)state;
	gf_backend *be = open_cpu(1), *plain = open_cpu(0);
	struct mini m, e;
	mini_init(be, &m);
	mini_init(plain, &e);
	gf_graph *g = NULL;
	for (int i = 0; i < 5; i++) { /* capture, then replays: the per-step scalars move */
		NN_OK(be->ops->graph_begin(be, &g));
		NN_OK(mini_step(be, &m, 16, 1.0f));
		NN_OK(be->ops->graph_end(be, g));
		NN_OK(mini_step(plain, &e, 16, 1.0f));
	}
	assert_memory_equal(m.w, e.w, 64 * sizeof(float)); /* the eager results, bit for bit */
	gf_backend_stats st;
	NN_OK(be->ops->stats(be, &st));
	assert_int_equal(st.graphs, 1);
	assert_int_equal(st.replays, 4);
	/* a different shape, constant or buffer: refused */
	NN_OK(be->ops->graph_begin(be, &g));
	NN_OK(mini_step(be, &m, 8, 1.0f));
	expect_err(be->ops->graph_end(be, g), GF_EPARAM, "differs from the captured one");
	NN_OK(be->ops->graph_begin(be, &g));
	NN_OK(mini_step(be, &m, 16, 2.0f));
	expect_err(be->ops->graph_end(be, g), GF_EPARAM, "other buffers, shapes or constants");
	float *y2 = m.y;
	m.y = dev(be, 16 * 8);
	NN_OK(be->ops->graph_begin(be, &g));
	NN_OK(mini_step(be, &m, 16, 1.0f));
	expect_err(be->ops->graph_end(be, g), GF_EPARAM, "differs");
	be->ops->free(be, m.y);
	m.y = y2;
	/* the same step again: fine */
	NN_OK(be->ops->graph_begin(be, &g));
	NN_OK(mini_step(be, &m, 16, 1.0f));
	NN_OK(be->ops->graph_end(be, g));
	be->ops->graph_destroy(be, g);
	/* more per-step scalars than the CUDA backend has slots for */
	g = NULL;
	NN_OK(be->ops->graph_begin(be, &g));
	int rc = 0;
	for (int i = 0; i < 600 && !rc; i++)
		rc = be->ops->rng_uniform(be, m.z, 8, 0.0f, 1.0f, &m.rng);
	expect_err(rc, GF_EUNSUPPORTED, "more than 512");
	expect_err(be->ops->graph_end(be, g), GF_EUNSUPPORTED, NULL);
	be->ops->graph_destroy(be, g);
	mini_free(be, &m);
	mini_free(plain, &e);
	gf_backend_close(be);
	gf_backend_close(plain);
}

/* The ema op's decay is a per-step scalar: a step captured at one decay
 * replays at others (StyleGAN2's ramp) with scale then axpy's bits, where
 * scale + axpy themselves carry the decay in the signature. */
static void test_check_ema(void **state)
{
	(void)state;
	gf_backend *be = open_cpu(1), *plain = open_cpu(0);
	assert_true(GF_BACKEND_HAS(be, ema) && GF_BACKEND_HAS(plain, ema));
	enum { N = 1001 };
	float *avg = dev(be, N), *w = dev(be, N), ref[N], wh[N];
	for (int i = 0; i < N; i++) {
		ref[i] = avg[i] = 0.001f * (float)(i % 97) - 0.03f;
		wh[i] = w[i] = 0.37f - 0.002f * (float)(i % 89);
	}
	const float decays[] = { 0.5f, 0.8408964f, 0.99654f, 0.0f, 0.999f };
	gf_graph *g = NULL;
	for (int i = 0; i < 5; i++) {
		NN_OK(be->ops->graph_begin(be, &g));
		NN_OK(be->ops->ema(be, avg, w, N, decays[i]));
		NN_OK(be->ops->graph_end(be, g));
		NN_OK(plain->ops->scale(plain, ref, N, decays[i]));
		NN_OK(plain->ops->axpy(plain, ref, wh, N, 1.0f - decays[i]));
		assert_memory_equal(avg, ref, sizeof(ref));
	}
	gf_backend_stats st;
	NN_OK(be->ops->stats(be, &st));
	assert_int_equal(st.replays, 4);
	be->ops->graph_destroy(be, g);
	g = NULL;
	for (int i = 0; i < 2; i++) {
		NN_OK(be->ops->graph_begin(be, &g));
		NN_OK(be->ops->scale(be, avg, N, decays[i]));
		NN_OK(be->ops->axpy(be, avg, w, N, 1.0f - decays[i]));
		if (i == 0)
			NN_OK(be->ops->graph_end(be, g));
		else
			expect_err(be->ops->graph_end(be, g), GF_EPARAM, "other buffers, shapes or constants");
	}
	be->ops->graph_destroy(be, g);
	be->ops->free(be, avg);
	be->ops->free(be, w);
	gf_backend_close(be);
	gf_backend_close(plain);
}

/* ---- gf_stepgraph ---- */

static void test_stepgraph(void **state)
{
	(void)state;
	gf_backend *be = open_cpu(1);
	struct mini m;
	mini_init(be, &m);
	gf_stepgraph *sg;
	NN_OK(gf_stepgraph_create(&sg, be, 1, "test step"));
	assert_true(gf_stepgraph_enabled(sg));
	int64_t e, c, r;
	/* key 16: warm-up, capture, replays; key 8 in between: its own */
	int seq[] = { 16, 16, 16, 8, 16, 8, 8, 16 };
	for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
		NN_OK(gf_stepgraph_begin(sg, (uint64_t)seq[i], 0));
		NN_OK(gf_stepgraph_end(sg, mini_step(be, &m, seq[i], 1.0f)));
	}
	gf_stepgraph_counts(sg, &e, &c, &r);
	assert_int_equal(e, 2);
	assert_int_equal(c, 2);
	assert_int_equal(r, 4);
	/* eager = 1: no graph whatever the key */
	NN_OK(gf_stepgraph_begin(sg, 16, 1));
	NN_OK(gf_stepgraph_end(sg, mini_step(be, &m, 16, 1.0f)));
	gf_stepgraph_counts(sg, &e, &c, &r);
	assert_int_equal(e, 3);
	/* a stage bug: the same key, other ops: named, not run */
	NN_OK(gf_stepgraph_begin(sg, 16, 0));
	expect_err(gf_stepgraph_end(sg, mini_step(be, &m, 16, 3.0f)), GF_EPARAM, "test step: the replayed step differs");
	/* the key is captured again next time */
	NN_OK(gf_stepgraph_begin(sg, 16, 0));
	NN_OK(gf_stepgraph_end(sg, mini_step(be, &m, 16, 3.0f)));
	NN_OK(gf_stepgraph_begin(sg, 16, 0));
	NN_OK(gf_stepgraph_end(sg, mini_step(be, &m, 16, 3.0f)));
	gf_stepgraph_counts(sg, &e, &c, &r);
	assert_int_equal(c, 3);
	assert_int_equal(r, 5);
	/* a failing step drops its key's graph and returns its error */
	NN_OK(gf_stepgraph_begin(sg, 16, 0));
	assert_int_equal(gf_stepgraph_end(sg, GF_EFAIL), GF_EFAIL);
	/* more keys than slots: the oldest make room, all still run */
	for (int k = 1; k <= 12; k++) {
		NN_OK(gf_stepgraph_begin(sg, 1000 + (uint64_t)k, 0));
		NN_OK(gf_stepgraph_end(sg, mini_step(be, &m, 1 + k % 16, 1.0f)));
	}
	gf_stepgraph_destroy(sg);
	/* disabled, or a backend without graphs: always eager */
	gf_backend *plain = open_cpu(0);
	struct mini p;
	mini_init(plain, &p);
	NN_OK(gf_stepgraph_create(&sg, plain, 1, "plain"));
	assert_false(gf_stepgraph_enabled(sg));
	for (int i = 0; i < 3; i++) {
		NN_OK(gf_stepgraph_begin(sg, 16, 0));
		NN_OK(gf_stepgraph_end(sg, mini_step(plain, &p, 16, 1.0f)));
	}
	gf_stepgraph_counts(sg, &e, &c, &r);
	assert_int_equal(e, 3);
	assert_int_equal(c + r, 0);
	gf_stepgraph_destroy(sg);
	mini_free(plain, &p);
	mini_free(be, &m);
	gf_backend_close(plain);
	gf_backend_close(be);
}

/* ---- gf_readback ---- */

static void readback_case(int check)
{
	gf_backend *be = open_cpu(check);
	gf_readback *rb;
	NN_OK(gf_readback_create(&rb, be, 3, 3));
	assert_int_equal(gf_readback_deferred(rb), check);
	double *slot = gf_readback_slots(rb);
	float *x = dev(be, 100);
	for (int64_t k = 0; k < 5; k++) {
		NN_OK(gf_readback_begin(rb));
		NN_OK(be->ops->fill(be, x, 100, (float)k));
		NN_OK(be->ops->reduce_dev(be, slot + 1, x, 100, 0));
		float f = (float)k + 0.5f;
		NN_OK(be->ops->fill(be, (float *)(void *)slot, 1, f)); /* a loss: the first 4 bytes of slot 0 */
		NN_OK(gf_readback_push(rb, 10 + k));
		if (k >= 1) { /* one step in flight, as the stages keep it */
			int64_t tag;
			const double *v;
			double busy;
			NN_OK(gf_readback_take(rb, &tag, &v, &busy));
			assert_int_equal(tag, 10 + k - 1);
			float lf;
			memcpy(&lf, v, sizeof(lf));
			assert_true(lf == (float)(k - 1) + 0.5f);
			assert_true(v[1] == 100.0 * (double)(k - 1));
			assert_true(busy >= 0);
		}
	}
	assert_int_equal(gf_readback_count(rb), 1);
	/* full: take first */
	NN_OK(gf_readback_push(rb, 20));
	NN_OK(gf_readback_push(rb, 21));
	expect_err(gf_readback_push(rb, 22), GF_EPARAM, "in flight");
	gf_readback_destroy(rb); /* with entries in flight */
	be->ops->free(be, x);
	gf_backend_close(be);
}

static void test_readback(void **state)
{
	(void)state;
	readback_case(0);
	readback_case(1);
}

/* ---- gf_devmsg ---- */

static int released;

static void on_release(void *ud)
{
	(void)ud;
	released++;
}

static void test_devmsg(void **state)
{
	(void)state;
	gf_backend *be = open_cpu(1);
	gf_msg_pool *pool;
	gf_allocator a;
	NN_OK(gf_train_device_allocator(be, &a));
	assert_int_equal(gf_msg_pool_create(4, &a, &pool), 0);
	gf_msg_pool_on_release(pool, on_release, NULL);
	gf_devmsg *prod, *cons;
	NN_OK(gf_devmsg_create(&prod, be));
	NN_OK(gf_devmsg_create(&cons, be));
	released = 0;
	float *dst = dev(be, 8);
	for (int i = 0; i < 3; i++) {
		gf_msg *m = gf_msg_pool_get(pool);
		int64_t sh[1] = { 8 };
		float *x = gf_msg_tensor(m, 0, GF_F32, 1, sh);
		assert_non_null(x);
		NN_OK(be->ops->fill(be, x, 8, (float)i)); /* device memory: the pool's allocator */
		NN_OK(gf_devmsg_ready(prod, m));
		assert_non_null(m->event);
		/* the consumer: wait, copy out, hold */
		NN_OK(gf_devmsg_wait(cons, m));
		gf_graph *g = NULL;
		NN_OK(be->ops->graph_begin(be, &g)); /* the message buffer is device memory */
		NN_OK(be->ops->copy(be, dst, x, 8 * sizeof(float), GF_COPY_D2D));
		NN_OK(be->ops->graph_end(be, g));
		be->ops->graph_destroy(be, g);
		assert_true(dst[7] == (float)i);
		NN_OK(gf_devmsg_release(cons, 1)); /* all held but the newest */
		NN_OK(gf_devmsg_hold(cons, m));
		assert_int_equal(released, i > 0 ? i - 1 : 0); /* the newest before m stays held */
	}
	NN_OK(gf_devmsg_release(cons, 0));
	assert_int_equal(released, 3);
	/* a host message needs no wait */
	gf_msg host = { 0 };
	NN_OK(gf_devmsg_wait(cons, &host));
	gf_devmsg_destroy(cons);
	gf_devmsg_destroy(prod);
	be->ops->free(be, dst);
	gf_backend_close(be);
	gf_msg_pool_destroy(pool); /* device_free after the instance closed */
	/* a host backend releases at once */
	gf_backend *plain = open_cpu(0);
	assert_int_equal(gf_msg_pool_create(2, NULL, &pool), 0);
	gf_msg_pool_on_release(pool, on_release, NULL);
	NN_OK(gf_devmsg_create(&cons, plain));
	released = 0;
	NN_OK(gf_devmsg_hold(cons, gf_msg_pool_get(pool)));
	assert_int_equal(released, 1);
	gf_devmsg_destroy(cons);
	gf_msg_pool_destroy(pool);
	gf_backend_close(plain);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loss_reduce_dev),
		cmocka_unit_test(test_check_refuses),
		cmocka_unit_test(test_check_replay),
		cmocka_unit_test(test_check_ema),
		cmocka_unit_test(test_stepgraph),
		cmocka_unit_test(test_readback),
		cmocka_unit_test(test_devmsg),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
