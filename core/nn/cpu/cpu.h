/* The CPU backend's shared state and the ops each of its files provides.
 * backend_cpu.c fills the vtable from these; nothing outside core/nn/cpu/
 * includes this header. */
#ifndef GF_NN_CPU_H
#define GF_NN_CPU_H

#include <stddef.h>
#include <stdint.h>

#include <ganflow/backend.h>

#include "team.h"

/* Hot loops are built once per ISA and picked at load time (ifunc). Not
 * under the sanitizers: ifunc resolvers run during relocation, before
 * the sanitizer runtime is up, and instrumented ones crash there. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && !defined(__clang__)
#define GF_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GF_CLONES
#endif

/* Keeps GCC from turning short row loops (8 to 32 values) back into memcpy
 * and memset calls, which cost more than the copy at these sizes. */
#if defined(__GNUC__) && !defined(__clang__)
#define GF_NO_MEMCPY __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define GF_NO_MEMCPY
#endif

struct gf_cpu_check;  /* graph_cpu.c */

typedef struct gf_cpu {
	gf_backend be;      /* first: a gf_backend * is a gf_cpu * */
	gf_team *team;
	float *scratch;     /* grown on demand, never shrunk */
	size_t scratch_size;  /* floats */
	struct gf_cpu_check *check; /* the device check (GANFLOW_CPU_DEVICE_CHECK=1), or NULL */
} gf_cpu;

static inline gf_cpu *gf_cpu_of(gf_backend *be)
{
	return (gf_cpu *)be;
}

/* ---- device_cpu.c ---- */

/* Scratch of at least n floats (64-byte aligned), or NULL (error set).
 * Valid until the next call; ops carve their buffers out of one call. */
float *gf_cpu_scratch(gf_cpu *c, size_t n);

/* ---- peak_cpu.c: the peak_flops op (its SGEMM's rate, cached) ---- */
int gf_cpu_peak_flops(gf_backend *be, double *flop_s, char *what, size_t size);

