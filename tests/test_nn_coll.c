/* The backend's collective op (a data-parallel exchange inside a step) on
 * the CPU, with a communicator whose table the test fills as the exchange
 * stage fills its own (core/nn never sees MPI):
 *
 *  - the plain CPU backend runs each collective when called, on host
 *    memory with no stream, and GF_COLL_WAIT runs nothing;
 *  - under the device check (GANFLOW_CPU_DEVICE_CHECK=1) a collective
 *    inside graph_begin/graph_end still runs (captured and replayed
 *    steps alike: the CPU emulates the device eagerly), its kind, buffer,
 *    count and communicator are part of the step's signature (a replay
 *    with another count or kind is refused), its buffer must be device
 *    memory, and a step that does not wait for its collectives before
 *    graph_end is refused, as a CUDA capture with an unjoined stream
 *    fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <ganflow/err.h>
#include <ganflow/nn.h>

#include "test_nn_util.h"

enum { N = 64 };

/* A communicator of two "ranks" whose other rank holds 1 everywhere:
 * the mean is (x + 1) / 2, the sum of doubles x + 1. */
struct fake {
	int calls, last_op;
	gf_device device;
	void *stream;
};

static int fake_run(const gf_comm *c, gf_coll_op op, void *x, size_t n, gf_device device, void *stream)
{
	struct fake *f = c->impl;
	f->calls++;
	f->last_op = op;
	f->device = device;
	f->stream = stream;
	if (op == GF_COLL_MEAN)
		for (size_t i = 0; i < n; i++)
			((float *)x)[i] = (((float *)x)[i] + 1.0f) * 0.5f;
	else if (op == GF_COLL_SUM_F64)
		for (size_t i = 0; i < n; i++)
			((double *)x)[i] += 1.0;
	else
		return gf_seterr(GF_EPARAM, "fake communicator: op %d", (int)op);
	return 0;
}

static void test_plain(void **state)
{
	(void)state;
	gf_backend *be = nn_cpu_dev(1, 0);
	assert_true(GF_BACKEND_HAS(be, collective));
	struct fake f = { 0 };
	gf_comm c = { .rank = 0, .world = 2, .run = fake_run, .impl = &f };
	float x[N];
	for (int i = 0; i < N; i++)
		x[i] = (float)i;
	NN_OK(be->ops->collective(be, &c, GF_COLL_MEAN, x, N));
	assert_int_equal(f.calls, 1);
	assert_int_equal(f.device, GF_CPU);
	assert_null(f.stream);
	for (int i = 0; i < N; i++)
		assert_true(x[i] == ((float)i + 1.0f) * 0.5f);
	NN_OK(be->ops->collective(be, &c, GF_COLL_WAIT, NULL, 0));
	assert_int_equal(f.calls, 1); /* done already: nothing to wait for */
	nn_expect_err(be->ops->collective(be, NULL, GF_COLL_MEAN, x, N), GF_EPARAM, "without a communicator");
	gf_backend_close(be);
}

/* One step: the sum of squares of x into *ss, the collectives, and a
 * scale that reads x after the wait. */
static int step(gf_backend *be, const gf_comm *c, float *x, double *ss, size_t n, gf_coll_op op, int wait)
{
	int rc = be->ops->reduce_dev(be, ss, x, n, 1);
	if (!rc)
		rc = be->ops->collective(be, c, op, op == GF_COLL_SUM_F64 ? (void *)ss : (void *)x,
		                         op == GF_COLL_SUM_F64 ? 1 : n);
	if (!rc && wait)
		rc = be->ops->collective(be, c, GF_COLL_WAIT, NULL, 0);
	if (!rc)
		rc = be->ops->scale(be, x, N, 2.0f);
	return rc;
}

