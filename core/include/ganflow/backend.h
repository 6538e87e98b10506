/* ganflow compute backends: the vtable every backend fills.
 *
 * The nn engine (<ganflow/nn.h>) never computes anything itself: every
 * operation a layer, loss or optimiser needs goes through one of the
 * function pointers below, so a network runs unchanged on the CPU backend
 * built into libganflow (OpenBLAS + own kernels, core/nn/cpu/) or on a
 * backend loaded from a shared object (the CUDA backend, backend_cuda.so).
 *
 * Conventions (llm.c's): outputs first, then inputs, then sizes or a
 * descriptor. All tensor pointers are device pointers of the backend
 * (host pointers on the CPU backend), f32, contiguous; 4-d activations are
 * NCHW. Descriptors carry dtype and layout fields; the engine always
 * passes f32 NCHW, and a backend returns GF_EUNSUPPORTED for a combination
 * it does not implement. Reduced precision and NHWC are properties of a
 * backend instance instead (gf_backend_opts.precision and .layout): the
 * CUDA backend keeps the f32 NCHW tensors as the masters and converts
 * inside its convolutions and GEMMs (docs/cuda.md).
 * Every op returns 0 or a negative error code (<ganflow/err.h>) with
 * gf_seterr() detail; ops may be asynchronous on a device (ordered on the
 * backend's stream), `sync` waits for them.
 *
 * Determinism: a backend must give bit-identical results for identical
 * calls (same thread count on the CPU): no atomics-in-any-order reductions.
 * The CPU backend partitions every reduction over output elements, so its
 * results do not even depend on its thread count, except inside OpenBLAS.
 *
 * Threads: one backend instance is used by one thread at a time (each
 * stage creates its own); ops may use scratch memory the instance owns,
 * grown on first use, so steady-state training allocates nothing.
 *
 * A backend .so exports one symbol, `ganflow_backend`, a const
 * gf_backend_desc whose abi and size the loader checks before anything
 * else (like stage descriptors); see gf_backend_open in <ganflow/nn.h>.
 */
#ifndef GANFLOW_BACKEND_H
#define GANFLOW_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include <ganflow/rng.h>
#include <ganflow/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever gf_backend_ops or the descriptors below change in an
 * incompatible way; appending ops at the end only grows `size`. */
#define GF_BACKEND_ABI 1

typedef struct gf_backend gf_backend;
/* penalty_factors: which penalty and its constants. */
typedef struct gf_penalty_desc {
	int distance;           /* 0: weight / 2 |g|^2 (R1); 1: weight (|g| - c)^2 (WGAN-GP, path length) */
	double weight, center, decay, scale;
	int split;              /* square only, > 0: samples [0, split) take weight (R1 on the reals of a pair
	                         * batch), [split, b) weight2 (R2 on the fakes), each part its own mean */
	double weight2;
} gf_penalty_desc;

typedef struct gf_backend_ops gf_backend_ops;
typedef struct gf_backend_stats gf_backend_stats;
typedef struct gf_graph gf_graph;   /* a captured step (graph_begin), owned by its backend */

/* ---- descriptors ---- */

/* Pointwise activations (also fused into batchnorm, see gf_bn_desc). */
typedef enum {
	GF_ACT_NONE = 0,
	GF_ACT_RELU,
	GF_ACT_LRELU,    /* param: negative slope, >= 0 */
	GF_ACT_TANH,
	GF_ACT_SIGMOID
} gf_act;

/* A 2-d convolution y = conv(x, w) + b, x (n, cin, h, w), w (cout, cin, kh, kw),
 * y (n, cout, hout, wout). With up = 2 the input is first upsampled x2 by
 * nearest neighbour (fused: x is the low-resolution tensor, (h, w) its
 * size, and the conv sees (2h, 2w)); backends that advertise
 * GF_CAP_CONV_UP2 support it for 3x3 stride-1 pad-1 convolutions.
 * groups = g > 1 (backends that advertise GF_CAP_CONV_GROUPS; up = 1):
 * PyTorch's grouped convolution, cin and cout multiples of g, w (cout,
 * cin / g, kh, kw), output channels [j cout/g, (j+1) cout/g) reading only
 * input channels [j cin/g, (j+1) cin/g); g = cin = cout is depthwise. 0
 * and 1 both mean an ordinary convolution. */
typedef struct gf_conv_desc {
	int n;            /* batch */
	int cin, h, w;    /* input channels and spatial size */
	int cout, hout, wout;
	int kh, kw;       /* kernel */
	int sh, sw;       /* stride */
	int ph, pw;       /* zero padding */
	int up;           /* 1, or 2 for a fused nearest upsample x2 */
	gf_dtype dtype;   /* GF_F32 (GF_BF16/GF_F16 reserved) */
	gf_layout layout; /* GF_NCHW (GF_NHWC reserved) */
	int groups;       /* 0 or 1: dense; g: grouped (GF_CAP_CONV_GROUPS) */
} gf_conv_desc;

/* The group count of d: 1 for an ordinary convolution. */
static inline int gf_conv_groups(const gf_conv_desc *d)
{
	return d->groups > 1 ? d->groups : 1;
}

/* Batch normalisation over x viewed as (n, c, hw): statistics per channel
 * over n*hw values (hw = 1 for batchnorm 1d). PyTorch semantics: biased
 * variance normalises, the unbiased one enters the running average,
 * running = (1 - momentum) * running + momentum * batch. An activation may
 * be fused after the affine step (act, slope). */
typedef struct gf_bn_desc {
	int n, c, hw;
	float eps;
	float momentum;
	gf_act act;       /* GF_ACT_NONE, GF_ACT_RELU or GF_ACT_LRELU */
	float slope;      /* LeakyReLU negative slope */
	gf_dtype dtype;
	gf_layout layout;
} gf_bn_desc;

/* Max or average pooling of x (n, c, h, w) to y (n, c, hout, wout). Average
 * pooling divides by kh*kw, counting padded zeros (PyTorch's
 * count_include_pad = True), or with exclude_pad by the number of window
 * positions inside the input (count_include_pad = False). */
typedef struct gf_pooling_desc {
	int n, c, h, w, hout, wout;
	int kh, kw, sh, sw, ph, pw;
	int max;          /* 1 max pooling, 0 average pooling */
	int exclude_pad;  /* average pooling: 1 count_include_pad = False */
} gf_pooling_desc;

