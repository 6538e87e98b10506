/* Internal declarations shared by the nn engine's files (not installed). */
#ifndef GF_NN_INTERNAL_H
#define GF_NN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Elements [begin, end) of a draw starting at counter block `offset`
 * (rng.c); the CPU backend splits draws over threads with these. */
void gf_rng_fill_uniform(float *out, size_t begin, size_t end, float lo, float hi,
                         uint64_t seed, uint64_t stream, uint64_t offset);
void gf_rng_fill_normal(float *out, size_t begin, size_t end, float mean, float std,
                        uint64_t seed, uint64_t stream, uint64_t offset);

#endif
