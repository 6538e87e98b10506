/* The GPU collectives the exchange stage loads for device tensors: the
 * interface of comm_nccl.so (comm_nccl.c), built only where the CUDA
 * toolkit and NCCL are found, never linked into libganflow or the
 * `ganflow` command. exchange.so dlopens it the first time a request
 * carries a tensor in device memory (a g_step/d_step on the CUDA backend).
 *
 * The communicator spans the ranks of an MPI communicator: rank 0 makes
 * the NCCL unique id and broadcasts it over MPI (the usual bootstrap).
 * Operations are queued on the plugin's own CUDA stream and return at
 * once; `wait` polls for their completion (and NCCL's asynchronous
 * errors), so a dead peer or a hard stop ends the wait: the communicator
 * is then aborted. Counts are floats; every pointer is device memory.
 */
#ifndef GF_EXCHANGE_COMM_H
#define GF_EXCHANGE_COMM_H

#include <stddef.h>
#include <stdint.h>

#define GF_COMM_ABI 1
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
	/* buf (n) <- mean over ranks of buf. */
	int (*allreduce_avg)(void *self, float *buf, size_t n);
	/* recv (counts[rank]) <- mean over ranks of send[displs[rank] ..]: a
	 * reduce-scatter with uneven shards (one grouped ncclReduce per rank). */
	int (*reduce_scatter_avg)(void *self, const float *send, float *recv, const size_t *counts,
	                          const size_t *displs);
	/* buf[displs[r] .. + counts[r]] <- rank r's values, for every r, in
	 * place (grouped ncclBroadcast). */
	int (*allgatherv)(void *self, float *buf, const size_t *counts, const size_t *displs);
	/* One gossip round: x <- (x_left + x + x_right) / 3 with the ring
	 * neighbours; scratch holds 2 n floats. */
	int (*ring_average)(void *self, float *x, float *scratch, size_t n, int left, int right);
	/* Squared L2 norm of x (n) into *out (host). */
	int (*sumsq)(void *self, const float *x, size_t n, double *out);
	/* Waits for everything queued; abort(ud) != 0 or timeout_s seconds
	 * without completion abort the communicator (returns -1, err set). */
	int (*wait)(void *self, double timeout_s, int (*abort)(void *ud), void *ud, char *err, size_t errsize);
	/* Device memory for scratch buffers and tests. */
	int (*dev_alloc)(void *self, void **p, size_t bytes);
	void (*dev_free)(void *self, void *p);
	/* kind: 0 device to host, 1 host to device, 2 device to device;
	 * ordered after everything queued, returns when done. */
	int (*copy)(void *self, void *dst, const void *src, size_t bytes, int kind);
} gf_comm_ops;

#endif