/* Minibatch standard deviation (StyleGAN): x (n, c, h, w), groups of
 * `group` samples (n a multiple of it), `f` statistics channels (c a
 * multiple of it). See mbstd_forward. */
typedef struct gf_mbstd_desc {
	int n, c, h, w;
	int group, f;
	float eps;        /* 1e-8 (StyleGAN) */
} gf_mbstd_desc;

/* StyleGAN2's bias + activation (bias_act): x (n, c, hw), y = clamp(act(x
 * + bgain * b[c]) * gain, -clamp, clamp); act GF_ACT_NONE, _RELU or _LRELU
 * (slope alpha); clamp <= 0: none. See bias_act_forward. */
typedef struct gf_bias_act_desc {
	int n, c, hw;
	gf_act act;
	float alpha;      /* LeakyReLU negative slope */
	float gain;       /* sqrt(2) for relu/lrelu in StyleGAN2 (> 0) */
	float clamp;      /* StyleGAN2's act_clamp; <= 0: no clamping */
	float bgain;      /* the bias's lr_mul */
} gf_bias_act_desc;

/* StyleGAN2's FIR resampling (upfirdn2d) of n planes x (n, h, w) to y (n,
 * hout, wout): each plane upsampled by inserting up - 1 zeros after every
 * pixel (rows and columns: h up x w up), padded with p0 zeros before,
 * filtered with the separable 4x4 filter gain f f^T, every down-th pixel
 * kept: y[oy][ox] = gain sum_(ky, kx) f[ky] f[kx] xu[oy down + ky - p0][ox
 * down + kx - p0], xu the upsampled plane (0 outside). Correlation: the
 * filter is applied unflipped (StyleGAN2's [1, 3, 3, 1] is symmetric).
 * hout and wout give the trailing padding. See fir_forward. */
typedef struct gf_fir_desc {
	int n, h, w, hout, wout;
	int up, down;     /* 1 or 2 */
	int p0;           /* leading zero padding (rows and columns) */
	float f[4];       /* the separable taps */
	float gain;
} gf_fir_desc;

/* Loss kinds (see gf_loss in <ganflow/nn.h> for the formulas). */
typedef enum {
	GF_LOSS_BCE = 0,      /* binary cross-entropy on probabilities, logs clamped at -100 */
	GF_LOSS_BCE_LOGITS,   /* binary cross-entropy on logits (stable form) */
	GF_LOSS_NONSAT,       /* non-saturating G loss on probabilities: -mean log p */
	GF_LOSS_NONSAT_LOGITS,/* non-saturating G loss on logits: mean softplus(-x) */
	GF_LOSS_HINGE_D,      /* mean relu(1 - t*x), t = +1 real, -1 fake */
	GF_LOSS_HINGE_G,      /* -mean x */
	GF_LOSS_LS,           /* least squares: mean (x - t)^2 */
	GF_LOSS_L1,           /* mean |x - t| */
	GF_LOSS_CE,           /* softmax cross-entropy of logits (n, k) with class labels */
	GF_LOSS_WGAN,         /* Wasserstein critic: -mean t*x, t = +1 real (and G), -1 fake */
	GF_LOSS_RELATIVISTIC, /* R3GAN's pairs: rows i and i + n/2, d = t (x_i - x_{i+n/2}), mean softplus(-d) */
	GF_LOSS_COUNT
} gf_loss_kind;

typedef struct gf_loss_desc {
	gf_loss_kind kind;
	int n;            /* batch */
	int k;            /* values per sample (classes for GF_LOSS_CE) */
	float target;     /* constant target when no target tensor is given */
	float scale;      /* multiplies the loss and its gradient */
} gf_loss_desc;

typedef enum { GF_OPT_ADAM = 0, GF_OPT_SGD, GF_OPT_OADAM } gf_optim_kind;

/* One optimiser update over a flat parameter block. Host-side precomputed
 * scalars so every backend rounds the same way. */
typedef struct gf_optim_args {
	gf_optim_kind kind;
	float lr;
	float beta1, beta2, eps;   /* Adam, optimistic Adam */
	float weight_decay;        /* L2 added to the gradient (PyTorch), or decoupled (AdamW) */
	int decoupled;             /* 1: p *= 1 - lr * weight_decay before the Adam step */
	float momentum, dampening; /* SGD */
	int nesterov;              /* SGD */
	int64_t step;              /* 1 on the first update */
	float step_size;           /* Adam: lr / (1 - beta1^step), computed in double */
	float bc2_sqrt;            /* Adam: sqrt(1 - beta2^step), computed in double */
} gf_optim_args;

/* Kinds of gf_backend_ops.copy. */
typedef enum { GF_COPY_H2H = 0, GF_COPY_H2D, GF_COPY_D2H, GF_COPY_D2D } gf_copy_kind;

/* Capability bits of gf_backend.caps. */
enum {
	GF_CAP_CONV_UP2 = 1u << 0,   /* conv with up = 2 (fused nearest upsample) */
	GF_CAP_CONV_GROUPS = 1u << 1 /* conv with groups > 1 (gf_conv_desc.groups) */
};

/* ---- collectives across data-parallel ranks (gf_backend_ops.collective) ----
 * The nn engine never calls MPI or NCCL: the layer that owns a
 * communicator (the exchange stage: MPI for host memory, NCCL for a GPU's)
 * fills a gf_comm, and a step stage hands it to its backend's collective
 * op, which orders the operation among the step's own ops (on a GPU: on
 * the instance's stream, so a captured step captures it). */
typedef enum {
	GF_COLL_WAIT = 0,    /* no data: later ops of the instance wait for every collective it launched */
	GF_COLL_MEAN,        /* x (n floats) <- the mean over the ranks of x */
	GF_COLL_MEAN_SHARD,  /* x (n floats, a whole block): this rank's shard (gf_dist_shard of n) <- the mean over
	                        the ranks of that shard; the rest of x is left as it was */
	GF_COLL_GATHER,      /* x (n floats, a whole block): every rank's shard <- its owner's values */
	GF_COLL_SUM_F64,     /* x (n doubles) <- the sum over the ranks of x */
	GF_COLL_RING_MEAN    /* x (n floats) <- (x_left + x + x_right) / 3 with the ring neighbours, the
	                        communicator's number of rounds */
} gf_coll_op;

