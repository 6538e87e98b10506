/* The CUDA backend's StyleGAN2-ADA augmentation (<ganflow/backend.h>
 * ada_params / ada_forward / ada_backward): the vtable side (ada_cuda.c)
 * and the launchers of ada.cu, each taking the stream first. The CPU
 * version is core/nn/cpu/ada_cpu.c; both derive the transforms with
 * ../ada_params.h. */
#ifndef GF_NN_CUDA_ADA_H
#define GF_NN_CUDA_ADA_H

#include "cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ops (ada_cuda.c) ---- */
int gf_cu_ada_params(gf_backend *be, float *m, const float *u, const float *p, int n, int c, int h, int w,
                     unsigned what);
int gf_cu_ada_forward(gf_backend *be, float *y, const float *x, const float *m, int n, int c, int h, int w,
                      int affine);
int gf_cu_ada_backward(gf_backend *be, float *dx, const float *dy, const float *m, int n, int c, int h, int w);

/* ---- launchers (ada.cu) ---- */
/* One thread per sample: its transforms from its uniforms and *p. */
cudaError_t gf_cu_ada_params_launch(cudaStream_t s, float *m, const float *u, const float *p, int n, int c, int h,
                                    int w, unsigned what);
/* One thread per output pixel (all channels). */
cudaError_t gf_cu_ada_fwd_launch(cudaStream_t s, float *y, const float *x, const float *m, int n, int c, int h, int w,
                                 int affine);
/* One thread per input pixel (all channels), gathering from the output
 * pixels whose bilinear taps reach it: no atomics, a fixed order. */
cudaError_t gf_cu_ada_bwd_launch(cudaStream_t s, float *dx, const float *dy, const float *m, int n, int c, int h,
                                 int w);

#ifdef __cplusplus
}
#endif
#endif
