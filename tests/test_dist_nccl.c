/* The exchange stage's NCCL plugin (comm_nccl.so) on one GPU, one rank:
 * all-reduce (the mean of one rank is itself), the uneven reduce-scatter
 * and all-gather of ZeRO-1 (one shard), a gossip round with the ring
 * neighbours (rank 0 is its own neighbour: (x + x + x) / 3 = x), the
 * squared norm, and the wait. Exits 77 (skipped) without a GPU. The
 * multi-rank NCCL paths need several GPUs; docs/dist.md says how to run
 * them (mpirun -np N ... backend=cuda). */
#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "comm.h"

static const gf_comm_ops *ops;
static void *comm;

static int never(void *ud)
{
	(void)ud;
	return 0;
}

static void test_one_rank(void **state)
{
	(void)state;
	enum { N = 1000 };
	float host[N], back[N];
	for (int i = 0; i < N; i++)
		host[i] = (float)i * 0.5f - 100.0f;
	float *x, *scratch;
	assert_int_equal(ops->dev_alloc(comm, (void **)&x, N * sizeof(float)), 0);
	assert_int_equal(ops->dev_alloc(comm, (void **)&scratch, 2 * N * sizeof(float)), 0);
	assert_int_equal(ops->copy(comm, x, host, sizeof(host), 1), 0);
	char err[256];

	assert_int_equal(ops->allreduce_avg(comm, x, N), 0);
	assert_int_equal(ops->wait(comm, 10, never, NULL, err, sizeof(err)), 0);
	assert_int_equal(ops->copy(comm, back, x, sizeof(back), 0), 0);
	for (int i = 0; i < N; i++)
		assert_float_equal(back[i], host[i], 0);

	size_t counts[1] = { N }, displs[1] = { 0 };
	assert_int_equal(ops->reduce_scatter_avg(comm, x, scratch, counts, displs), 0);
	assert_int_equal(ops->allgatherv(comm, scratch, counts, displs), 0);
	assert_int_equal(ops->wait(comm, 10, never, NULL, err, sizeof(err)), 0);
	assert_int_equal(ops->copy(comm, back, scratch, sizeof(back), 0), 0);
	for (int i = 0; i < N; i++)
		assert_float_equal(back[i], host[i], 0);

	assert_int_equal(ops->ring_average(comm, x, scratch, N, 0, 0), 0);
	assert_int_equal(ops->wait(comm, 10, never, NULL, err, sizeof(err)), 0);
	assert_int_equal(ops->copy(comm, back, x, sizeof(back), 0), 0);
	for (int i = 0; i < N; i++)
		assert_float_equal(back[i], host[i], 1e-4 * (1 + fabsf(host[i])));

	double ss = 0, want = 0;
	for (int i = 0; i < N; i++)
		want += (double)host[i] * host[i];
	assert_int_equal(ops->sumsq(comm, x, N, &ss), 0);
	assert_true(fabs(ss - want) <= 1e-4 * want);
	ops->dev_free(comm, x);
	ops->dev_free(comm, scratch);
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
		cmocka_unit_test(test_one_rank),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	ops->destroy(comm);
	return rc;
}