typedef struct gf_comm gf_comm;
struct gf_comm {
	int rank, world;
	/* Runs op on x (n elements) in the memory of `device`: GF_CPU, host
	 * memory, done when it returns; a GPU, queued on `stream` (a
	 * cudaStream_t of that device, which may be capturing a graph). Never
	 * called with GF_COLL_WAIT. Returns 0, GF_ESTOP (a hard stop while it
	 * waited), GF_EFAIL (reported on the caller's context), or another
	 * code with gf_seterr detail. */
	int (*run)(const gf_comm *comm, gf_coll_op op, void *x, size_t n, gf_device device, void *stream);
	void *impl;          /* the owner's */
	/* Set by the one stage that uses the communicator: its gf_ctx (waits
	 * and failures are that stage's) and its step (for messages). */
	void *caller;
	int64_t step;
};

/* ---- the vtable ---- */

struct gf_backend_ops {
	uint32_t abi;     /* GF_BACKEND_ABI */
	uint32_t size;    /* sizeof(gf_backend_ops) the backend was built with */
	const char *name; /* "cpu", "cuda" */

	/* Releases the instance and everything it allocated internally
	 * (memory returned by alloc must have been freed by then). */
	void (*destroy)(gf_backend *be);

	/* ---- memory ---- */
	/* Allocates bytes of device memory, 64-byte aligned, into *ptr. */
	int (*alloc)(gf_backend *be, void **ptr, size_t bytes);
	void (*free)(gf_backend *be, void *ptr);
	int (*copy)(gf_backend *be, void *dst, const void *src, size_t bytes, gf_copy_kind kind);
	int (*fill)(gf_backend *be, float *x, size_t n, float value);
	/* Waits until every queued op finished. */
	int (*sync)(gf_backend *be);

