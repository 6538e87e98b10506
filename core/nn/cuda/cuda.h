/* The CUDA backend's shared state, and the launchers its kernel files
 * provide. Included by the host files (C11: device_cuda.c, backend_cuda.c, graph_cuda.c,
 * ops_cuda.c, conv_cuda.c, bn_cuda.c), which fill the vtable and drive
 * cuDNN and cuBLAS, and by the kernel files (CUDA C++: ops.cu, bn.cu,
 * conv.cu), which hold the kernels and their launchers. Nothing outside
 * core/nn/cuda/ includes it.
 *
 * Conventions: every launcher takes the stream first and returns the
 * cudaError_t of its launch (cudaGetLastError), so host code checks it with
 * CU_LAUNCH. Tensor pointers follow <ganflow/backend.h> (outputs first, f32
 * NCHW device memory); the mixed-precision and NHWC forms exist only
 * inside this backend, in its scratch memory (see conv_cuda.c).
 */
#ifndef GF_NN_CUDA_H
#define GF_NN_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include <ganflow/backend.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device status (one per instance, in device memory) ----
 *
 * Written by kernels, read by the host only through a copy into its
 * pinned mirror at synchronisation points (sync, loss with a host value,
 * stats), so no kernel ever waits for the host. */

enum {
	GF_CU_ERR_NONE = 0,
	GF_CU_ERR_BCE_NAN,     /* bce input is NaN (GF_ENONFINITE) */
	GF_CU_ERR_BCE_RANGE,   /* bce input outside [0, 1] (GF_EPARAM) */
	GF_CU_ERR_CE_LABEL,    /* cross-entropy label out of range */
	GF_CU_ERR_EMB_LABEL    /* embedding index out of range */
};

typedef struct gf_cu_status {
	unsigned long long err; /* ~0: none; else (element << 8) | GF_CU_ERR_*, the smallest element wins */
	float loss;             /* the last loss with a host value */
	float scale;            /* fp16 dynamic loss scale (1 in fp32/bf16) */
	int good;               /* fp16: updates since the last overflow or growth */
	int found_inf;          /* fp16: the gradients of the update in progress overflowed */
	int growth_interval;    /* fp16: grow the scale after this many good updates */
	int pad_;
	long long skipped;      /* fp16: updates skipped */
	long long applied;      /* fp16: updates applied */
	double sumsq;           /* the last sumsq */
} gf_cu_status;

/* ---- per-step scalars of graph steps ----
 *
 * Ops whose scalars change from step to step (generator offsets, the
 * optimiser's bias corrections and learning rate, loss targets, the decay
 * of a moving average of weights) pass them
 * to their kernels twice: by value, and as a pointer to a slot of a device
 * array that graph replays refresh before each launch (graph_cuda.c). The
 * pointer is NULL outside graphs; kernels read GF_CU_DYN(dyn, field, v). */
typedef union gf_cu_dyn {
	gf_rng rng;
	gf_optim_args optim;
	struct {
		float target, scale;
	} loss;
	struct {
		float decay, rest;   /* rest = 1 - decay, rounded on the host */
	} ema;
	struct {
		float lambda, scale; /* LeCam's weight and the half-step's scale (a schedule may move them) */
	} lecam;
	struct {
		double images;       /* ADA: the D step's real images (a short last batch) */
	} ada;
	struct {
		double weight, scale, weight2; /* a gradient penalty's (a schedule may move them) */
	} pen;
	unsigned char bytes[96];
} gf_cu_dyn;

/* ---- the instance ---- */

#define GF_CU_STAGES 4      /* pinned staging buffers for host -> device copies */

struct gf_cu_conv_entry;    /* conv_cuda.c: cuDNN descriptors and algorithms per shape */
struct gf_cu_graph_state;   /* graph_cuda.c */
struct gf_cu_coll;          /* coll_cuda.c */

typedef struct gf_cu_alloc {
	void *p;
	size_t n;
} gf_cu_alloc;

