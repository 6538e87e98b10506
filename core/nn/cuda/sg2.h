/* The CUDA backend's StyleGAN2 ops (<ganflow/backend.h> "StyleGAN2"):
 * bias_act_forward / _backward (layer bias_act), rsqrt_eps (modconv's
 * demodulation), fir_forward / _backward (layer fir) and style_mix (layer
 * style_w): the vtable side (sg2_cuda.c) and the launchers of sg2.cu,
 * each taking the stream first. The CPU versions are core/nn/cpu/sg2_cpu.c. */
#ifndef GF_NN_CUDA_SG2_H
#define GF_NN_CUDA_SG2_H

#include "cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ops (sg2_cuda.c) ---- */
int gf_cu_bias_act_forward(gf_backend *be, float *y, const float *x, const float *b, const gf_bias_act_desc *d);
int gf_cu_bias_act_backward(gf_backend *be, float *dx, const float *dy, const float *y, const gf_bias_act_desc *d);
int gf_cu_rsqrt_eps(gf_backend *be, float *y, const float *x, size_t n, float eps);
int gf_cu_fir_forward(gf_backend *be, float *y, const float *x, const gf_fir_desc *d);
int gf_cu_fir_backward(gf_backend *be, float *dx, const float *dy, const gf_fir_desc *d);
int gf_cu_style_mix(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int index, int num_ws,
                    float prob, int adjoint);

/* ---- launchers (sg2.cu) ---- */
/* element-wise; b may be NULL */
cudaError_t gf_cu_bias_act_fwd_launch(cudaStream_t s, float *y, const float *x, const float *b, gf_bias_act_desc d);
cudaError_t gf_cu_bias_act_bwd_launch(cudaStream_t s, float *dx, const float *dy, const float *y, gf_bias_act_desc d);
cudaError_t gf_cu_rsqrt_eps_launch(cudaStream_t s, float *y, const float *x, size_t n, float eps);
/* one thread per output element (backward: per input element), gathering its taps */
cudaError_t gf_cu_fir_launch(cudaStream_t s, int backward, float *y, const float *x, gf_fir_desc d);
/* one thread per output element */
cudaError_t gf_cu_style_mix_launch(cudaStream_t s, float *y, const float *x, const float *u, int n, int c, int index,
                                   int num_ws, float prob, int adjoint);

#ifdef __cplusplus
}
#endif
#endif
