/* The exchange stage's NCCL plugin (comm_nccl.so) on one GPU, one rank:
 * all-reduce (the mean of one rank is itself), the in-place uneven
 * reduce-scatter and all-gather of ZeRO-1 (one shard), the sum of doubles,
 * a gossip round with the ring neighbours (rank 0 is its own neighbour:
 * (x + x + x) / 3 = x), each on the plugin's own stream and inside a
 * captured CUDA graph launched twice; then the CUDA backend's collective
 * op with a communicator over the plugin (as the exchange stage builds
 * it): a captured step (all-reduce on the side stream, wait, scale)
 * replayed gives the eager step's values, and a step that leaves its
 * collective unwaited is not captured. Exits 77 (skipped) without a GPU.
 * The multi-rank NCCL paths need several GPUs; docs/dist.md says how to
 * run them (mpirun -np N ... backend=cuda). */
#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime.h>

#include <ganflow/err.h>
#include <ganflow/nn.h>

#include "comm.h"

static const gf_comm_ops *ops;
static void *comm;

enum { N = 1000 };

static void fill(float *host)
{
	for (int i = 0; i < N; i++)
		host[i] = (float)i * 0.5f - 100.0f;
}

/* Every collective on one rank: the values stay (the ring average to
 * rounding). stream NULL: the plugin's own. */
static void collectives(float *x, float *scratch, double *d, void *stream)
{
	size_t counts[1] = { N }, displs[1] = { 0 };
	assert_int_equal(ops->allreduce_avg(comm, x, N, stream), 0);
	assert_int_equal(ops->reduce_scatter_avg(comm, x, counts, displs, stream), 0);
	assert_int_equal(ops->allgatherv(comm, x, counts, displs, stream), 0);
	assert_int_equal(ops->allreduce_sum_f64(comm, d, 2, stream), 0);
	assert_int_equal(ops->ring_average(comm, x, scratch, N, 0, 0, stream), 0);
}

static void check(const float *x, const double *d)
{
	float host[N], back[N];
	double dd[2];
	fill(host);
	assert_int_equal(ops->copy(comm, back, x, sizeof(back), 0), 0);
	assert_int_equal(ops->copy(comm, dd, d, sizeof(dd), 0), 0);
	for (int i = 0; i < N; i++)
		assert_float_equal(back[i], host[i], 1e-4 * (1 + fabsf(host[i])));
	assert_true(dd[0] == 1.5 && dd[1] == -2.25);
}

static void test_plugin(void **state)
{
	(void)state;
	float host[N], *x, *scratch;
	double hd[2] = { 1.5, -2.25 }, *d;
	fill(host);
	assert_int_equal(ops->dev_alloc(comm, (void **)&x, N * sizeof(float)), 0);
	assert_int_equal(ops->dev_alloc(comm, (void **)&scratch, 2 * N * sizeof(float)), 0);
	assert_int_equal(ops->dev_alloc(comm, (void **)&d, sizeof(hd)), 0);
	assert_int_equal(ops->copy(comm, x, host, sizeof(host), 1), 0);
	assert_int_equal(ops->copy(comm, d, hd, sizeof(hd), 1), 0);
	collectives(x, scratch, d, NULL);
	check(x, d);

	/* the same collectives captured into a graph on a stream of the test's */
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t e;
	assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
	assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
	collectives(x, scratch, d, s);
	assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
	assert_int_equal(cudaGraphInstantiate(&e, g, 0), cudaSuccess);
	for (int k = 0; k < 2; k++)
		assert_int_equal(cudaGraphLaunch(e, s), cudaSuccess);
	assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
	check(x, d);
	char err[128];
	assert_int_equal(ops->async_error(comm, err, sizeof(err)), 0);
	cudaGraphExecDestroy(e);
	cudaGraphDestroy(g);
	cudaStreamDestroy(s);
	ops->dev_free(comm, x);
	ops->dev_free(comm, scratch);
	ops->dev_free(comm, d);
}

/* A communicator over the plugin, as the exchange stage's run does it for
 * device memory: the mean only. */
