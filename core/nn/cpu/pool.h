/* A small fork-join thread pool for the CPU backend's own kernels.
 *
 * gf_pool_for cuts [0, n) into one contiguous part per thread (the caller
 * runs part 0) and returns when all parts are done. Kernels never split a
 * reduction across parts, so results do not depend on the thread count.
 * Workers spin briefly after a job (the next op usually follows within
 * microseconds), then sleep on a futex so that they leave the cores to
 * OpenBLAS during GEMMs. */
#ifndef GF_NN_CPU_POOL_H
#define GF_NN_CPU_POOL_H

#include <stddef.h>

typedef struct gf_pool gf_pool;

/* Work on items [begin, end). */
typedef void (*gf_pool_fn)(void *arg, size_t begin, size_t end);

/* Creates a pool of `threads` threads in all (threads - 1 workers plus the
 * caller). Returns 0 or -errno. */
int gf_pool_create(gf_pool **out, int threads);
void gf_pool_destroy(gf_pool *p);

int gf_pool_threads(const gf_pool *p);

/* Runs fn over [0, n) in parts of at least `grain` items; runs inline when
 * n <= grain or the pool has one thread. Must not be called re-entrantly
 * from inside fn. */
void gf_pool_for(gf_pool *p, size_t n, size_t grain, gf_pool_fn fn, void *arg);

#endif
