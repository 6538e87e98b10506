/* Philox draws on the host. See <ganflow/rng.h>.
 *
 * The range fills below are shared with the CPU backend's rng ops, which
 * split one draw over threads: element i depends only on (seed, stream,
 * offset, i), never on how the range was cut. */
#include <math.h>

#include <ganflow/rng.h>

#include "nn_internal.h"

void gf_rng_init(gf_rng *r, uint64_t seed, uint64_t stream)
{
	r->seed = seed;
	r->stream = stream;
	r->offset = 0;
}

/* ---- range fills (elements [begin, end) of a draw) ---- */

void gf_rng_fill_uniform(float *out, size_t begin, size_t end, float lo, float hi,
                         uint64_t seed, uint64_t stream, uint64_t offset)
{
	uint32_t w[4];
	uint64_t cur = UINT64_MAX;
	for (size_t i = begin; i < end; i++) {
		uint64_t blk = offset + i / 4;
		if (blk != cur) {
			gf_rng_block(w, seed, stream, blk);
			cur = blk;
		}
		out[i] = lo + (hi - lo) * gf_rng_u01(w[i % 4]);
	}
}

/* Box-Muller on the word pairs (0,1) and (2,3) of a block: lanes 0 and 2
 * take the cosine, 1 and 3 the sine. Computed in double so the float
 * result is the correctly rounded value of one formula. */
static inline float normal_lane(const uint32_t w[4], unsigned lane)
{
	unsigned p = lane & 2u;
	double u1 = ((double)w[p] + 0.5) * (1.0 / 4294967296.0);
	double u2 = ((double)w[p + 1] + 0.5) * (1.0 / 4294967296.0);
	double r = sqrt(-2.0 * log(u1));
	double a = 6.283185307179586476925 * u2;
	return (float)((lane & 1u) ? r * sin(a) : r * cos(a));
}

void gf_rng_fill_normal(float *out, size_t begin, size_t end, float mean, float std,
                        uint64_t seed, uint64_t stream, uint64_t offset)
{
	uint32_t w[4];
	uint64_t cur = UINT64_MAX;
	for (size_t i = begin; i < end; i++) {
		uint64_t blk = offset + i / 4;
		if (blk != cur) {
			gf_rng_block(w, seed, stream, blk);
			cur = blk;
		}
		out[i] = mean + std * normal_lane(w, (unsigned)(i % 4));
	}
}

/* ---- public draws ---- */

void gf_rng_uniform(gf_rng *r, float *out, size_t n, float lo, float hi)
{
	gf_rng_fill_uniform(out, 0, n, lo, hi, r->seed, r->stream, r->offset);
	r->offset += gf_rng_blocks(n);
}

void gf_rng_normal(gf_rng *r, float *out, size_t n, float mean, float std)
{
	gf_rng_fill_normal(out, 0, n, mean, std, r->seed, r->stream, r->offset);
	r->offset += gf_rng_blocks(n);
}

float gf_rng_normal_at(uint64_t seed, uint64_t stream, uint64_t offset, size_t i)
{
	uint32_t w[4];
	gf_rng_block(w, seed, stream, offset + i / 4);
	return normal_lane(w, (unsigned)(i % 4));
}

uint64_t gf_rng_u64(gf_rng *r)
{
	uint32_t w[4];
	gf_rng_block(w, r->seed, r->stream, r->offset++);
	return (uint64_t)w[0] | (uint64_t)w[1] << 32;
}
