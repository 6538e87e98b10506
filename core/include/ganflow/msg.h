/* ganflow messages: refcounted envelopes that travel along graph edges.
 *
 * Every output port owns a pool of envelopes (pool size = ring capacity +
 * in-flight slack) created before the graph runs. A stage takes an envelope
 * with gf_msg_get() (stage.h), fills it, and hands it on with gf_push();
 * ownership passes with the push. The consumer reads it and calls
 * gf_msg_release(), which returns it to its pool when the last reference
 * goes. Nothing is allocated on the hot path: each envelope keeps its
 * tensor buffers between uses and only grows them (gf_msg_buffer), so after
 * the first few messages of a run no allocation happens at all.
 *
 * A message carries up to GF_MSG_MAX_TENSORS tensors, a few named scalars
 * (losses, D(x), ...), and metadata: step, weights version, record key,
 * label, read position. A message carrying device memory carries the CUDA
 * event that marks it ready; the consumer waits on that event.
 */
#ifndef GANFLOW_MSG_H
#define GANFLOW_MSG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <ganflow/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GF_MSG_MAX_TENSORS 8
#define GF_MSG_MAX_SCALARS 24
#define GF_MSG_SCALAR_NAME 24

/* Message flags. */
enum {
	GF_MSG_DROPPED = 1u << 0, /* a worker's placeholder for an input it skipped
	                             (corrupt record): the runtime releases it
	                             instead of delivering it, keeping order */
	GF_MSG_LAST = 1u << 1     /* last message of an epoch / stream segment */
};

typedef struct gf_msg_pool gf_msg_pool;

/* Optional allocator for the buffers of one pool (pinned host memory for
 * batches that go to a GPU, for instance). alloc returns NULL on failure. */
typedef struct gf_allocator {
	void *(*alloc)(void *ud, size_t bytes);
	void (*free)(void *ud, void *p);
	void *ud;
} gf_allocator;

typedef struct gf_scalar {
	char name[GF_MSG_SCALAR_NAME];
	double value;
} gf_scalar;

typedef struct gf_msg {
	/* ---- metadata: written by the producer, read by consumers ---- */
	int64_t seq;       /* per-port sequence number, set by gf_push */
	int64_t step;      /* training step, -1 when none */
	int64_t version;   /* weights version (steps of the network that made it), -1 when none */
	uint64_t key;      /* source record key (dataset index), 0 when none */
	int64_t label;     /* class label, -1 when none */
	int64_t epoch;     /* epoch of the record, -1 when none */
	uint64_t pos;      /* producer-defined read position, for resuming */
	uint32_t flags;    /* GF_MSG_* */
	const char *source;/* static name of where it came from (shard path), or NULL;
	                      must outlive the graph run (owned by the producing stage) */
	int ntensors;
	gf_tensor t[GF_MSG_MAX_TENSORS];
	int nscalars;
	gf_scalar scalars[GF_MSG_MAX_SCALARS];
	void *event;       /* cudaEvent_t that marks device data ready, or NULL */

	/* ---- private to the runtime: do not touch ---- */
	atomic_int refs_;
	gf_msg_pool *pool_;
	uint32_t index_;
	void *buf_[GF_MSG_MAX_TENSORS];
	size_t cap_[GF_MSG_MAX_TENSORS];
} gf_msg;

/* ---- pools (used by the runtime; public for tests and benchmarks) ---- */

/* Creates a pool of n envelopes. alloc may be NULL (malloc/free, 64-byte
 * aligned). Returns 0, -EINVAL (n == 0) or -ENOMEM. */
int gf_msg_pool_create(uint32_t n, const gf_allocator *alloc, gf_msg_pool **out);

/* Replaces the pool's allocator before any envelope holds a buffer (see
 * gf_port_set_allocator). Returns 0 (also when the same allocator is
 * already set), -EINVAL, -EBUSY (buffers were allocated already) or
 * -EEXIST (another allocator was set before). Not thread-safe: call it
 * before the pool is used. */
int gf_msg_pool_set_allocator(gf_msg_pool *pool, const gf_allocator *alloc);

/* Frees the pool and every envelope's buffers. Every message must have
 * been released. */
void gf_msg_pool_destroy(gf_msg_pool *pool);

/* Takes a free envelope without blocking: returns it reset (see
 * gf_msg_reset) with one reference, or NULL when all are in flight.
 * Safe from one taker thread concurrently with any number of releasers. */
gf_msg *gf_msg_pool_get(gf_msg_pool *pool);

/* Number of envelopes currently free. */
uint32_t gf_msg_pool_free_count(const gf_msg_pool *pool);

/* Number of envelopes in the pool (n given to gf_msg_pool_create). */
uint32_t gf_msg_pool_size(const gf_msg_pool *pool);

/* Installs a callback run (from the releasing thread) whenever an envelope
 * returns to the pool, so a blocked taker can be woken. */
void gf_msg_pool_on_release(gf_msg_pool *pool, void (*fn)(void *ud), void *ud);

/* ---- envelopes ---- */

/* Clears the metadata (seq/step/version/label/epoch = -1, key/pos/flags = 0,
 * no tensors, no scalars, no event); keeps the buffers. */
void gf_msg_reset(gf_msg *m);

/* Adds a reference (fan-out to several edges, or a stage keeping a message
 * while passing it on). */
void gf_msg_retain(gf_msg *m);

/* Drops a reference; the last one returns the envelope to its pool.
 * NULL is ignored. After the call the caller must not touch m. */
void gf_msg_release(gf_msg *m);

/* Buffer of at least `bytes` bytes for tensor slot `slot` (0 <= slot <
 * GF_MSG_MAX_TENSORS), owned by the envelope and kept across uses; grows
 * (realloc through the pool's allocator) only when too small. Contents are
 * not preserved on growth. Returns NULL on allocation failure.
 * Valid until the envelope's next growth of that slot or the pool's end. */
void *gf_msg_buffer(gf_msg *m, int slot, size_t bytes);

/* Sets m->t[slot] to a contiguous CPU tensor of the given dtype and shape,
 * backed by the slot's buffer (gf_msg_buffer), raises m->ntensors to
 * slot + 1 if lower, and returns the data pointer (NULL on allocation
 * failure or ndim > GF_MAX_DIMS). Layout NCHW. */
void *gf_msg_tensor(gf_msg *m, int slot, gf_dtype dtype, int ndim, const int64_t *shape);

/* Sets (adds or replaces) a named scalar; names longer than
 * GF_MSG_SCALAR_NAME - 1 are truncated. Returns 0 or -ENOSPC when full. */
int gf_msg_set_scalar(gf_msg *m, const char *name, double value);

/* Value of a named scalar, or def when absent. */
double gf_msg_scalar(const gf_msg *m, const char *name, double def);

#ifdef __cplusplus
}
#endif
#endif
