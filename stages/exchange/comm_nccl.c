/* comm_nccl.so: GPU collectives for the exchange stage (see comm.h).
 *
 * Built only where the CUDA toolkit and NCCL are found; plain C against
 * the CUDA runtime, cuBLAS (the few vector operations gossip needs) and
 * NCCL, so it needs no nvcc. The exchange stage dlopens it for step stages
 * whose backend is a GPU; libganflow and the `ganflow` command never link
 * NCCL.
 *
 * Bootstrap: rank 0 calls ncclGetUniqueId and broadcasts it over the MPI
 * communicator it is given; every rank then joins with ncclCommInitRank.
 * Every operation is queued on the stream it is given (the step stage's
 * backend's side stream, inside its captured step) and returns at once;
 * the exchange's watchdog polls ncclCommGetAsyncError and aborts the
 * communicator on a hard stop or a lost rank, so nothing hangs on a dead
 * peer. Uneven shards (ZeRO-1) are grouped ncclReduce / ncclBroadcast
 * calls, one per rank, in place.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include "comm.h"

#define EXPORT __attribute__((visibility("default")))

typedef struct comm {
	ncclComm_t nc;
	cudaStream_t stream;
	cublasHandle_t blas;
	int rank, world, device;
	int aborted;            /* ncclCommAbort freed nc */
	char err[256];
} comm;

#define CUDA_TRY(c, call)                                                                        \
	do {                                                                                     \
		cudaError_t e_ = (call);                                                         \
		if (e_ != cudaSuccess) {                                                         \
			snprintf((c)->err, sizeof((c)->err), "%s: %s", #call, cudaGetErrorString(e_)); \
			return -1;                                                               \
		}                                                                                \
	} while (0)

#define NCCL_TRY(c, call)                                                                        \
	do {                                                                                     \
		ncclResult_t r_ = (call);                                                        \
		if (r_ != ncclSuccess && r_ != ncclInProgress) {                                 \
			snprintf((c)->err, sizeof((c)->err), "%s: %s", #call, ncclGetErrorString(r_)); \
			return -1;                                                               \
		}                                                                                \
	} while (0)

static int device_count(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess)
		return 0;
	return n;
}

static int create(void **self, void *mpi_comm, int rank, int world, int device, char *err, size_t errsize)
{
	*self = NULL;
	comm *c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errsize, "out of memory");
		return -1;
	}
	c->rank = rank;
	c->world = world;
	c->device = device;
	ncclUniqueId id;
	cudaError_t ce = cudaSetDevice(device);
	if (ce != cudaSuccess) {
		snprintf(err, errsize, "cudaSetDevice(%d): %s", device, cudaGetErrorString(ce));
		free(c);
		return -1;
	}
	if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) {
		snprintf(err, errsize, "ncclGetUniqueId failed");
		free(c);
		return -1;
	}
	if (world > 1) {
		if (!mpi_comm || MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, *(MPI_Comm *)mpi_comm) != MPI_SUCCESS) {
			snprintf(err, errsize, "broadcasting the NCCL unique id over MPI failed");
			free(c);
			return -1;
		}
	}
	ncclResult_t nr = ncclCommInitRank(&c->nc, world, id, rank);
	if (nr != ncclSuccess) {
		snprintf(err, errsize, "ncclCommInitRank(rank %d of %d): %s", rank, world, ncclGetErrorString(nr));
		free(c);
		return -1;
	}
	if ((ce = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess ||
	    cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS) {
		snprintf(err, errsize, "CUDA stream or cuBLAS handle: %s", cudaGetErrorString(ce));
		ncclCommDestroy(c->nc);
		free(c);
		return -1;
	}
	cublasSetStream(c->blas, c->stream);
	cublasSetPointerMode(c->blas, CUBLAS_POINTER_MODE_HOST);
	*self = c;
	return 0;
}

static void destroy(void *self)
{
	comm *c = self;
	if (!c)
		return;
	cublasDestroy(c->blas);
	cudaStreamDestroy(c->stream);
	if (!c->aborted)
		ncclCommDestroy(c->nc);
	free(c);
}

static cudaStream_t on(comm *c, void *stream)
{
	return stream ? (cudaStream_t)stream : c->stream;
}

static int allreduce_avg(void *self, float *buf, size_t n, void *stream)
{
	comm *c = self;
	NCCL_TRY(c, ncclAllReduce(buf, buf, n, ncclFloat32, ncclAvg, c->nc, on(c, stream)));
	return 0;
}

static int allreduce_sum_f64(void *self, double *buf, size_t n, void *stream)
{
	comm *c = self;
	NCCL_TRY(c, ncclAllReduce(buf, buf, n, ncclFloat64, ncclSum, c->nc, on(c, stream)));
	return 0;
}

/* In place: rank r's reduce writes its own shard of buf (sendbuff ==
 * recvbuff on the root), which no other reduce of the group reads. */
