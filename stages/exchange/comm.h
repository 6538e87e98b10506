/* The GPU collectives the exchange stage loads for device tensors: the
 * interface of comm_nccl.so (comm_nccl.c), built only where the CUDA
 * toolkit and NCCL are found, never linked into libganflow or the
 * `ganflow` command. exchange.so dlopens it at the handshake of a step
 * stage whose backend is a GPU.
 *
 * The communicator spans the ranks of an MPI communicator: rank 0 makes
 * the NCCL unique id and broadcasts it over MPI (the usual bootstrap).
 * Collectives are queued on the stream they are given (the step stage's
 * backend hands the exchange's gf_comm a stream of its own, which may be
 * capturing a CUDA graph: NCCL captures its kernels) and return at once;
 * nothing here waits for the device. A watchdog thread asks async_error
 * and calls abort, which ends NCCL kernels waiting for a dead peer. Counts
 * are elements; every pointer is device memory.
 */
#ifndef GF_EXCHANGE_COMM_H
#define GF_EXCHANGE_COMM_H

#include <stddef.h>
#include <stdint.h>

#define GF_COMM_ABI 2
#define GF_COMM_SYMBOL "ganflow_comm_nccl"

typedef struct gf_comm_ops {
	uint32_t abi;   /* GF_COMM_ABI */
	uint32_t size;  /* sizeof(gf_comm_ops) */
	const char *name;
	/* Number of visible GPUs (0 without any, or without a driver). */
	int (*device_count)(void);
	/* Creates a communicator of `world` ranks on GPU `device`; mpi_comm
	 * points to the MPI_Comm the unique id is broadcast over (may be NULL
	 * when world == 1). Returns 0 or -1 with err set. */
	int (*create)(void **self, void *mpi_comm, int rank, int world, int device, char *err, size_t errsize);
	void (*destroy)(void *self);
	/* Collectives on `stream` (a cudaStream_t of the communicator's GPU;
	 * NULL: the plugin's own). Each returns 0, or -1 with error() set.
	 * buf (n) <- mean over ranks of buf. */
	int (*allreduce_avg)(void *self, float *buf, size_t n, void *stream);
	/* buf (n doubles) <- sum over ranks of buf. */
	int (*allreduce_sum_f64)(void *self, double *buf, size_t n, void *stream);
	/* buf[displs[rank] .. + counts[rank]] <- mean over ranks of that
	 * range, in place (one grouped ncclReduce per rank: uneven shards). */
	int (*reduce_scatter_avg)(void *self, float *buf, const size_t *counts, const size_t *displs, void *stream);
	/* buf[displs[r] .. + counts[r]] <- rank r's values, for every r, in
	 * place (grouped ncclBroadcast). */
	int (*allgatherv)(void *self, float *buf, const size_t *counts, const size_t *displs, void *stream);
	/* One gossip round: x <- (x_left + x + x_right) / 3 with the ring
	 * neighbours; scratch holds 2 n floats. */
	int (*ring_average)(void *self, float *x, float *scratch, size_t n, int left, int right, void *stream);
	/* What the last failed call of this communicator said. */
	const char *(*error)(void *self);
	/* From another thread (the exchange's watchdog): 1 with err set when
	 * NCCL reported an asynchronous error (a peer lost), else 0; abort
	 * aborts the communicator, so kernels waiting on it end. */
	int (*async_error)(void *self, char *err, size_t errsize);
	void (*abort)(void *self);
	/* Device memory for scratch buffers and tests. */
	int (*dev_alloc)(void *self, void **p, size_t bytes);
	void (*dev_free)(void *self, void *p);
	/* kind: 0 device to host, 1 host to device, 2 device to device; on the
	 * plugin's own stream, after everything queued there; returns when
	 * done. */
	int (*copy)(void *self, void *dst, const void *src, size_t bytes, int kind);
} gf_comm_ops;

#endif