typedef struct gf_cuda {
	gf_backend be;           /* first: a gf_backend * is a gf_cuda * */
	int64_t waits;           /* times the host waited for the stream or an event (host_waits) */
	int dev;
	char name[64];           /* device name */
	cudaStream_t stream;
	cudnnHandle_t cudnn;
	cublasHandle_t cublas;
	void *cublas_ws;         /* cuBLAS workspace (fixed: graph capture needs one) */
	size_t cublas_ws_size;

	/* options (docs/cuda.md) */
	gf_precision prec;
	int nhwc;                /* resolved layout of the convolutions: 1 NHWC + padded channels */
	gf_layout_choice layout_opt;
	int deterministic;       /* only deterministic cuDNN algorithms (default 1) */
	int benchmark;           /* time cuDNN's algorithms (1) or take its heuristics (0) */
	int tf32;                /* fp32 convolutions may use TF32 (default 0) */
	int tf32_gemm;           /* fp32 GEMMs on TF32 tensor cores (precision tf32) */
	gf_precision prec_asked; /* what the instance was opened with (tf32 runs as fp32 + the two above) */
	int up2_upsample;        /* fused up x2 + conv as upsample + 3x3 (1) or sub-pixel phases (0) */

	/* memory through alloc (for stats) */
	gf_cu_alloc *allocs;
	size_t nallocs, cap_allocs, device_bytes;

	/* scratch: one buffer for the ops' temporaries, one cuDNN workspace;
	 * grown on demand, never shrunk; a replaced buffer that a graph may
	 * still use is retired (freed at destroy) */
	void *scratch;
	size_t scratch_size;
	void *ws;
	size_t ws_size;
	void **retired;
	size_t nretired, cap_retired;

	/* pinned staging for copy(H2D): source reusable on return, copy async */
	struct {
		void *p;
		size_t n;
		cudaEvent_t ev;
		int used;
	} stage[GF_CU_STAGES];
	int stage_next;

	/* status */
	gf_cu_status *st_dev;
	gf_cu_status *st_host;   /* pinned mirror */
	long long skipped_logged;
	int64_t optim_calls;     /* host count of optim_step calls */
	int unscaled_pending;    /* grad_unscale ran for unscaled_ptr since the last optim_step */
	const float *unscaled_ptr;
	size_t unscaled_n;

	/* cuDNN algorithm cache */
	struct gf_cu_conv_entry *conv;
	size_t nconv, cap_conv;

	/* graphs (graph_cuda.c) */
	int gmode;               /* GF_CU_EAGER, GF_CU_CAPTURE, GF_CU_REPLAY */
	struct gf_cu_graph_state *gs;
	int64_t ngraphs, nreplays;
	int graphs_alive;        /* captured graphs not destroyed: scratch they use is never freed */

	/* collectives (coll_cuda.c): the side stream and its events, made on first use */
	struct gf_cu_coll *coll;
} gf_cuda;

enum { GF_CU_EAGER = 0, GF_CU_CAPTURE, GF_CU_REPLAY };

static inline gf_cuda *gf_cu(gf_backend *be)
{
	return (gf_cuda *)be;
}

/* ---- errors (device_cuda.c) ----
 * Each returns a ganflow code (-ENOMEM, GF_EUNSUPPORTED, -EIO) with a
 * message naming the call, set through gf_seterr. */
int gf_cu_fail(cudaError_t e, const char *what, const char *file, int line);
int gf_cu_fail_dnn(cudnnStatus_t s, const char *what, const char *file, int line);
int gf_cu_fail_blas(cublasStatus_t s, const char *what, const char *file, int line);

