/* ganflow randomness: a counter-based generator (Philox4x32-10).
 *
 * Every random number ganflow draws (weight initialisation, noise z,
 * dropout masks, shuffles) is a pure function of (key, stream, counter):
 * element i of a draw that starts at counter offset o comes from Philox
 * block o + i/4, lane i%4. A draw can therefore be split over any number of
 * threads, or run on a GPU, and give the same numbers; and the whole state
 * of a generator is three integers that a checkpoint stores and restores
 * exactly (see gf_ckpt_save in <ganflow/nn.h>).
 *
 * The block function and the element transforms are `static inline` here
 * so that every backend (the CPU backend, the CUDA backend's kernels with
 * GF_RNG_HD defined to __host__ __device__) computes bit-identical masks
 * and uniforms from the same state. The normal transform uses log/cos/sin
 * and is identical between runs of one build on one machine.
 */
#ifndef GANFLOW_RNG_H
#define GANFLOW_RNG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef GF_RNG_HD
#define GF_RNG_HD
#endif

/* A generator: Philox key (the seed), a stream id that separates
 * independent sequences under one seed (e.g. "noise of rank 3" versus
 * "dropout of D"), and the next unused counter block. Copyable by value. */
typedef struct gf_rng {
	uint64_t seed;    /* Philox key */
	uint64_t stream;  /* high 64 bits of the Philox counter */
	uint64_t offset;  /* low 64 bits of the counter: next unused block */
} gf_rng;

/* ---- the block function ---- */

/* Philox4x32 with 10 rounds (Salmon et al., SC'11, Random123's
 * philox4x32_10): counter ctr[4], key key[2] -> out[4]. */
static inline GF_RNG_HD void gf_philox4x32(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2])
{
	uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
	uint32_t k0 = key[0], k1 = key[1];
	for (int r = 0; r < 10; r++) {
		uint64_t p0 = (uint64_t)0xD2511F53u * c0;
		uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
		uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
		uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
		c0 = hi1 ^ c1 ^ k0;
		c1 = lo1;
		c2 = hi0 ^ c3 ^ k1;
		c3 = lo0;
		k0 += 0x9E3779B9u;
		k1 += 0xBB67AE85u;
	}
	out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* Block `block` (a counter offset, not an element index) of generator
 * state (seed, stream): four 32-bit words. */
static inline GF_RNG_HD void gf_rng_block(uint32_t out[4], uint64_t seed, uint64_t stream, uint64_t block)
{
	uint32_t ctr[4] = { (uint32_t)block, (uint32_t)(block >> 32), (uint32_t)stream, (uint32_t)(stream >> 32) };
	uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };
	gf_philox4x32(out, ctr, key);
}

/* Uniform float in [0, 1) from a 32-bit word: the top 24 bits, so every
 * value is exactly representable. */
static inline GF_RNG_HD float gf_rng_u01(uint32_t x)
{
	return (float)(x >> 8) * (1.0f / 16777216.0f);
}

/* ---- draws (host memory) ---- */

/* Sets a generator to (seed, stream) at offset 0. */
void gf_rng_init(gf_rng *r, uint64_t seed, uint64_t stream);

/* Number of counter blocks a draw of n elements consumes: ceil(n / 4).
 * Every draw advances offset by this much, whatever it draws. */
static inline uint64_t gf_rng_blocks(size_t n)
{
	return ((uint64_t)n + 3) / 4;
}

/* Fills out[0..n) with uniforms in [lo, hi) (host memory) and advances r. */
void gf_rng_uniform(gf_rng *r, float *out, size_t n, float lo, float hi);

/* Fills out[0..n) with normals N(mean, std^2) (Box-Muller on the pairs of
 * words of each block: elements 4b..4b+3 come from block b) and advances r. */
void gf_rng_normal(gf_rng *r, float *out, size_t n, float mean, float std);

/* Element i of a normal draw that starts at block `offset`, without state:
 * the function backends use so a draw split over threads or run on a
 * device gives the numbers gf_rng_normal gives. */
float gf_rng_normal_at(uint64_t seed, uint64_t stream, uint64_t offset, size_t i);

/* Uniform 64-bit integer (for seeding other generators, shuffles). */
uint64_t gf_rng_u64(gf_rng *r);

#ifdef __cplusplus
}
#endif
#endif