static int reduce_scatter_avg(void *self, float *buf, const size_t *counts, const size_t *displs, void *stream)
{
	comm *c = self;
	NCCL_TRY(c, ncclGroupStart());
	for (int r = 0; r < c->world; r++)
		NCCL_TRY(c, ncclReduce(buf + displs[r], buf + displs[r], counts[r], ncclFloat32, ncclAvg, r, c->nc,
		                       on(c, stream)));
	NCCL_TRY(c, ncclGroupEnd());
	return 0;
}

static int allgatherv(void *self, float *buf, const size_t *counts, const size_t *displs, void *stream)
{
	comm *c = self;
	NCCL_TRY(c, ncclGroupStart());
	for (int r = 0; r < c->world; r++)
		NCCL_TRY(c, ncclBroadcast(buf + displs[r], buf + displs[r], counts[r], ncclFloat32, r, c->nc,
		                          on(c, stream)));
	NCCL_TRY(c, ncclGroupEnd());
	return 0;
}

static int ring_average(void *self, float *x, float *scratch, size_t n, int left, int right, void *stream)
{
	comm *c = self;
	cudaStream_t s = on(c, stream);
	float *l = scratch, *r = scratch + n;
	NCCL_TRY(c, ncclGroupStart());
	NCCL_TRY(c, ncclSend(x, n, ncclFloat32, left, c->nc, s));
	NCCL_TRY(c, ncclSend(x, n, ncclFloat32, right, c->nc, s));
	NCCL_TRY(c, ncclRecv(l, n, ncclFloat32, left, c->nc, s));
	NCCL_TRY(c, ncclRecv(r, n, ncclFloat32, right, c->nc, s));
	NCCL_TRY(c, ncclGroupEnd());
	/* x <- (l + x + r) / 3 on the same stream */
	const float one = 1.0f, third = 1.0f / 3.0f;
	if (cublasSetStream(c->blas, s) != CUBLAS_STATUS_SUCCESS) {
		snprintf(c->err, sizeof(c->err), "cublasSetStream failed");
		return -1;
	}
	for (size_t off = 0; off < n; off += (size_t)1 << 30) {
		int k = (int)(n - off > ((size_t)1 << 30) ? (size_t)1 << 30 : n - off);
		if (cublasSaxpy(c->blas, k, &one, l + off, 1, x + off, 1) != CUBLAS_STATUS_SUCCESS ||
		    cublasSaxpy(c->blas, k, &one, r + off, 1, x + off, 1) != CUBLAS_STATUS_SUCCESS ||
		    cublasSscal(c->blas, k, &third, x + off, 1) != CUBLAS_STATUS_SUCCESS) {
			snprintf(c->err, sizeof(c->err), "cuBLAS averaging failed");
			return -1;
		}
	}
	return 0;
}

static const char *error(void *self)
{
	comm *c = self;
	return c->err;
}

static int async_error(void *self, char *err, size_t errsize)
{
	comm *c = self;
	ncclResult_t async;
	if (c->aborted || ncclCommGetAsyncError(c->nc, &async) != ncclSuccess || async == ncclSuccess ||
	    async == ncclInProgress)
		return 0;
	snprintf(err, errsize, "NCCL: %s", ncclGetErrorString(async));
	return 1;
}

static void abort_comm(void *self)
{
	comm *c = self;
	if (c->aborted)
		return;
	c->aborted = 1;
	ncclCommAbort(c->nc);
}

static int dev_alloc(void *self, void **p, size_t bytes)
{
	comm *c = self;
	CUDA_TRY(c, cudaMalloc(p, bytes ? bytes : 1));
	return 0;
}

static void dev_free(void *self, void *p)
{
	(void)self;
	cudaFree(p);
}

static int copy(void *self, void *dst, const void *src, size_t bytes, int kind)
{
	comm *c = self;
	enum cudaMemcpyKind k = kind == 0 ? cudaMemcpyDeviceToHost : kind == 1 ? cudaMemcpyHostToDevice
	                                                                      : cudaMemcpyDeviceToDevice;
	CUDA_TRY(c, cudaMemcpyAsync(dst, src, bytes, k, c->stream));
	CUDA_TRY(c, cudaStreamSynchronize(c->stream));
	return 0;
}

EXPORT const gf_comm_ops ganflow_comm_nccl = {
	.abi = GF_COMM_ABI,
	.size = sizeof(gf_comm_ops),
	.name = "nccl",
	.device_count = device_count,
	.create = create,
	.destroy = destroy,
	.allreduce_avg = allreduce_avg,
	.allreduce_sum_f64 = allreduce_sum_f64,
	.reduce_scatter_avg = reduce_scatter_avg,
	.allgatherv = allgatherv,
	.ring_average = ring_average,
	.error = error,
	.async_error = async_error,
	.abort = abort_comm,
	.dev_alloc = dev_alloc,
	.dev_free = dev_free,
	.copy = copy,
};
