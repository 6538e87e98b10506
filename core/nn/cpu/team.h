/* A small fork-join team of threads for the CPU backend's own kernels
 * ("team" as in OpenMP; in ganflow a "pool" is only a message pool and
 * "pooling" only the max/average layers).
 *
 * gf_team_for cuts [0, n) into one contiguous part per thread (the caller
 * runs part 0) and returns when all parts are done. Kernels never split a
 * reduction across parts, so results do not depend on the thread count.
 * Workers spin briefly after a job (the next op usually follows within
 * microseconds), then sleep on a futex so that they leave the cores to
 * OpenBLAS during GEMMs. */
#ifndef GF_NN_CPU_TEAM_H
#define GF_NN_CPU_TEAM_H

#include <stddef.h>

typedef struct gf_team gf_team;

/* Work on items [begin, end). */
typedef void (*gf_team_fn)(void *arg, size_t begin, size_t end);

/* Creates a team of `threads` threads in all (threads - 1 workers plus the
 * caller). Returns 0 or -errno. */
int gf_team_create(gf_team **out, int threads);
void gf_team_destroy(gf_team *p);

int gf_team_threads(const gf_team *p);

/* Runs fn over [0, n) in parts of at least `grain` items; runs inline when
 * n <= grain or the team has one thread. Must not be called re-entrantly
 * from inside fn. */
void gf_team_for(gf_team *p, size_t n, size_t grain, gf_team_fn fn, void *arg);

#endif