#define CU_CHECK(call)                                                         \
	do {                                                                   \
		cudaError_t e_ = (call);                                       \
		if (e_ != cudaSuccess)                                         \
			return gf_cu_fail(e_, #call, __FILE__, __LINE__);      \
	} while (0)
/* A launcher's result (the launch error of its kernels). */
#define CU_LAUNCH(call) CU_CHECK(call)
#define DNN_CHECK(call)                                                        \
	do {                                                                   \
		cudnnStatus_t s_ = (call);                                     \
		if (s_ != CUDNN_STATUS_SUCCESS)                                \
			return gf_cu_fail_dnn(s_, #call, __FILE__, __LINE__);  \
	} while (0)
#define BLAS_CHECK(call)                                                       \
	do {                                                                   \
		cublasStatus_t s_ = (call);                                    \
		if (s_ != CUBLAS_STATUS_SUCCESS)                               \
			return gf_cu_fail_blas(s_, #call, __FILE__, __LINE__); \
	} while (0)
#define TRY(call)                         \
	do {                              \
		int rc_ = (call);         \
		if (rc_)                  \
			return rc_;       \
	} while (0)

/* ---- instance helpers (device_cuda.c) ---- */

/* cudaMalloc of n bytes (256 when n is 0) that also works while the
 * stream captures a graph (cudaMalloc is not a stream operation: the
 * capturing thread switches to relaxed mode around it). */
cudaError_t gf_cu_malloc(gf_cuda *c, void **p, size_t n);

/* Makes the instance's device current on the calling thread (stages may
 * create a backend on one thread and use it on another). */
int gf_cu_enter(gf_cuda *c);

/* Scratch of at least `bytes` (256-byte aligned), valid until the next
 * call; ops carve their temporaries out of one call. NULL with an error set. */
void *gf_cu_scratch(gf_cuda *c, size_t bytes);
/* The cuDNN workspace, at least `bytes`. */
void *gf_cu_workspace(gf_cuda *c, size_t bytes);

/* Carves `bytes` (rounded up to 256) off *cursor. */
static inline void *gf_cu_carve(char **cursor, size_t bytes)
{
	void *p = *cursor;
	*cursor += (bytes + 255) & ~(size_t)255;
	return p;
}
static inline size_t gf_cu_round(size_t bytes)
{
	return (bytes + 255) & ~(size_t)255;
}

/* Host -> device copy through the instance's pinned staging buffers: the
 * source may be reused when it returns, the DMA runs on the stream. */
int gf_cu_h2d(gf_cuda *c, void *dst, const void *src, size_t bytes);

/* Copies the device status into the pinned mirror and waits for the
 * stream; then reports (and clears) a recorded error, and logs fp16
 * overflows not logged yet. */
int gf_cu_sync_status(gf_cuda *c);

/* ---- graphs (graph_cuda.c) ----
 * Every op calls gf_cu_sig first (in eager mode it returns 0 at once); a
 * non-zero return other than GF_CU_SKIP is an error; GF_CU_SKIP means
 * "replaying: validated and recorded, launch nothing". Ops with per-step
 * scalars call gf_cu_dyn_slot, which gives the pointer to pass to kernels. */
#define GF_CU_SKIP 1
int gf_cu_sig(gf_cuda *c, int op, const uint64_t *v, int n);
/* Continues the signature with the bytes of a padding-free descriptor. */
void gf_cu_sig_bytes(gf_cuda *c, const void *p, size_t size);
#ifndef __cplusplus
/* GF_CU_SIG(c, op, values...): gf_cu_sig over a list of uint64_t values
 * (pointers through GF_CU_P, floats through gf_cu_fbits). */
#define GF_CU_SIG(c, op, ...)                                               \
	gf_cu_sig((c), (op), (const uint64_t[]){ __VA_ARGS__ },             \
	          (int)(sizeof((const uint64_t[]){ __VA_ARGS__ }) / sizeof(uint64_t)))
#endif
#define GF_CU_P(p) ((uint64_t)(uintptr_t)(p))
static inline uint64_t gf_cu_fbits(float f)
{
	union {
		float f;
		uint32_t u;
	} v;
	v.f = f;
	return v.u;
}
int gf_cu_dyn_slot(gf_cuda *c, const gf_cu_dyn *value, const gf_cu_dyn **dev);
/* GF_EUNSUPPORTED naming `what` when called inside graph brackets. */
int gf_cu_no_graph(gf_cuda *c, const char *what);
void gf_cu_graphs_destroy(gf_cuda *c);
int gf_cu_graph_begin(gf_backend *be, gf_graph **graph);
int gf_cu_graph_end(gf_backend *be, gf_graph *graph);
void gf_cu_graph_destroy(gf_backend *be, gf_graph *graph);

/* Op ids for signatures. */
enum {
	GF_CU_OP_FILL = 1, GF_CU_OP_COPY, GF_CU_OP_GEMM, GF_CU_OP_BIAS_ADD, GF_CU_OP_BIAS_GRAD, GF_CU_OP_AXPY,
	GF_CU_OP_SCALE, GF_CU_OP_COPY2D, GF_CU_OP_CONV_FWD, GF_CU_OP_CONV_BWD, GF_CU_OP_BN_TRAIN, GF_CU_OP_BN_EVAL,
	GF_CU_OP_BN_BWD, GF_CU_OP_ACT_FWD, GF_CU_OP_ACT_BWD, GF_CU_OP_UP_FWD, GF_CU_OP_UP_BWD, GF_CU_OP_DROP_FWD,
	GF_CU_OP_DROP_BWD, GF_CU_OP_POOLING_FWD, GF_CU_OP_POOLING_BWD, GF_CU_OP_SOFTMAX_FWD, GF_CU_OP_SOFTMAX_BWD,
	GF_CU_OP_EMB_FWD, GF_CU_OP_EMB_BWD, GF_CU_OP_LOSS, GF_CU_OP_OPTIM, GF_CU_OP_RNG_UNIFORM, GF_CU_OP_RNG_NORMAL,
	GF_CU_OP_UNSCALE, GF_CU_OP_SN_FWD, GF_CU_OP_SN_BWD, GF_CU_OP_ROW_DOT, GF_CU_OP_ROW_SCALE, GF_CU_OP_CBN_FWD,
	GF_CU_OP_CBN_BWD, GF_CU_OP_AUG_FWD, GF_CU_OP_AUG_BWD, GF_CU_OP_GEMM_BATCHED, GF_CU_OP_REDUCE,
	/* double backward, minibatch stddev (dbwd_cuda.c, augment_cuda.c) */
	GF_CU_OP_ACT_BWD2, GF_CU_OP_BN_BWD2, GF_CU_OP_POOL_GATHER, GF_CU_OP_AUG_LIN, GF_CU_OP_MBSTD,
	/* StyleGAN2 (sg2_cuda.c) */
	GF_CU_OP_BIAS_ACT_FWD, GF_CU_OP_BIAS_ACT_BWD, GF_CU_OP_RSQRT_EPS, GF_CU_OP_FIR_FWD, GF_CU_OP_FIR_BWD,
	/* StyleGAN2-ADA's augmentation (ada_cuda.c) */
	GF_CU_OP_ADA_PARAMS, GF_CU_OP_ADA_FWD, GF_CU_OP_ADA_BWD,
	/* style mixing (sg2_cuda.c) */
	GF_CU_OP_STYLE_MIX,
	/* moving averages of weights (ops_cuda.c) */
	GF_CU_OP_EMA,
	/* the recipe ops that keep a step off the host (recipe_cuda.c) */
	GF_CU_OP_CLIP_DEV, GF_CU_OP_LECAM_DEV, GF_CU_OP_LECAM_AVG, GF_CU_OP_ADA_SIGNS, GF_CU_OP_ADA_UPDATE,
	GF_CU_OP_PENALTY_FACTORS
};

/* ---- vtable ops by file ---- */

/* recipe_cuda.c */
int gf_cu_clip_dev(gf_backend *be, float *g, size_t n, const double *sumsq, float max_norm);
int gf_cu_lecam_dev(gf_backend *be, float *dy, double *value, double *st, const float *out, size_t n, int fake,
                    float lambda, float scale, int acc);
int gf_cu_lecam_avg(gf_backend *be, double *st, float decay, int last);
int gf_cu_ada_signs(gf_backend *be, double *st, const float *out, size_t n, float mid);
int gf_cu_ada_update(gf_backend *be, float *p, double *st, double *out, double images, int interval, double target,
                     double kimg);
int gf_cu_penalty_factors(gf_backend *be, float *f, double *out, double *center_st, const float *sq, int b,
                          int max_batch, int npts, const gf_penalty_desc *d);
/* coll_cuda.c */
int gf_cu_collective(gf_backend *be, const gf_comm *comm, gf_coll_op op, void *x, size_t n);
void gf_cu_coll_destroy(gf_cuda *c);

/* ops_cuda.c */
int gf_cu_gemm(gf_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
               const float *b, int ldb, float beta, float *c, int ldc);
int gf_cu_fill_op(gf_backend *be, float *x, size_t n, float value);
int gf_cu_bias_add(gf_backend *be, float *y, const float *b, int n, int c, int hw);
int gf_cu_bias_grad(gf_backend *be, float *db, const float *dy, int n, int c, int hw, int accumulate);
int gf_cu_axpy(gf_backend *be, float *y, const float *x, size_t n, float alpha);
int gf_cu_scale(gf_backend *be, float *x, size_t n, float s);
int gf_cu_ema(gf_backend *be, float *avg, const float *w, size_t n, float decay);
int gf_cu_copy2d(gf_backend *be, float *dst, size_t ldd, const float *src, size_t lds, size_t rows, size_t cols,
                 int accumulate);
int gf_cu_act_forward(gf_backend *be, float *y, const float *x, size_t n, gf_act act, float param);
int gf_cu_act_backward(gf_backend *be, float *dx, const float *dy, const float *y, size_t n, gf_act act,
                       float param);
int gf_cu_upsample_forward(gf_backend *be, float *y, const float *x, int planes, int h, int w, int s);
int gf_cu_upsample_backward(gf_backend *be, float *dx, const float *dy, int planes, int h, int w, int s);
int gf_cu_dropout_forward(gf_backend *be, float *y, float *mask, const float *x, size_t groups, size_t group,
                          float p, const gf_rng *rng);
int gf_cu_dropout_backward(gf_backend *be, float *dx, const float *dy, const float *mask, size_t groups,
                           size_t group);
int gf_cu_pooling_forward(gf_backend *be, float *y, int32_t *idx, const float *x, const gf_pooling_desc *d);
int gf_cu_pooling_backward(gf_backend *be, float *dx, const float *dy, const int32_t *idx, const gf_pooling_desc *d);
int gf_cu_softmax_forward(gf_backend *be, float *y, const float *x, int rows, int cols);
int gf_cu_softmax_backward(gf_backend *be, float *dx, const float *dy, const float *y, int rows, int cols);
int gf_cu_embedding_forward(gf_backend *be, float *y, const float *table, const int32_t *idx, int n, int dim,
                            int num);
int gf_cu_embedding_backward(gf_backend *be, float *dtable, const float *dy, const int32_t *idx, int n, int dim,
                             int num, int accumulate);
int gf_cu_loss(gf_backend *be, float *loss_host, float *dx, const float *x, const float *target,
               const int32_t *labels, const gf_loss_desc *d);
int gf_cu_loss_dev(gf_backend *be, float *loss_dev, float *dx, const float *x, const float *target,
                   const int32_t *labels, const gf_loss_desc *d);
int gf_cu_optim_step(gf_backend *be, float *p, const float *g, float *state, size_t n, const gf_optim_args *a);
int gf_cu_grad_unscale(gf_backend *be, float *g, size_t n);
int gf_cu_sumsq(gf_backend *be, double *out, const float *x, size_t n);
int gf_cu_reduce_dev(gf_backend *be, double *out, const float *x, size_t n, int squares);
int gf_cu_rng_uniform(gf_backend *be, float *out, size_t n, float lo, float hi, const gf_rng *rng);
int gf_cu_rng_normal(gf_backend *be, float *out, size_t n, float mean, float std, const gf_rng *rng);
int gf_cu_row_dot(gf_backend *be, float *out, const float *a, const float *b, int n, int k, int accumulate);
int gf_cu_row_scale(gf_backend *be, float *y, const float *s, const float *x, int n, int k, int accumulate);

/* sn_cuda.c */
int gf_cu_sn_forward(gf_backend *be, float *w_sn, float *sigma, float *u, float *v, const float *w, int a, int m,
                     int k, float eps, int iterate);
int gf_cu_sn_backward(gf_backend *be, float *dw, const float *g, const float *w, const float *sigma, const float *u,
                      const float *v, int a, int m, int k, int accumulate);
/* augment_cuda.c */
int gf_cu_augment_forward(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int h, int w,
                          unsigned what);
int gf_cu_augment_backward(gf_backend *be, float *dx, const float *dy, const float *u, int n, int c, int h, int w,
                           unsigned what);

/* gemm_batched_cuda.c */
int gf_cu_gemm_batched(gf_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                       int64_t stride_a, const float *b, int ldb, int64_t stride_b, float beta, float *c, int ldc,
                       int64_t stride_c, int batch);

/* conv_cuda.c */
int gf_cu_conv2d_forward(gf_backend *be, float *y, const float *x, const float *w, const float *b,
                         const gf_conv_desc *d);
int gf_cu_conv2d_backward(gf_backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                          const float *w, const gf_conv_desc *d, int accumulate);
void gf_cu_conv_cache_destroy(gf_cuda *c);

/* bn_cuda.c */
int gf_cu_bn_forward_train(gf_backend *be, float *y, float *mean, float *rstd, float *run_mean, float *run_var,
                           const float *x, const float *gamma, const float *beta, const gf_bn_desc *d);
int gf_cu_bn_forward_eval(gf_backend *be, float *y, const float *x, const float *gamma, const float *beta,
                          const float *run_mean, const float *run_var, const gf_bn_desc *d);
int gf_cu_bn_backward(gf_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy, const float *y,
                      const float *x, const float *gamma, const float *mean, const float *rstd,
                      const gf_bn_desc *d, int accumulate);
int gf_cu_cbn_forward(gf_backend *be, float *y, float *mean, float *rstd, float *run_mean, float *run_var,
                      const float *x, const float *gamma, const float *beta, const gf_bn_desc *d, int train);
int gf_cu_cbn_backward(gf_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy, const float *y,
                       const float *x, const float *gamma, const float *mean, const float *rstd, const gf_bn_desc *d);

/* ==== launchers (kernel files) ==== */

/* ---- ops.cu: streaming ops ---- */
cudaError_t gf_cu_fill(cudaStream_t s, float *x, size_t n, float v);
cudaError_t gf_cu_axpy_launch(cudaStream_t s, float *y, const float *x, size_t n, float a);
cudaError_t gf_cu_scale_launch(cudaStream_t s, float *x, size_t n, float a);
/* avg = avg * decay + rest * w, each operation rounded (scale then axpy) */
cudaError_t gf_cu_ema_launch(cudaStream_t s, float *avg, const float *w, size_t n, float decay, float rest,
                             const gf_cu_dyn *dyn);
/* recipe.cu: the recipe ops (docs/cuda.md "Nothing eager"), one small
 * kernel each, their state in device doubles */
cudaError_t gf_cu_clip_launch(cudaStream_t s, float *g, size_t n, const double *sumsq, float max_norm);
cudaError_t gf_cu_lecam_launch(cudaStream_t s, float *dy, double *value, double *st, const float *out, size_t n,
                               int fake, float lambda, float scale, int acc, const gf_cu_dyn *dyn);
cudaError_t gf_cu_lecam_avg_launch(cudaStream_t s, double *st, float decay, int last);
cudaError_t gf_cu_ada_signs_launch(cudaStream_t s, double *st, const float *out, size_t n, float mid);
cudaError_t gf_cu_ada_update_launch(cudaStream_t s, float *p, double *st, double *out, double images, int interval,
                                    double target, double kimg, const gf_cu_dyn *dyn);
cudaError_t gf_cu_penalty_launch(cudaStream_t s, float *f, double *out, double *center_st, const float *sq, int b,
                                 int max_batch, int npts, int distance, double weight, double center, double decay,
                                 double scale, int split, double weight2, const gf_cu_dyn *dyn);
cudaError_t gf_cu_copy2d_launch(cudaStream_t s, float *dst, size_t ldd, const float *src, size_t lds, size_t rows,
                                size_t cols, int acc);
cudaError_t gf_cu_bias_add_launch(cudaStream_t s, float *y, const float *b, int n, int c, int hw);
/* Per-channel sums of x (n, c, hw) in a fixed order: partials (c, chunks)
 * of gf_cu_chunks(n*hw) chunks, then out[ch] (+)= their sum. part must hold
 * c * gf_cu_chunks(n * hw) doubles. */
size_t gf_cu_chunks(size_t per_channel);
cudaError_t gf_cu_channel_sum(cudaStream_t s, float *out, double *part, const float *x, int n, int c, int hw,
                              int acc);
cudaError_t gf_cu_act_fwd_launch(cudaStream_t s, float *y, const float *x, size_t n, int act, float p);
cudaError_t gf_cu_act_bwd_launch(cudaStream_t s, float *dx, const float *dy, const float *y, size_t n, int act,
                                 float p);
cudaError_t gf_cu_up_fwd_launch(cudaStream_t s, float *y, const float *x, int planes, int h, int w, int sc);
cudaError_t gf_cu_up_bwd_launch(cudaStream_t s, float *dx, const float *dy, int planes, int h, int w, int sc);
cudaError_t gf_cu_drop_fwd_launch(cudaStream_t s, float *y, float *mask, const float *x, size_t groups,
                                  size_t group, float p, float keep_scale, gf_rng rng, const gf_cu_dyn *dyn);
cudaError_t gf_cu_drop_bwd_launch(cudaStream_t s, float *dx, const float *dy, const float *mask, size_t groups,
                                  size_t group);
cudaError_t gf_cu_pooling_fwd_launch(cudaStream_t s, float *y, int32_t *idx, const float *x, gf_pooling_desc d);
cudaError_t gf_cu_pooling_bwd_launch(cudaStream_t s, float *dx, const float *dy, const int32_t *idx, gf_pooling_desc d);
cudaError_t gf_cu_softmax_fwd_launch(cudaStream_t s, float *y, const float *x, int rows, int cols);
cudaError_t gf_cu_softmax_bwd_launch(cudaStream_t s, float *dx, const float *dy, const float *y, int rows,
                                     int cols);
cudaError_t gf_cu_emb_fwd_launch(cudaStream_t s, float *y, const float *table, const int32_t *idx, int n, int dim,
                                 int num, gf_cu_status *st);
cudaError_t gf_cu_emb_bwd_launch(cudaStream_t s, float *dtable, const float *dy, const int32_t *idx, int n,
                                 int dim, int num, int acc);
cudaError_t gf_cu_sn_fwd_launch(cudaStream_t s, float *w_sn, float *sigma, float *u, float *v, const float *w,
                               double *t, int a, int m, int k, float eps, int iterate);
cudaError_t gf_cu_sn_bwd_launch(cudaStream_t s, float *dw, const float *g, const float *w, const float *sigma,
                               const float *u, const float *v, int a, int m, int k, int acc);
/* out (n) (+)= rows of a . rows of b (one block per row, fixed order);
 * y (n, k) (+)= s (n) * x (n, k). */
cudaError_t gf_cu_row_dot_launch(cudaStream_t s, float *out, const float *a, const float *b, int n, int k, int acc);
cudaError_t gf_cu_row_scale_launch(cudaStream_t s, float *y, const float *sc, const float *x, int n, int k, int acc);
cudaError_t gf_cu_aug_fwd_launch(cudaStream_t s, float *y, const float *x, const float *u, int n, int c, int h, int w,
                                 unsigned what);
cudaError_t gf_cu_aug_bwd_launch(cudaStream_t s, float *dx, const float *dy, const float *u, int n, int c, int h,
                                 int w, unsigned what);
cudaError_t gf_cu_rng_launch(cudaStream_t s, float *out, size_t n, float a, float b, int normal, gf_rng rng,
                             const gf_cu_dyn *dyn);
/* Loss of x (n, k): per-element values summed in a fixed order into
 * partials, then *out = mean * scale (out: device float; may be
 * &st->loss); dx (may be NULL) = gradient * scale / count * (fp16: the
 * loss scale st->scale when scale_grad). part holds gf_cu_loss_parts(d)
 * doubles. Input errors go to st->err. */
size_t gf_cu_loss_parts(const gf_loss_desc *d);
cudaError_t gf_cu_loss_launch(cudaStream_t s, float *out, float *dx, double *part, const float *x,
                              const float *target, const int32_t *labels, gf_loss_desc d, const gf_cu_dyn *dyn,
                              gf_cu_status *st, int scale_grad);
/* Sum of x^2 in double over fixed blocks: part holds gf_cu_sumsq_parts(n)
 * doubles; the total lands in *out (device double). */
size_t gf_cu_sumsq_parts(size_t n);
cudaError_t gf_cu_sumsq_launch(cudaStream_t s, double *out, double *part, const float *x, size_t n);
/* The same fixed-order sum of x (squares = 0) or of its squares (= 1). */
cudaError_t gf_cu_reduce_launch(cudaStream_t s, double *out, double *part, const float *x, size_t n, int squares);
/* Optimiser update; st != NULL in fp16: skips when st->found_inf and
 * multiplies g by 1/st->scale unless unscaled. */
cudaError_t gf_cu_optim_launch(cudaStream_t s, float *p, const float *g, float *state, size_t n, gf_optim_args a,
                               const gf_cu_dyn *dyn, gf_cu_status *st, int unscale);
/* fp16 loss scaling: found_inf = any non-finite g (reset first); with
 * scale_in_place, g *= 1/scale too. */
cudaError_t gf_cu_check_inf_launch(cudaStream_t s, float *g, size_t n, gf_cu_status *st, int scale_in_place);
/* Updates the loss scale after an update (backoff on overflow, growth
 * after growth_interval good updates). */
cudaError_t gf_cu_scaler_update_launch(cudaStream_t s, gf_cu_status *st);

/* ---- gemm_batched.cu ---- */
/* c (m, n) with leading dimension ldc = beta c + sum over b of part (batch, m, n), in batch order. */
cudaError_t gf_cu_batch_sum_launch(cudaStream_t s, float *c, int ldc, const float *part, int m, int n, int batch,
                                   float beta);

/* ---- bn.cu ---- */
/* Forward statistics: mean and rstd (c) of x (n, c, hw), running stats
 * updated unless NULL. part: 2 * c * gf_cu_chunks(n * hw) doubles. */
cudaError_t gf_cu_bn_stats_launch(cudaStream_t s, float *mean, float *rstd, float *run_mean, float *run_var,
                                  double *part, const float *x, gf_bn_desc d);
/* y = act((x - mean) * gamma * rstd + beta); with eval = 1, rstd holds the
 * running variance and 1/sqrt(var + eps) is taken per channel. */
cudaError_t gf_cu_bn_apply_launch(cudaStream_t s, float *y, const float *x, const float *mean, const float *rstd,
                                  const float *gamma, const float *beta, gf_bn_desc d, int eval);
/* Doubles of scratch the statistics and the backward need. */
size_t gf_cu_bn_parts(const gf_bn_desc *d);
/* Backward: sums of dz and dz (x - mean) per channel, dgamma/dbeta, then dx. */
cudaError_t gf_cu_bn_bwd_launch(cudaStream_t s, float *dx, float *dgamma, float *dbeta, double *part,
                                const float *dy, const float *y, const float *x, const float *gamma,
                                const float *mean, const float *rstd, gf_bn_desc d, int acc);
/* Conditional batchnorm: y = act((x - mean) * gamma[plane] * rstd +
 * beta[plane]), gamma and beta (n, c); eval as gf_cu_bn_apply_launch. */
cudaError_t gf_cu_cbn_apply_launch(cudaStream_t s, float *y, const float *x, const float *mean, const float *rstd,
                                   const float *gamma, const float *beta, gf_bn_desc d, int eval);
/* Doubles of scratch its backward needs. */
size_t gf_cu_cbn_parts(const gf_bn_desc *d);
/* Backward: dgamma, dbeta (n, c) per plane, then dx unless NULL. */
cudaError_t gf_cu_cbn_bwd_launch(cudaStream_t s, float *dx, float *dgamma, float *dbeta, double *part,
                                 const float *dy, const float *y, const float *x, const float *gamma,
                                 const float *mean, const float *rstd, gf_bn_desc d);

/* ---- conv.cu: layouts, precisions and the sub-pixel form ----
 * A "format" is how a conv operand sits in scratch: dtype (f32, bf16, f16)
 * and layout (NCHW, or NHWC with the channels padded to cp). */
typedef enum { GF_CU_F32 = 0, GF_CU_BF16, GF_CU_F16 } gf_cu_dtype;

typedef struct gf_cu_fmt {
	gf_cu_dtype dt;
	int nhwc;
} gf_cu_fmt;

/* dst (n, c, hw) NCHW f32 -> fmt with cp >= c channels (padding zero). */
cudaError_t gf_cu_pack_launch(cudaStream_t s, void *dst, gf_cu_fmt f, const float *src, int n, int c, int cp,
                              int hw);
/* dst NCHW f32 (n, c, hw) (+)= src in fmt (cp channels, the first c kept)
 * + bias (c, may be NULL). */
cudaError_t gf_cu_unpack_launch(cudaStream_t s, float *dst, const void *src, gf_cu_fmt f, int n, int c, int cp,
                                int hw, const float *bias, int acc);
/* Filters: w (k, c, kh, kw) f32 -> fmt (kp, cp, kh, kw) or NHWC (kp, kh, kw, cp). */
cudaError_t gf_cu_pack_filter_launch(cudaStream_t s, void *dst, gf_cu_fmt f, const float *w, int k, int c, int kp,
                                     int cp, int kh, int kw);
cudaError_t gf_cu_unpack_filter_launch(cudaStream_t s, float *dw, const void *src, gf_cu_fmt f, int k, int c,
                                       int kp, int cp, int kh, int kw, int acc);
/* Sub-pixel form of up x2 + 3x3/1/1: the four phase kernels stacked as
 * one 2x2 conv with 4k outputs (phase-major), pad 1, over (h, w) giving
 * (h+1, w+1). */
cudaError_t gf_cu_phase_filter_launch(cudaStream_t s, void *dst, gf_cu_fmt f, const float *w, int k, int c,
                                      int kp4, int cp);
/* y (n, k, 2h, 2w) f32 = the phase windows of ys (n, 4k(p), h+1, w+1) + bias. */
cudaError_t gf_cu_phase_gather_launch(cudaStream_t s, float *y, const void *ys, gf_cu_fmt f, int n, int k, int kp4,
                                      int h, int w, const float *bias);
/* dys (n, 4k(p), h+1, w+1) in fmt = dy (n, k, 2h, 2w) scattered into the
 * phase windows, zero elsewhere. */
cudaError_t gf_cu_phase_scatter_launch(cudaStream_t s, void *dys, gf_cu_fmt f, const float *dy, int n, int k,
                                       int kp4, int h, int w);
/* dw (k, c, 3, 3) (+)= the stacked phase gradients dws (fmt, 4k(p), c(p), 2, 2) folded back. */
cudaError_t gf_cu_phase_fold_launch(cudaStream_t s, float *dw, const void *dws, gf_cu_fmt f, int k, int c, int kp4,
                                    int cp, int acc);
/* dst (rows, cols) contiguous in dtype = src (rows, cols) with leading dimension ld. */
cudaError_t gf_cu_cast2d_launch(cudaStream_t s, void *dst, gf_cu_dtype dt, const float *src, int rows, int cols,
                                int ld);

#ifdef __cplusplus
}
#endif
#endif
