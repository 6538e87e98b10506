/* StyleGAN2's style mixing: which of a sample's two w (the mapping of z,
 * row 0, and of the second latent z2, row 1) synthesis layer `index` reads,
 * from the batch's two uniforms. Shared by the CPU op (cpu/sg2_cpu.c) and
 * the CUDA kernel (cuda/sg2.cu), so both pick the same rows
 * (<ganflow/backend.h>, style_mix, says what the op computes).
 *
 * As StyleGAN2-ADA's training/loss.py draws it once per batch: cutoff
 * uniform in 1..num_ws-1 (torch's random_(1, num_ws)), replaced by num_ws
 * (nothing mixed) unless a second uniform is below prob; the layers from
 * cutoff on read w2. */
#ifndef GF_NN_STYLE_MIX_ROW_H
#define GF_NN_STYLE_MIX_ROW_H

#ifdef __CUDACC__
#define GF_MIX_FN __host__ __device__ static inline
#else
#define GF_MIX_FN static inline
#endif

/* The cutoff of a batch: 1..num_ws-1 when it mixes, num_ws when not. */
GF_MIX_FN int gf_style_mix_cutoff(float u0, float u1, int num_ws, float prob)
{
	if (!(u1 < prob))
		return num_ws;
	int cut = 1 + (int)(u0 * (float)(num_ws - 1));
	return cut < 1 ? 1 : cut > num_ws - 1 ? num_ws - 1 : cut;
}

/* 1 when layer index reads w2 */
GF_MIX_FN int gf_style_mix_row(const float *u, int index, int num_ws, float prob)
{
	return index >= gf_style_mix_cutoff(u[0], u[1], num_ws, prob);
}

#endif