static int run(const gf_comm *c, gf_coll_op op, void *x, size_t n, gf_device device, void *stream)
{
	(void)c;
	if (device != GF_CUDA || op != GF_COLL_MEAN)
		return gf_seterr(GF_EPARAM, "test communicator: device memory and GF_COLL_MEAN only");
	return ops->allreduce_avg(comm, x, n, stream) ? gf_seterr(GF_EDIST, "%s", ops->error(comm)) : 0;
}

/* x <- 2 mean(x) + 1: the collective on the side stream, waited for, then
 * the instance's own ops. join = 0 leaves the collective unwaited. */
static int step(gf_backend *be, const gf_comm *c, float *x, int join)
{
	int rc = be->ops->collective(be, c, GF_COLL_MEAN, x, N);
	if (!rc && join)
		rc = be->ops->collective(be, c, GF_COLL_WAIT, NULL, 0);
	if (!rc)
		rc = be->ops->scale(be, x, N, 2.0f);
	if (!rc)
		rc = be->ops->axpy(be, x, x + N, N, 1.0f); /* x + N: ones */
	return rc;
}

static void test_backend_collective(void **state)
{
	(void)state;
	gf_backend *be;
	int orc = gf_backend_open("cuda", &(gf_backend_opts){ 0 }, &be);
	if (orc == GF_ENOBACKEND && strstr(gf_errmsg(), "backend_cuda")) {
		printf("the CUDA backend module was not built: its collective op is not tested (%s)\n", gf_errmsg());
		skip();
	}
	if (orc)
		fail_msg("cuda backend: %s", gf_errmsg());
	assert_true(GF_BACKEND_HAS(be, collective));
	gf_comm c = { .rank = 0, .world = 1, .run = run };
	float *x, host[2 * N], back[N];
	assert_int_equal(be->ops->alloc(be, (void **)&x, 2 * N * sizeof(float)), 0);
	fill(host);
	for (int i = 0; i < N; i++)
		host[N + i] = 1.0f;
	assert_int_equal(be->ops->copy(be, x, host, sizeof(host), GF_COPY_H2D), 0);
	/* eagerly, captured, replayed: each step x <- 2 x + 1 */
	gf_graph *g = NULL;
	assert_int_equal(step(be, &c, x, 1), 0);
	for (int k = 0; k < 3; k++) {
		assert_int_equal(be->ops->graph_begin(be, &g), 0);
		int rc = step(be, &c, x, 1);
		assert_int_equal(be->ops->graph_end(be, g), 0);
		assert_int_equal(rc, 0);
	}
	assert_int_equal(be->ops->copy(be, back, x, sizeof(back), GF_COPY_D2H), 0);
	for (int i = 0; i < N; i++) {
		float want = host[i];
		for (int k = 0; k < 4; k++)
			want = want * 2.0f + 1.0f;
		assert_float_equal(back[i], want, 0);
	}
	be->ops->graph_destroy(be, g);
	/* a capture that leaves its collective's stream unjoined fails */
	gf_graph *bad = NULL;
	assert_int_equal(be->ops->graph_begin(be, &bad), 0);
	(void)step(be, &c, x, 0);
	assert_int_not_equal(be->ops->graph_end(be, bad), 0);
	be->ops->graph_destroy(be, bad);
	be->ops->free(be, x);
	gf_backend_close(be);
}

int main(void)
{
	void *dl = dlopen(GF_COMM_SO, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		printf("test_dist_nccl: cannot load %s: %s\n", GF_COMM_SO, dlerror());
		return 1;
	}
	ops = dlsym(dl, GF_COMM_SYMBOL);
	if (!ops || ops->abi != GF_COMM_ABI || ops->size < sizeof(gf_comm_ops)) {
		printf("test_dist_nccl: %s has no valid descriptor\n", GF_COMM_SO);
		return 1;
	}
	if (ops->device_count() < 1) {
		printf("test_dist_nccl skipped: no GPU (the NCCL plugin compiled and loaded; it needs a device to run)\n");
		return 77;
	}
	char err[512];
	if (ops->create(&comm, NULL, 0, 1, 0, err, sizeof(err))) {
		printf("test_dist_nccl: NCCL communicator of one rank: %s\n", err);
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plugin),
		cmocka_unit_test(test_backend_collective),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	ops->destroy(comm);
	return rc;
}
