/* Collectives of a data-parallel exchange inside a step: the collective op
 * of the CUDA backend.
 *
 * The communicator is not the backend's: the exchange stage fills a
 * gf_comm (<ganflow/backend.h>) whose run queues NCCL on a stream it is
 * given, and this op only decides the stream and the ordering. A
 * collective runs on a side stream of the instance that first waits for
 * everything queued on the instance's stream (an event, "fork"), so the
 * backward kernels queued after it overlap it; GF_COLL_WAIT makes the
 * instance's stream wait for the side stream ("join"), so the update that
 * follows reads the reduced values. Both are stream operations: inside a
 * captured step (graph_cuda.c) they become the graph's edges, and NCCL
 * captures its kernels (the communicator's first collective must run
 * eagerly, where NCCL connects; a step's first run is eager). A capture
 * whose side stream was not joined fails at cudaStreamEndCapture, which is
 * why the CPU device check refuses a step that leaves one unwaited. A
 * replay records the op in the signature and launches nothing: the graph
 * holds the collective. */
#include <errno.h>
#include <stdlib.h>

#include <ganflow/err.h>

#include "cuda.h"

#define GF_CU_OP_COLL 1000 /* beyond cuda.h's op ids */

struct gf_cu_coll {
	cudaStream_t side;
	cudaEvent_t fork, join;
	int pending;              /* launched on the side stream and not joined */
};

static int coll_state(gf_cuda *c)
{
	if (c->coll)
		return 0;
	struct gf_cu_coll *k = calloc(1, sizeof(*k));
	if (!k)
		return gf_seterr(-ENOMEM, "cuda collective: out of memory");
	c->coll = k;
	CU_CHECK(cudaStreamCreateWithFlags(&k->side, cudaStreamNonBlocking));
	CU_CHECK(cudaEventCreateWithFlags(&k->fork, cudaEventDisableTiming));
	CU_CHECK(cudaEventCreateWithFlags(&k->join, cudaEventDisableTiming));
	return 0;
}

int gf_cu_collective(gf_backend *be, const gf_comm *comm, gf_coll_op op, void *x, size_t n)
{
	gf_cuda *c = gf_cu(be);
	TRY(gf_cu_enter(c));
	int rc = GF_CU_SIG(c, GF_CU_OP_COLL, (uint64_t)op, GF_CU_P(x), n, GF_CU_P(comm));
	if (rc < 0)
		return rc;
	if (rc == GF_CU_SKIP)
		return 0;
	TRY(coll_state(c));
	struct gf_cu_coll *k = c->coll;
	if (op == GF_COLL_WAIT) {
		if (!k->pending)
			return 0;
		CU_CHECK(cudaEventRecord(k->join, k->side));
		CU_CHECK(cudaStreamWaitEvent(c->stream, k->join, 0));
		k->pending = 0;
		return 0;
	}
	if (!comm || !comm->run)
		return gf_seterr(GF_EPARAM, "cuda collective: no communicator");
	CU_CHECK(cudaEventRecord(k->fork, c->stream));
	CU_CHECK(cudaStreamWaitEvent(k->side, k->fork, 0));
	k->pending = 1;
	return comm->run(comm, op, x, n, GF_CUDA, (void *)k->side);
}

void gf_cu_coll_destroy(gf_cuda *c)
{
	struct gf_cu_coll *k = c->coll;
	if (!k)
		return;
	if (k->side) {
		cudaStreamSynchronize(k->side);
		cudaStreamDestroy(k->side);
	}
	if (k->fork)
		cudaEventDestroy(k->fork);
	if (k->join)
		cudaEventDestroy(k->join);
	free(k);
	c->coll = NULL;
}
