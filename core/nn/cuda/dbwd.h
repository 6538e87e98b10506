/* The CUDA backend's double-backward ops (<ganflow/backend.h> "double
 * backward") and the minibatch standard deviation: the vtable side
 * (dbwd_cuda.c, augment_cuda.c) and the launchers of dbwd.cu, each taking
 * the stream first. The CPU versions are core/nn/cpu/dbwd_cpu.c. */
#ifndef GF_NN_CUDA_DBWD_H
#define GF_NN_CUDA_DBWD_H

#include "cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ops (dbwd_cuda.c; augment_linear in augment_cuda.c) ---- */
int gf_cu_act_backward2(gf_backend *be, float *dx, const float *t, const float *dy, const float *y, size_t n,
                        gf_act act, float param);
int gf_cu_bn_backward2(gf_backend *be, float *ty, float *dx, float *dgamma, const float *t, const float *dy,
                       const float *y, const float *x, const float *gamma, const float *mean, const float *rstd,
                       const gf_bn_desc *d, int accumulate);
int gf_cu_pooling_gather(gf_backend *be, float *y, const float *x, const int32_t *idx, const gf_pooling_desc *d);
int gf_cu_augment_linear(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int h, int w,
                         unsigned what);
int gf_cu_mbstd_forward(gf_backend *be, float *y, const float *x, const gf_mbstd_desc *d);
int gf_cu_mbstd_backward(gf_backend *be, float *dx, const float *dy, const float *x, const gf_mbstd_desc *d);
int gf_cu_mbstd_backward2(gf_backend *be, float *ty, float *dx, const float *t, const float *dy, const float *x,
                          const gf_mbstd_desc *d);

/* ---- launchers (dbwd.cu; the augment one in augment.cu) ---- */
/* dx = t dy act''(y), element-wise */
cudaError_t gf_cu_act_bwd2_launch(cudaStream_t s, float *dx, const float *t, const float *dy, const float *y,
                                  size_t n, int act);
/* One block per channel: the five sums in double in a fixed order, then
 * ty, dx, dgamma (each may be NULL). gamma NULL = 1; act 0 none, 1 relu,
 * 2 lrelu (slope). */
cudaError_t gf_cu_bn_bwd2_launch(cudaStream_t s, float *ty, float *dx, float *dgamma, const float *t, const float *dy,
                                 const float *y, const float *x, const float *gamma, const float *mean,
                                 const float *rstd, int n, int c, int hw, int act, float slope, int acc);
cudaError_t gf_cu_pool_gather_launch(cudaStream_t s, float *y, const float *x, const int32_t *idx, gf_pooling_desc d);
/* One block per (group, statistics channel); op 0 forward (y), 1 backward
 * (dx), 2 double backward (y = ty, dx: each may be NULL). */
cudaError_t gf_cu_mbstd_launch(cudaStream_t s, int op, float *y, float *dx, const float *x, const float *dy,
                               const float *t, gf_mbstd_desc d);
cudaError_t gf_cu_aug_lin_launch(cudaStream_t s, float *y, const float *x, const float *u, int n, int c, int h, int w,
                                 unsigned what);

#ifdef __cplusplus
}
#endif
#endif
