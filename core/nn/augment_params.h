/* DiffAugment's per-sample parameters from its 7 uniforms, shared by the
 * CPU kernel (cpu/augment_cpu.c) and the CUDA kernel (cuda/augment.cu) so
 * both derive the same shifts and boxes (<ganflow/backend.h>,
 * augment_forward, says what they are). Plain C that nvcc compiles too. */
#ifndef GF_NN_AUGMENT_PARAMS_H
#define GF_NN_AUGMENT_PARAMS_H

#include <math.h>

#ifdef __CUDACC__
#define GF_AUG_FN __host__ __device__ static inline
#else
#define GF_AUG_FN static inline
#endif

typedef struct gf_aug_params {
	float bright, sat, con;  /* added; saturation and contrast factors */
	int tx, ty;              /* output (r, c) reads input (r + tx, c + ty) */
	int cut;                 /* cutout on */
	int r0, r1, c0, c1;      /* the zeroed box [r0, r1) x [c0, c1), clipped */
} gf_aug_params;

/* floor(u k) - off, at most k - 1 - off (u just below 1 in float). */
GF_AUG_FN int gf_aug_pick(float u, int k, int off)
{
	int v = (int)floorf(u * (float)k);
	return (v < k ? v : k - 1) - off;
}

GF_AUG_FN void gf_aug_params_of(gf_aug_params *p, const float *u, int h, int w, unsigned what)
{
	int color = what & 1u, trans = what & 2u;
	p->bright = color ? u[0] - 0.5f : 0.0f;
	p->sat = color ? 2.0f * u[1] : 1.0f;
	p->con = color ? u[2] + 0.5f : 1.0f;
	int sh = (int)(h * 0.125f + 0.5f), sw = (int)(w * 0.125f + 0.5f);
	p->tx = trans ? gf_aug_pick(u[3], 2 * sh + 1, sh) : 0;
	p->ty = trans ? gf_aug_pick(u[4], 2 * sw + 1, sw) : 0;
	p->cut = (what & 4u) != 0;
	int ch = (int)(h * 0.5f + 0.5f), cw = (int)(w * 0.5f + 0.5f);
	int ox = gf_aug_pick(u[5], h + (1 - ch % 2), 0), oy = gf_aug_pick(u[6], w + (1 - cw % 2), 0);
	p->r0 = ox - ch / 2, p->r1 = p->r0 + ch;
	p->c0 = oy - cw / 2, p->c1 = p->c0 + cw;
}

/* 1 when output pixel (r, c) is cut out. */
GF_AUG_FN int gf_aug_cut(const gf_aug_params *p, int r, int c)
{
	return p->cut && r >= p->r0 && r < p->r1 && c >= p->c0 && c < p->c1;
}

#endif