static void test_check(void **state)
{
	(void)state;
	gf_backend *be = nn_cpu_dev(1, 1);
	struct fake f = { 0 };
	gf_comm c = { .rank = 0, .world = 2, .run = fake_run, .impl = &f };
	float *x, host[N], back[N];
	double *ss, ssh;
	NN_OK(be->ops->alloc(be, (void **)&x, N * sizeof(float)));
	NN_OK(be->ops->alloc(be, (void **)&ss, sizeof(double)));
	for (int i = 0; i < N; i++)
		host[i] = (float)i / N;
	NN_OK(be->ops->copy(be, x, host, sizeof(host), GF_COPY_H2D));

	/* captured, then replayed: the collective runs every time */
	gf_graph *g = NULL;
	for (int k = 0; k < 3; k++) {
		NN_OK(be->ops->graph_begin(be, &g));
		int rc = step(be, &c, x, ss, N, GF_COLL_MEAN, 1);
		NN_OK(be->ops->graph_end(be, g));
		NN_OK(rc);
		for (int i = 0; i < N; i++)
			host[i] = (host[i] + 1.0f) * 0.5f * 2.0f;
	}
	assert_int_equal(f.calls, 3);
	assert_int_equal(f.device, GF_CPU);
	NN_OK(be->ops->copy(be, back, x, sizeof(back), GF_COPY_D2H));
	assert_memory_equal(back, host, sizeof(host));
	gf_backend_stats st;
	NN_OK(be->ops->stats(be, &st));
	assert_int_equal(st.graphs, 1);
	assert_int_equal(st.replays, 2);

	/* the collective's count and kind are the step's: another is refused */
	NN_OK(be->ops->graph_begin(be, &g));
	int rc = step(be, &c, x, ss, N / 2, GF_COLL_MEAN, 1);
	nn_expect_err(be->ops->graph_end(be, g), GF_EPARAM, "differs from the captured one");
	NN_OK(rc);
	NN_OK(be->ops->graph_begin(be, &g));
	rc = step(be, &c, x, ss, N, GF_COLL_SUM_F64, 1);
	nn_expect_err(be->ops->graph_end(be, g), GF_EPARAM, "differs from the captured one");
	NN_OK(rc);
	NN_OK(be->ops->copy(be, &ssh, ss, sizeof(ssh), GF_COPY_D2H)); /* the sum of doubles ran too */
	assert_true(ssh >= 1.0);
	be->ops->graph_destroy(be, g);

	/* a collective not waited for before graph_end: capture and replay refused */
	gf_graph *u = NULL;
	NN_OK(be->ops->graph_begin(be, &u));
	rc = step(be, &c, x, ss, N, GF_COLL_MEAN, 0);
	nn_expect_err(be->ops->graph_end(be, u), GF_EUNSUPPORTED, "was not waited for");
	NN_OK(rc);
	be->ops->graph_destroy(be, u);
	u = NULL;
	NN_OK(be->ops->graph_begin(be, &u));
	NN_OK(step(be, &c, x, ss, N, GF_COLL_MEAN, 1));
	NN_OK(be->ops->graph_end(be, u));
	NN_OK(be->ops->graph_begin(be, &u));
	NN_OK(be->ops->collective(be, &c, GF_COLL_MEAN, x, N));
	nn_expect_err(be->ops->graph_end(be, u), GF_EUNSUPPORTED, "was not waited for");
	be->ops->graph_destroy(be, u);
	/* eagerly nothing is refused */
	NN_OK(be->ops->collective(be, &c, GF_COLL_MEAN, x, N));

	/* a host buffer inside a step */
	float h[N];
	memset(h, 0, sizeof(h));
	gf_graph *hg = NULL;
	NN_OK(be->ops->graph_begin(be, &hg));
	nn_expect_err(be->ops->collective(be, &c, GF_COLL_MEAN, h, N), GF_EUNSUPPORTED, "not device memory");
	assert_int_not_equal(be->ops->graph_end(be, hg), 0);
	be->ops->graph_destroy(be, hg);
	be->ops->free(be, x);
	be->ops->free(be, ss);
	gf_backend_close(be);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_check),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