/* ---- ops_cpu.c ---- */
int gf_cpu_gemm(gf_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
int gf_cpu_fill(gf_backend *be, float *x, size_t n, float value);
int gf_cpu_bias_add(gf_backend *be, float *y, const float *b, int n, int c, int hw);
int gf_cpu_bias_grad(gf_backend *be, float *db, const float *dy, int n, int c, int hw, int accumulate);
int gf_cpu_axpy(gf_backend *be, float *y, const float *x, size_t n, float alpha);
int gf_cpu_scale(gf_backend *be, float *x, size_t n, float s);
int gf_cpu_ema(gf_backend *be, float *avg, const float *w, size_t n, float decay);
/* recipe_cpu.c: the recipe ops that keep a step off the host */
int gf_cpu_clip_dev(gf_backend *be, float *g, size_t n, const double *sumsq, float max_norm);
int gf_cpu_lecam_dev(gf_backend *be, float *dy, double *value, double *st, const float *out, size_t n, int fake,
                     float lambda, float scale, int acc);
int gf_cpu_lecam_avg(gf_backend *be, double *st, float decay, int last);
int gf_cpu_ada_signs(gf_backend *be, double *st, const float *out, size_t n, float mid);
int gf_cpu_ada_update(gf_backend *be, float *p, double *st, double *out, double images, int interval, double target,
                      double kimg);
int gf_cpu_penalty_factors(gf_backend *be, float *f, double *out, double *center_st, const float *sq, int b,
                           int max_batch, int npts, const gf_penalty_desc *d);
int gf_cpu_copy2d(gf_backend *be, float *dst, size_t ldd, const float *src, size_t lds,
                  size_t rows, size_t cols, int accumulate);
int gf_cpu_act_forward(gf_backend *be, float *y, const float *x, size_t n, gf_act act, float param);
int gf_cpu_act_backward(gf_backend *be, float *dx, const float *dy, const float *y, size_t n,
                        gf_act act, float param);
int gf_cpu_upsample_forward(gf_backend *be, float *y, const float *x, int planes, int h, int w, int s);
int gf_cpu_upsample_backward(gf_backend *be, float *dx, const float *dy, int planes, int h, int w, int s);
int gf_cpu_dropout_forward(gf_backend *be, float *y, float *mask, const float *x, size_t groups,
                           size_t group, float p, const gf_rng *rng);
int gf_cpu_dropout_backward(gf_backend *be, float *dx, const float *dy, const float *mask,
                            size_t groups, size_t group);
int gf_cpu_pooling_forward(gf_backend *be, float *y, int32_t *idx, const float *x, const gf_pooling_desc *d);
int gf_cpu_pooling_backward(gf_backend *be, float *dx, const float *dy, const int32_t *idx,
                         const gf_pooling_desc *d);
int gf_cpu_softmax_forward(gf_backend *be, float *y, const float *x, int rows, int cols);
int gf_cpu_softmax_backward(gf_backend *be, float *dx, const float *dy, const float *y, int rows, int cols);
int gf_cpu_embedding_forward(gf_backend *be, float *y, const float *table, const int32_t *idx,
                             int n, int dim, int num);
int gf_cpu_embedding_backward(gf_backend *be, float *dtable, const float *dy, const int32_t *idx,
                              int n, int dim, int num, int accumulate);
int gf_cpu_loss(gf_backend *be, float *loss_host, float *dx, const float *x, const float *target,
                const int32_t *labels, const gf_loss_desc *d);
int gf_cpu_optim_step(gf_backend *be, float *p, const float *g, float *state, size_t n,
                      const gf_optim_args *a);
int gf_cpu_sumsq(gf_backend *be, double *out, const float *x, size_t n);
/* loss into *loss_dev, and sums into *out, without a host value: the ops the
 * step stages use on every backend (the same values as loss and sumsq). */
int gf_cpu_loss_dev(gf_backend *be, float *loss_dev, float *dx, const float *x, const float *target,
                    const int32_t *labels, const gf_loss_desc *d);
int gf_cpu_reduce_dev(gf_backend *be, double *out, const float *x, size_t n, int squares);
/* The collective through comm's table, done when it returns. */
int gf_cpu_collective(gf_backend *be, const gf_comm *comm, gf_coll_op op, void *x, size_t n);
int gf_cpu_rng_uniform(gf_backend *be, float *out, size_t n, float lo, float hi, const gf_rng *rng);
int gf_cpu_rng_normal(gf_backend *be, float *out, size_t n, float mean, float std, const gf_rng *rng);
int gf_cpu_row_dot(gf_backend *be, float *out, const float *a, const float *b, int n, int k, int accumulate);
int gf_cpu_row_scale(gf_backend *be, float *y, const float *s, const float *x, int n, int k, int accumulate);

/* ---- sn_cpu.c ---- */
int gf_cpu_sn_forward(gf_backend *be, float *w_sn, float *sigma, float *u, float *v, const float *w, int a,
                      int m, int k, float eps, int iterate);
int gf_cpu_sn_backward(gf_backend *be, float *dw, const float *g, const float *w, const float *sigma,
                       const float *u, const float *v, int a, int m, int k, int accumulate);

/* ---- augment_cpu.c ---- */
int gf_cpu_augment_forward(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int h, int w,
                           unsigned what);
int gf_cpu_augment_backward(gf_backend *be, float *dx, const float *dy, const float *u, int n, int c, int h, int w,
                            unsigned what);
int gf_cpu_augment_linear(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int h, int w,
                          unsigned what);
/* ---- gemm_batched_cpu.c ---- */
int gf_cpu_gemm_batched(gf_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                        int64_t stride_a, const float *b, int ldb, int64_t stride_b, float beta, float *c, int ldc,
                        int64_t stride_c, int batch);

/* ---- conv_cpu.c ---- */
int gf_cpu_conv2d_forward(gf_backend *be, float *y, const float *x, const float *w, const float *b,
                          const gf_conv_desc *d);
int gf_cpu_conv2d_backward(gf_backend *be, float *dx, float *dw, float *db, const float *dy,
                           const float *x, const float *w, const gf_conv_desc *d, int accumulate);

/* ---- winograd_cpu.c: 3x3 stride-1 "same" convolutions, F(2x2, 3x3) ---- */
int gf_cpu_winograd_ok(const gf_conv_desc *d);
int gf_cpu_winograd_forward(gf_backend *be, float *y, const float *x, const float *w, const float *b,
                            const gf_conv_desc *d);
int gf_cpu_winograd_backward(gf_backend *be, float *dx, float *dw, const float *dy, const float *x,
                             const float *w, const gf_conv_desc *d, int accumulate);

/* ---- bn_cpu.c ---- */
int gf_cpu_bn_forward_train(gf_backend *be, float *y, float *mean, float *rstd, float *run_mean,
                            float *run_var, const float *x, const float *gamma, const float *beta,
                            const gf_bn_desc *d);
int gf_cpu_bn_forward_eval(gf_backend *be, float *y, const float *x, const float *gamma,
                           const float *beta, const float *run_mean, const float *run_var,
                           const gf_bn_desc *d);
int gf_cpu_bn_backward(gf_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy,
                       const float *y, const float *x, const float *gamma, const float *mean,
                       const float *rstd, const gf_bn_desc *d, int accumulate);

/* ---- bn_cpu.c: conditional batchnorm (batchnorm's own ops are above) ---- */
int gf_cpu_cbn_forward(gf_backend *be, float *y, float *mean, float *rstd, float *run_mean, float *run_var,
                       const float *x, const float *gamma, const float *beta, const gf_bn_desc *d, int train);
int gf_cpu_cbn_backward(gf_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy, const float *y,
                        const float *x, const float *gamma, const float *mean, const float *rstd,
                        const gf_bn_desc *d);

/* ---- dbwd_cpu.c: double backward, minibatch standard deviation ---- */
int gf_cpu_act_backward2(gf_backend *be, float *dx, const float *t, const float *dy, const float *y, size_t n,
                         gf_act act, float param);
int gf_cpu_bn_backward2(gf_backend *be, float *ty, float *dx, float *dgamma, const float *t, const float *dy,
                        const float *y, const float *x, const float *gamma, const float *mean, const float *rstd,
                        const gf_bn_desc *d, int accumulate);
int gf_cpu_pooling_gather(gf_backend *be, float *y, const float *x, const int32_t *idx, const gf_pooling_desc *d);
int gf_cpu_mbstd_forward(gf_backend *be, float *y, const float *x, const gf_mbstd_desc *d);
int gf_cpu_mbstd_backward(gf_backend *be, float *dx, const float *dy, const float *x, const gf_mbstd_desc *d);
int gf_cpu_mbstd_backward2(gf_backend *be, float *ty, float *dx, const float *t, const float *dy, const float *x,
                           const gf_mbstd_desc *d);

/* ---- device_cpu.c: memory and copies (host memory) ---- */
int gf_cpu_alloc_plain(gf_backend *be, void **ptr, size_t bytes);
void gf_cpu_free_plain(gf_backend *be, void *ptr);
int gf_cpu_copy_plain(gf_backend *be, void *dst, const void *src, size_t bytes, gf_copy_kind kind);

/* ---- graph_cpu.c: the CPU backend as a checked device ----
 * With GANFLOW_CPU_DEVICE_CHECK=1 an instance gets the ops table that
 * gf_cpu_check_ops makes of the plain one: every op of the CPU backend
 * checked, plus the device ops (graphs, events, pinned and device memory,
 * asynchronous copies, stats), run eagerly on the host while the CUDA
 * backend's rules are enforced. */
int gf_cpu_check_wanted(void);
int gf_cpu_check_attach(gf_cpu *c);
void gf_cpu_check_detach(gf_cpu *c);
/* Replaces the entries of ops (a copy of the plain table) by checked ones
 * and adds the device ops; destroy stays the plain one. */
void gf_cpu_check_ops(gf_backend_ops *ops);
/* ---- sg2_cpu.c: StyleGAN2 (bias_act, modconv) ---- */
int gf_cpu_bias_act_forward(gf_backend *be, float *y, const float *x, const float *b, const gf_bias_act_desc *d);
int gf_cpu_bias_act_backward(gf_backend *be, float *dx, const float *dy, const float *y, const gf_bias_act_desc *d);
int gf_cpu_rsqrt_eps(gf_backend *be, float *y, const float *x, size_t n, float eps);
int gf_cpu_fir_forward(gf_backend *be, float *y, const float *x, const gf_fir_desc *d);
int gf_cpu_fir_backward(gf_backend *be, float *dx, const float *dy, const gf_fir_desc *d);
/* ---- ada_cpu.c: StyleGAN2-ADA's augmentation ---- */
int gf_cpu_ada_params(gf_backend *be, float *m, const float *u, const float *p, int n, int c, int h, int w,
                      unsigned what);
int gf_cpu_ada_forward(gf_backend *be, float *y, const float *x, const float *m, int n, int c, int h, int w,
                       int affine);
int gf_cpu_ada_backward(gf_backend *be, float *dx, const float *dy, const float *m, int n, int c, int h, int w);
int gf_cpu_style_mix(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int index, int num_ws,
                     float prob, int adjoint);

#endif