	/* ---- dense algebra ---- */
	/* Row-major C (m, n) = alpha * op(A) op(B) + beta * C, op = transpose when ta/tb. */
	int (*gemm)(gf_backend *be, int ta, int tb, int m, int n, int k, float alpha,
	            const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
	/* y (n, c, hw) += b (c) */
	int (*bias_add)(gf_backend *be, float *y, const float *b, int n, int c, int hw);
	/* db (c) (+)= sum over n, hw of dy (n, c, hw) */
	int (*bias_grad)(gf_backend *be, float *db, const float *dy, int n, int c, int hw, int accumulate);
	/* y += alpha * x */
	int (*axpy)(gf_backend *be, float *y, const float *x, size_t n, float alpha);
	/* x *= s */
	int (*scale)(gf_backend *be, float *x, size_t n, float s);
	/* dst (rows, cols) with leading dimension ldd = src (rows, cols), lds; or
	 * dst += src when accumulate. Concat and split along dim 1 are this. */
	int (*copy2d)(gf_backend *be, float *dst, size_t ldd, const float *src, size_t lds,
	              size_t rows, size_t cols, int accumulate);

	/* ---- convolution ---- */
	/* y = conv(x, w) + b (b may be NULL). */
	int (*conv2d_forward)(gf_backend *be, float *y, const float *x, const float *w, const float *b,
	                      const gf_conv_desc *d);
	/* Gradients of conv2d_forward. Each output may be NULL (not wanted):
	 * dx (n, cin, h, w) is overwritten; dw (cout, cin, kh, kw) and db (cout)
	 * are overwritten, or added to when accumulate (gradient accumulation). */
	int (*conv2d_backward)(gf_backend *be, float *dx, float *dw, float *db, const float *dy,
	                       const float *x, const float *w, const gf_conv_desc *d, int accumulate);

	/* ---- normalisation ---- */
	/* Training mode: y = act(gamma * (x - mean) * rstd + beta) with batch
	 * statistics; saves mean and rstd (c) for backward; updates run_mean and
	 * run_var (c) unless they are NULL. gamma/beta NULL = no affine step. */
	int (*bn_forward_train)(gf_backend *be, float *y, float *mean, float *rstd, float *run_mean,
	                        float *run_var, const float *x, const float *gamma, const float *beta,
	                        const gf_bn_desc *d);
	/* Evaluation mode: running statistics. */
	int (*bn_forward_eval)(gf_backend *be, float *y, const float *x, const float *gamma,
	                       const float *beta, const float *run_mean, const float *run_var,
	                       const gf_bn_desc *d);
	/* Gradients of bn_forward_train (y is its output, needed for the fused
	 * activation). dx may be NULL; dgamma/dbeta may be NULL, else
	 * overwritten or accumulated. */
	int (*bn_backward)(gf_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy,
	                   const float *y, const float *x, const float *gamma, const float *mean,
	                   const float *rstd, const gf_bn_desc *d, int accumulate);

	/* ---- pointwise ---- */
	/* y = act(x); y may equal x. */
	int (*act_forward)(gf_backend *be, float *y, const float *x, size_t n, gf_act act, float param);
	/* dx = dy * act'(.) computed from the output y; dx may equal dy. */
	int (*act_backward)(gf_backend *be, float *dx, const float *dy, const float *y, size_t n,
	                    gf_act act, float param);
	/* Nearest upsampling of x (planes, h, w) by an integer factor, and its
	 * gradient (sum over each scale x scale block). */
	int (*upsample_forward)(gf_backend *be, float *y, const float *x, int planes, int h, int w, int scale);
	int (*upsample_backward)(gf_backend *be, float *dx, const float *dy, int planes, int h, int w, int scale);
	/* Dropout over `groups` groups of `group` consecutive values (group = 1:
	 * dropout; group = h*w: dropout2d). Group g is kept when
	 * gf_rng_u01(word g of the draw starting at rng->offset) >= p; mask (groups)
	 * receives 1/(1-p) or 0, y = x * mask. The caller advances its
	 * generator by gf_rng_blocks(groups). */
	int (*dropout_forward)(gf_backend *be, float *y, float *mask, const float *x, size_t groups,
	                       size_t group, float p, const gf_rng *rng);
	int (*dropout_backward)(gf_backend *be, float *dx, const float *dy, const float *mask,
	                        size_t groups, size_t group);
	/* Pooling; idx (n, c, hout, wout) receives argmax positions within a plane
	 * (max pooling only). */
	int (*pooling_forward)(gf_backend *be, float *y, int32_t *idx, const float *x, const gf_pooling_desc *d);
	int (*pooling_backward)(gf_backend *be, float *dx, const float *dy, const int32_t *idx,
	                     const gf_pooling_desc *d);
	/* Row-wise softmax of x (rows, cols), and its gradient from y. */
	int (*softmax_forward)(gf_backend *be, float *y, const float *x, int rows, int cols);
	int (*softmax_backward)(gf_backend *be, float *dx, const float *dy, const float *y, int rows, int cols);
	/* y (n, dim) = table[idx[i]]; idx (n) int32 in [0, num). Out-of-range
	 * indices are GF_EPARAM. */
	int (*embedding_forward)(gf_backend *be, float *y, const float *table, const int32_t *idx,
	                         int n, int dim, int num);
	/* dtable (num, dim) (+)= scatter of dy by idx, in index order. */
	int (*embedding_backward)(gf_backend *be, float *dtable, const float *dy, const int32_t *idx,
	                          int n, int dim, int num, int accumulate);

	/* ---- losses, optimisers, reductions, randomness ---- */
	/* Mean loss of x (n, k) into *loss_host (may be NULL) times d->scale, and
	 * its gradient into dx (may be NULL). target (n, k) may be NULL (d->target
	 * is used); labels (n) is for GF_LOSS_CE. */
	int (*loss)(gf_backend *be, float *loss_host, float *dx, const float *x, const float *target,
	            const int32_t *labels, const gf_loss_desc *d);
	/* Updates p (n) from g (n); state holds the optimiser's per-parameter
	 * arrays back to back (Adam: m, v; optimistic Adam: m, v, g_prev;
	 * SGD: momentum buffer), each n long. */
	int (*optim_step)(gf_backend *be, float *p, const float *g, float *state, size_t n,
	                  const gf_optim_args *a);
	/* *out_host = sum of x^2 in double, in a fixed order (fixed blocks). */
	int (*sumsq)(gf_backend *be, double *out_host, const float *x, size_t n);
	/* out (n) = uniforms in [lo, hi) or normals, element i from the word i
	 * of the draw starting at rng->offset (see <ganflow/rng.h>), identical
	 * to gf_rng_uniform / gf_rng_normal on the host. The caller advances. */
	int (*rng_uniform)(gf_backend *be, float *out, size_t n, float lo, float hi, const gf_rng *rng);
	int (*rng_normal)(gf_backend *be, float *out, size_t n, float mean, float std, const gf_rng *rng);

	/* ==== appended ops (device backends) ====
	 *
	 * Everything from here on was appended to ABI 1: a backend built before
	 * has a smaller `size` and still loads, and a backend may leave any of
	 * these NULL (the CPU backend fills loss_dev, sn_forward and the ops
	 * after it but reduce_dev's followers; with GANFLOW_CPU_DEVICE_CHECK=1
	 * it fills them all, emulating a device whose rules it checks: see
	 * core/nn/cpu/graph_cpu.c). Test with GF_BACKEND_HAS(be, op) before
	 * calling one.
	 * docs/cuda.md describes how stages use them. */

	/* ---- options and statistics ---- */
	/* Sets a backend option by name, e.g. "deterministic" = "1",
	 * "benchmark" = "0", "tf32" = "1", "up2" = "subpixel" (the CUDA
	 * backend's are listed in docs/cuda.md). Takes effect for later ops.
	 * GF_EPARAM for an unknown key or value. */
	int (*set_option)(gf_backend *be, const char *key, const char *value);
	/* Fills *out (see gf_backend_stats). May synchronise (the fp16 loss
	 * scale lives on the device). */
	int (*stats)(gf_backend *be, gf_backend_stats *out);

	/* ---- streams, events, pinned memory ---- */
	/* The instance's stream (a cudaStream_t): every op of the instance is
	 * ordered on it. For interoperation (NCCL collectives on the same
	 * stream). Owned by the backend. */
	void *(*stream)(gf_backend *be);
	/* Like copy, but fully asynchronous: returns at once, and the source
	 * must stay untouched (and a D2H destination unread) until an event
	 * recorded after this call has completed. For pinned host memory (see
	 * pinned_alloc); copy() instead stages host memory so that its source
	 * may be reused when it returns. */
	int (*copy_async)(gf_backend *be, void *dst, const void *src, size_t bytes, gf_copy_kind kind);
	/* Page-locked host memory (NULL on failure), shaped so that
	 * `gf_allocator a = { be->ops->pinned_alloc, be->ops->pinned_free, be }`
	 * is a <ganflow/msg.h> allocator for a port's message buffers. The
	 * memory belongs to the process, not the instance: it may be freed
	 * after the instance is closed (the backend .so stays loaded). */
	void *(*pinned_alloc)(void *be, size_t bytes);
	void (*pinned_free)(void *be, void *ptr);
	/* Events (cudaEvent_t) marking points in an instance's stream, for the
	 * gf_msg.event of a message that carries device memory. record: the
	 * event completes when everything queued on this instance so far has
	 * run. wait: later ops of this instance wait for the event on the
	 * device (the host does not block). sync: the host waits for it. An
	 * event may be recorded by one instance and waited on by another of the
	 * same backend .so. */
	int (*event_create)(gf_backend *be, void **event);
	void (*event_destroy)(gf_backend *be, void *event);
	int (*event_record)(gf_backend *be, void *event);
	int (*event_wait)(gf_backend *be, void *event);
	int (*event_sync)(gf_backend *be, void *event);

	/* ---- deferred results (usable inside a graph step) ---- */
	/* loss() that writes the mean loss times d->scale to the device float
	 * *loss_dev instead of a host value, and never synchronises. Input
	 * errors (a bce input outside [0, 1] or NaN, a label out of range) are
	 * recorded on the device and returned by the next sync (or loss with a
	 * host value), naming the element, and make *loss_dev NaN, so that a
	 * reader that never syncs sees a non-finite loss. A host backend (the
	 * CPU's) returns them at once. */
	int (*loss_dev)(gf_backend *be, float *loss_dev, float *dx, const float *x, const float *target,
	                const int32_t *labels, const gf_loss_desc *d);
	/* fp16 loss scaling: divides the gradients g (n) by the current loss
	 * scale now and records whether any is Inf/NaN, so that they can be
	 * clipped or exchanged unscaled; the next optim_step over g then skips
	 * its own unscaling (GradScaler.unscale_). A no-op in fp32/bf16. */
	int (*grad_unscale)(gf_backend *be, float *g, size_t n);

	/* ---- graphs (captured steps) ---- */
	/* Brackets one training step so that it runs as a captured graph:
	 *
	 *   gf_graph *g = NULL;                 (once)
	 *   ...each step:
	 *   graph_begin(be, &g);  <the step's ops>;  graph_end(be, g);
	 *
	 * The first time (*graph NULL) the ops are captured into a new graph
	 * (*graph is set), and graph_end launches it once: that call runs the
	 * step. Later times the ops are not launched one by one: they are only
	 * checked against the captured sequence (same ops, shapes and buffers)
	 * while their per-step scalars (generator offsets, optimiser step
	 * scalars, learning rate, loss targets) are collected, and graph_end
	 * launches the graph with those. The step therefore runs the host code
	 * it would run eagerly (so generators and optimiser counters advance as
	 * usual) and gives exactly the eager results. Inside the brackets no op
	 * may need the host: loss with a host value, sumsq, sync and D2H copies
	 * are GF_EUNSUPPORTED (use loss_dev). A step that differs from the
	 * captured one makes graph_end return GF_EPARAM without running it.
	 * Graphs belong to the instance; graph_destroy releases one. */
	int (*graph_begin)(gf_backend *be, gf_graph **graph);
	int (*graph_end)(gf_backend *be, gf_graph *graph);
	void (*graph_destroy)(gf_backend *be, gf_graph *graph);

	/* ---- spectral normalisation (torch.nn.utils.spectral_norm) ----
	 * w (a, m, k) is read as the matrix W (m, a*k) with W[r][i*k + s] =
	 * w[i][r][s]: a = 1 for a weight normalised along its first dimension
	 * (linear, conv, embedding), a = in for a transposed conv (PyTorch's
	 * dim = 1). u (m) and v (a*k) are the power-iteration vectors.
	 * sn_forward: when iterate, one power iteration v = W^T u / max(|W^T u|,
	 * eps), u = W v / max(|W v|, eps) updates u and v in place; then
	 * sigma[0] = u . (W v) (device float) and w_sn = w / sigma. */
	int (*sn_forward)(gf_backend *be, float *w_sn, float *sigma, float *u, float *v, const float *w, int a,
	                  int m, int k, float eps, int iterate);
	/* Gradient of w_sn = w / (u . W v) with u and v constants: dw (+)=
	 * g / sigma - (sum g * w) / sigma^2 * u v^T (in w's layout). */
	int (*sn_backward)(gf_backend *be, float *dw, const float *g, const float *w, const float *sigma,
	                   const float *u, const float *v, int a, int m, int k, int accumulate);

	/* ---- rows (the projection discriminator's head, layer proj) ---- */
	/* out (n) (+)= sum over j of a (n, k) * b (n, k): each row's sum in a
	 * fixed order (float lanes, then double). */
	int (*row_dot)(gf_backend *be, float *out, const float *a, const float *b, int n, int k, int accumulate);
	/* y (n, k) (+)= s (n) * x (n, k), row i scaled by s[i]. */
	int (*row_scale)(gf_backend *be, float *y, const float *s, const float *x, int n, int k, int accumulate);

	/* ---- conditional batch normalisation (layer cbn) ----
	 * Batchnorm without its own affine step, followed by a gain and a bias
	 * per sample and channel: y = act(gamma[i][ch] * (x - mean) * rstd +
	 * beta[i][ch]) for x (n, c, hw), gamma and beta (n, c). d as batchnorm
	 * (PyTorch's conventions, fused activation). train: batch statistics,
	 * mean and rstd (c) saved, run_mean / run_var updated unless NULL;
	 * train = 0: the running statistics (mean and rstd are not touched). */
	int (*cbn_forward)(gf_backend *be, float *y, float *mean, float *rstd, float *run_mean, float *run_var,
	                   const float *x, const float *gamma, const float *beta, const gf_bn_desc *d, int train);
	/* Gradients of a training cbn_forward (y its output, for the fused
	 * activation): dgamma and dbeta (n, c) overwritten (per sample: the
	 * caller reduces them onto whatever produced gamma and beta); dx
	 * overwritten unless NULL. */
	int (*cbn_backward)(gf_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy, const float *y,
	                    const float *x, const float *gamma, const float *mean, const float *rstd,
	                    const gf_bn_desc *d);
	/* ---- DiffAugment (Zhao et al. 2020) ----
	 * y (n, c, h, w) = cutout(translation(color(x))), each part when its bit
	 * of `what` (GF_AUG_COLOR, _TRANSLATION, _CUTOUT) is set, from 7
	 * uniforms in [0, 1) per sample in u (n, 7) (device): brightness
	 * + (u0 - 1/2); saturation (x - channel mean) 2 u1 + channel mean;
	 * contrast (x - sample mean) (u2 + 1/2) + sample mean; translation by
	 * tx = floor(u3 (2 sh + 1)) - sh rows (ty from u4 and sw columns), sh =
	 * (int)(h / 8 + 1/2), zeros shifted in; cutout of a (ch, cw) = ((int)(h
	 * / 2 + 1/2), ...) box zeroed, centred at row floor(u5 (h + 1 - ch % 2))
	 * (- ch / 2), column from u6. */
	int (*augment_forward)(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int h, int w,
	                       unsigned what);
	/* dx (n, c, h, w) = the transpose of that (affine) map applied to dy. */
	int (*augment_backward)(gf_backend *be, float *dx, const float *dy, const float *u, int n, int c, int h, int w,
	                        unsigned what);
	/* ---- strided batched GEMM (self-attention) ----
	 * For b in [0, batch): C_b = alpha * op(A_b) op(B_b) + beta * C_b, row-major
	 * as gemm, with X_b = X + b * stride_x (floats). A stride of 0 shares
	 * that operand across the batch (a 1x1 convolution's weight). With
	 * stride_c = 0 the products are summed instead (a weight gradient):
	 * C = alpha * sum_b op(A_b) op(B_b) + beta * C, each element summed in
	 * batch order, so the result is deterministic. Operands may not overlap
	 * C. The CPU splits the batch (or, summing, C's columns) over its team,
	 * one single-threaded SGEMM per piece; CUDA is cuBLAS's strided batched
	 * GEMM (in f32 whatever the instance's precision). */
	int (*gemm_batched)(gf_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a,
	                    int lda, int64_t stride_a, const float *b, int ldb, int64_t stride_b, float beta, float *c,
	                    int ldc, int64_t stride_c, int batch);

	/* ---- double backward (gf_net_backward2, docs/nn.md "Double backward") ----
	 * For a layer with forward y = f(x) and backward dx = J(x)^T dy, given
	 * the tangent t of x (the adjoint of dx): the forward-mode product J t
	 * (the tangent of y), and the derivative of S = <t, J(x)^T dy> with
	 * respect to x holding dy, where J depends on x. */
	/* dx = t * dy * act''(x), the second derivative read from the output y
	 * (tanh: -2 y (1 - y^2); sigmoid: y (1 - y)(1 - 2 y); none, relu and
	 * lrelu: 0). dx may equal t or dy. */
	int (*act_backward2)(gf_backend *be, float *dx, const float *t, const float *dy, const float *y, size_t n,
	                     gf_act act, float param);
	/* Double backward of bn_forward_train / bn_backward (arguments as
	 * bn_backward; t (n, c, hw) the tangent of x): ty = J t, the fused
	 * activation's derivative included (NULL: not wanted); dx = dS/dx
	 * holding dy (NULL: not wanted), overwritten; dgamma (c) = dS/dgamma
	 * (NULL: not wanted), overwritten or added to when accumulate. gamma
	 * NULL: no affine step (gamma = 1). */
	int (*bn_backward2)(gf_backend *be, float *ty, float *dx, float *dgamma, const float *t, const float *dy,
	                    const float *y, const float *x, const float *gamma, const float *mean, const float *rstd,
	                    const gf_bn_desc *d, int accumulate);
	/* y (n, c, hout, wout) = x (n, c, h, w) read at the argmax positions
	 * idx of a max pooling (pooling_forward's), 0 where idx < 0: max
	 * pooling's forward-mode product. */
	int (*pooling_gather)(gf_backend *be, float *y, const float *x, const int32_t *idx, const gf_pooling_desc *d);
	/* augment_forward without the brightness shift: the map's linear part
	 * (the Jacobian product of the layer). */
	int (*augment_linear)(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int h, int w,
	                      unsigned what);
	/* ---- minibatch standard deviation (StyleGAN, layer mbstd) ----
	 * x (n, c, h, w) with n = G m: sample i is member i / m of group i % m
	 * (StyleGAN2's x.reshape(G, -1, F, c / F, h, w)); per group and each of
	 * the F channel slices, the standard deviation over the G members,
	 * sqrt(var + eps) with the biased variance, averaged over the slice's
	 * (c / F, h, w): y (n, c + F, h, w) is x followed by F planes holding
	 * the statistics of the sample's group. */
	int (*mbstd_forward)(gf_backend *be, float *y, const float *x, const gf_mbstd_desc *d);
	/* dx (n, c, h, w) = the gradient of mbstd_forward from dy (n, c + F, h, w). */
	int (*mbstd_backward)(gf_backend *be, float *dx, const float *dy, const float *x, const gf_mbstd_desc *d);
	/* Its double backward: ty (n, c + F, h, w) = J t (NULL: not wanted),
	 * dx (n, c, h, w) = dS/dx holding dy (NULL: not wanted), overwritten. */
	int (*mbstd_backward2)(gf_backend *be, float *ty, float *dx, const float *t, const float *dy, const float *x,
	                       const gf_mbstd_desc *d);
	/* ---- results that stay on the device (usable inside a graph step) ----
	 * *out, a double in the backend's memory, = the sum of x (n) in double
	 * (squares = 0) or of its squares (squares = 1: the value sumsq
	 * returns, bit for bit), in a fixed order decided by n alone. Never
	 * waits: the value is read later (a discriminator's mean output, a
	 * gradient norm, docs/cuda.md "Step stages"). */
	int (*reduce_dev)(gf_backend *be, double *out, const float *x, size_t n, int squares);

	/* ---- device memory owned by the process (message buffers) ----
	 * Shaped like pinned_alloc: `gf_allocator a = { be->ops->device_alloc,
	 * be->ops->device_free, be }` is a <ganflow/msg.h> allocator whose
	 * buffers are device memory of be's device (fakes and D weights that
	 * stay on the GPU). alloc needs the instance; free does not (a pool
	 * outlives the stage's backend). NULL on failure. */
	void *(*device_alloc)(void *be, size_t bytes);
	void (*device_free)(void *be, void *ptr);

	/* ---- timing ----
	 * event_create_timed: an event (as event_create) that also records
	 * when it completed. event_elapsed: milliseconds between two timed
	 * events of this instance, both recorded and completed (after
	 * event_sync on the later one); GF_EPARAM otherwise. The step stages
	 * time their device work with them (busy fractions). */
	int (*event_create_timed)(gf_backend *be, void **event);
	int (*event_elapsed)(gf_backend *be, void *start, void *end, float *ms);
	/* ---- StyleGAN2 (layers bias_act and modconv) ---- */
	/* y (n, c, hw) = clamp(act(x + bgain * b) * gain) (gf_bias_act_desc); b
	 * (c) may be NULL (no bias); y may equal x. */
	int (*bias_act_forward)(gf_backend *be, float *y, const float *x, const float *b, const gf_bias_act_desc *d);
	/* dx = dy * gain * act'(.) where |y| < clamp (0 where clamped), read
	 * from the output y (gain > 0 keeps the sign of the activation's
	 * input); dx may equal dy. Its own double backward: J t is this op on
	 * t (piecewise linear, no second-order term). */
	int (*bias_act_backward)(gf_backend *be, float *dx, const float *dy, const float *y, const gf_bias_act_desc *d);
	/* y (n) = 1 / sqrt(x + eps) (modconv's demodulation coefficients); y
	 * may equal x. */
	int (*rsqrt_eps)(gf_backend *be, float *y, const float *x, size_t n, float eps);
	/* y = upfirdn2d(x) (gf_fir_desc; layer fir), and its adjoint dx (n, h,
	 * w) from dy (n, hout, wout), overwritten. Both gather: one output
	 * element from its own taps, in a fixed order. */
	int (*fir_forward)(gf_backend *be, float *y, const float *x, const gf_fir_desc *d);
	int (*fir_backward)(gf_backend *be, float *dx, const float *dy, const gf_fir_desc *d);
	/* ---- adaptive discriminator augmentation (StyleGAN2-ADA, layer ada) ----
	 * m (n, GF_ADA_M) = each sample's transform from its GF_ADA_U uniforms
	 * in [0, 1) (u (n, GF_ADA_U)) and the probability *p (one float in
	 * device memory, read when the op runs, so a captured graph sees the
	 * current p): the parts of `what` (GF_ADA_BLIT, _GEOM, _COLOR) with
	 * StyleGAN2-ADA's distributions, each transform on with probability p
	 * (the two rotations 1 - sqrt(1 - p) each), composed as
	 * core/nn/ada_params.h does (a 2x3 inverse geometric map and a 3x4
	 * colour matrix per sample). c is the image's channels (1 or 3 with
	 * colour: hue and saturation act on 3 only). */
	int (*ada_params)(gf_backend *be, float *m, const float *u, const float *p, int n, int c, int h, int w,
	                  unsigned what);
	/* y (n, c, h, w) = colour(resample(x)) for the transforms m: output
	 * pixel (r, col) reads x bilinearly at the point m's geometric map
	 * gives, the image continued by reflection (x[-1] = x[1]) as far as
	 * needed; then the colour matrix, its offset only when affine (affine
	 * 0: the map's linear part, the double backward's Jacobian product). */
	int (*ada_forward)(gf_backend *be, float *y, const float *x, const float *m, int n, int c, int h, int w,
	                   int affine);
	/* dx (n, c, h, w) = the transpose of ada_forward's linear part applied
	 * to dy, overwritten. */
	int (*ada_backward)(gf_backend *be, float *dx, const float *dy, const float *m, int n, int c, int h, int w);
	/* ---- style mixing (StyleGAN2, layer style_w) ----
	 * The w synthesis layer `index` reads, of a batch whose mapping ran on
	 * (w, w2) per sample: x (n, 2, c), u two uniforms in [0, 1) in device
	 * memory (read when the op runs, so a captured graph sees each step's
	 * draw). cutoff = 1 + floor(u[0] (num_ws - 1)) (at most num_ws - 1),
	 * num_ws unless u[1] < prob (no mixing); the layer reads w2 when index
	 * >= cutoff, else w. adjoint = 0: y (n, c) = that row of x; adjoint = 1:
	 * y (n, 2, c) = x (n, c) in that row and 0 in the other (overwritten). */
	int (*style_mix)(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int index, int num_ws,
	                 float prob, int adjoint);
	/* ---- moving averages of weights (g_step's ema) ----
	 * avg (n) = decay avg + (1 - decay) w, with the bits of scale(avg,
	 * decay) then axpy(avg, w, 1 - decay) (1 - decay rounded to float).
	 * decay is a per-step scalar, not part of a captured step: a graph
	 * replays this op with each step's decay (StyleGAN2's ramp changes it
	 * at every update). */
	int (*ema)(gf_backend *be, float *avg, const float *w, size_t n, float decay);
	/* ---- recipes inside the captured step (docs/cuda.md "Nothing eager") ----
	 * Each reads and writes a few doubles of state in device memory, so a
	 * step that needs them never waits for the host. */
	/* Gradient clipping: g (n) *= coef when coef = max_norm / (sqrt(*sumsq)
	 * + 1e-6) < 1 (gf_net_clip_grad_norm's arithmetic: coef in double,
	 * applied as a float; a non-finite *sumsq leaves g). *sumsq: device. */
	int (*clip_dev)(gf_backend *be, float *g, size_t n, const double *sumsq, float max_norm);
	/* LeCam on one half-step's D outputs out (n): with st = (set, a_real,
	 * a_fake, run_real, run_fake, base_real, base_fake) in device memory,
	 * when set: r_i = relu(fake ? a_real - out_i : out_i - a_fake),
	 * dy_i += (float)(+-2 lambda scale r_i / n) (- for fake), *value =
	 * lambda scale sum r_i^2 / n (gf_lecam_grad's arithmetic); unset: *value
	 * = 0, dy untouched. Always: run_{real|fake} += (sum_i out_i / n) /
	 * acc, the D step's mean output as the step's metrics add it up. */
	int (*lecam_dev)(gf_backend *be, float *dy, double *value, double *st, const float *out, size_t n, int fake,
	                 float lambda, float scale, int acc);
	/* After a D step: the means it added (run - base) move the averages
	 * (gf_lecam_average: decay 0 on the first), set = 1, base = run; last:
	 * the iteration's last D step, run = base = 0. */
	int (*lecam_avg)(gf_backend *be, double *st, float decay, int last);
	/* ADA's controller (gf_ada) on the device. ada_signs: st[0] += sum of
	 * sign(out_i - mid) (0 at mid), st[1] += n, for D's n outputs on a real
	 * batch. ada_update, after a D step of `images` real images, with st =
	 * (signs, count, images, steps, r_t): images and steps counted; every
	 * interval-th step r_t = signs / count (0 without outputs) and, kimg >
	 * 0, *p += sign(r_t - target) images / (kimg 1000) clamped to [0, 1],
	 * then the counts reset. out (2, device, may be NULL): p and r_t after
	 * it, for the step's metrics. */
	int (*ada_signs)(gf_backend *be, double *st, const float *out, size_t n, float mid);
	int (*ada_update)(gf_backend *be, float *p, double *st, double *out, double images, int interval, double target,
	                  double kimg);
	/* A gradient penalty's per-sample factors (core/train/penalty.c):
	 * from sq (npts rows of max_batch floats, row k's first b: |g_ik|^2),
	 * l_i = sqrt(sum_k sq_ki / (npts > 1 ? npts : 1)) in double; with
	 * center = *center_st moved first by decay (decay > 0: c += decay
	 * (mean_i l_i - c), the path length's moving mean; center_st may be
	 * NULL for a fixed center d->center): square: P = weight mean 0.5 l^2,
	 * f_i = scale weight / b; distance: P = weight mean (l - c)^2, f_i =
	 * scale 2 weight (l_i - c) / (l_i b) (0 at l_i = 0); f /= npts when
	 * npts > 1. f (b) device floats; out (device doubles, may be NULL):
	 * out[0] = P, out[1] = mean_i l_i; with a split (square only) each
	 * part is a penalty of its own, f_i = scale w_i / (its part's size),
	 * out[0] the first part's P, out[2] the second's (weight2). weight,
	 * weight2 and scale are per-step scalars (a schedule may change them). */
	int (*penalty_factors)(gf_backend *be, float *f, double *out, double *center_st, const float *sq, int b,
	                       int max_batch, int npts, const gf_penalty_desc *d);
	/* How many times the host has waited for this instance's device so
	 * far: sync, event_sync, copies to the host, a loss or sum returned
	 * to the host. A counter, read without waiting (the step driver
	 * counts the waits inside and between steps). */
	int64_t (*host_waits)(gf_backend *be);
	/* ---- the device's peak (the denominator of a run's MFU) ----
	 * *flop_s = the dense peak FLOP/s of the instance's device at the
	 * precision its convolutions and GEMMs run in (bf16, fp16, tf32 where
	 * allowed, else fp32) and `what` (snprintf rule) where the figure
	 * comes from: on CUDA NVIDIA's datasheet figure for the device's name
	 * (docs/cuda.md "Peak FLOP/s"), on the CPU the rate of the backend's
	 * own SGEMM, measured once per CPU model and thread count and cached
	 * (docs/train.md "FLOPs and MFU"). GF_EUNSUPPORTED: no figure for this
	 * device and precision. Not inside a captured step; the CPU's first
	 * call measures (a fifth of a second). */
	int (*peak_flops)(gf_backend *be, double *flop_s, char *what, size_t size);
	/* ---- collectives (a data-parallel exchange inside a step) ----
	 * op (gf_coll_op) on x (n elements, the instance's memory) through
	 * comm, ordered after the ops queued before it; later ops that read x
	 * must follow a GF_COLL_WAIT (comm may be NULL then). The CPU runs it
	 * when called (GF_COLL_WAIT is nothing); CUDA queues it on a stream of
	 * its own that waits for the instance's stream, and GF_COLL_WAIT makes
	 * the instance's stream wait for it (so a collective overlaps what is
	 * queued between the two), all of it capturable: inside a graph step
	 * every collective must be waited for before graph_end. */
	int (*collective)(gf_backend *be, const gf_comm *comm, gf_coll_op op, void *x, size_t n);
};

/* ada_params: the uniforms drawn and the transform kept per sample. */
enum { GF_ADA_U = 32, GF_ADA_M = 20 };
/* The parts of ada_params (StyleGAN2-ADA's pipeline "bgc" = all three). */
enum { GF_ADA_BLIT = 1u, GF_ADA_GEOM = 2u, GF_ADA_COLOR = 4u };

/* The parts of augment_forward / augment_backward. */
enum { GF_AUG_COLOR = 1u, GF_AUG_TRANSLATION = 2u, GF_AUG_CUTOUT = 4u };

/* Size of gf_backend_ops without the appended ops: the smallest `size`
 * the loader accepts. */
#define GF_BACKEND_OPS_BASE_SIZE offsetof(gf_backend_ops, set_option)

/* 1 when backend be provides the appended op `op` (its ops table is large
 * enough and the pointer is set). */
#define GF_BACKEND_HAS(be, op)                                                                   \
	((be)->ops->size >= offsetof(gf_backend_ops, op) + sizeof((be)->ops->op) && (be)->ops->op != NULL)

/* ---- instances and the .so descriptor ---- */

/* Arithmetic precision of a backend instance (the Colossal-AI study's
 * AMP): parameters, gradients and optimiser state stay f32 ("master
 * weights"); bf16/fp16 apply to the convolutions, GEMMs and activations.
 * fp16 uses dynamic loss scaling inside the backend (see backend docs). */
typedef enum {
	GF_PREC_FP32 = 0,
	GF_PREC_BF16,
	GF_PREC_FP16,
	GF_PREC_TF32     /* f32 tensors; convolutions and GEMMs on TF32 tensor cores (CUDA); the CPU computes fp32 */
} gf_precision;

/* Layout choice of a backend instance (ParaGAN's hardware-aware layout). */
typedef enum {
	GF_LAYOUT_AUTO = 0,  /* the backend picks (NHWC + channel padding where tensor cores gain) */
	GF_LAYOUT_NCHW,
	GF_LAYOUT_NHWC
} gf_layout_choice;

typedef struct gf_backend_opts {
	int threads;       /* CPU threads, 0 = all cores (GANFLOW_THREADS overrides 0) */
	int device_index;  /* GPU ordinal */
	gf_precision precision;  /* GF_PREC_FP32 unless asked; the CPU backend computes fp32 (tf32 accepted as fp32) */
	gf_layout_choice layout; /* GF_LAYOUT_AUTO */
} gf_backend_opts;

/* What a device backend reports through its stats op. */
struct gf_backend_stats {
	gf_precision precision;
	gf_layout_choice layout;   /* as resolved: GF_LAYOUT_NCHW or GF_LAYOUT_NHWC (what "auto" picked) */
	float loss_scale;          /* fp16: the current dynamic loss scale; 1 otherwise */
	int64_t skipped_steps;     /* fp16: optimiser updates skipped because a gradient overflowed */
	int64_t optim_steps;       /* optimiser updates applied (all networks of the instance) */
	int64_t graphs;            /* graphs captured */
	int64_t replays;           /* graph launches after their capture */
	size_t device_bytes;       /* memory held through alloc */
	size_t scratch_bytes;      /* the instance's own scratch, workspaces and caches */
	int deterministic;         /* only deterministic convolution algorithms */
	int tf32;                  /* fp32 convolutions may use TF32 tensor cores */
	int tf32_gemm;             /* and fp32 GEMMs (precision tf32) */
	char device_name[64];
};

/* Parses "fp32" / "tf32" / "bf16" / "fp16" and "auto" / "nchw" / "nhwc".
 * Return 0 or GF_EPARAM. */
int gf_precision_parse(const char *s, gf_precision *out);
/* "fp32", "tf32", "bf16", "fp16" ("?" for another value). */
const char *gf_precision_name(gf_precision p);
int gf_layout_parse(const char *s, gf_layout_choice *out);

/* An open backend. ops is owned by the backend (usually static). */
struct gf_backend {
	const gf_backend_ops *ops;
	gf_device device;    /* where its memory lives */
	int device_index;
	int threads;         /* CPU worker threads it uses */
	unsigned caps;       /* GF_CAP_* */
	void *impl;          /* backend private */
	void *dl;            /* dlopen handle for a loaded backend (the loader's) */
};

/* Exported by a backend .so as `const gf_backend_desc ganflow_backend`. */
typedef struct gf_backend_desc {
	uint32_t abi;      /* GF_BACKEND_ABI */
	uint32_t size;     /* sizeof(gf_backend_desc) */
	const char *name;
	const char *doc;
	/* Creates an instance (fills *out, owned by the caller, released with
	 * gf_backend_close). Returns 0, GF_ENOBACKEND (no device) or -errno. */
	int (*create)(const gf_backend_opts *opts, gf_backend **out);
} gf_backend_desc;

#ifdef __cplusplus
}
#endif
#endif
