/* ganflow nn engine: networks built from layer tables, losses, optimisers,
 * checkpoints.
 *
 * A network is built from a plain layer table (a gf_value tree, usually
 * returned by a Lua backbone such as require("backbones.dcgan").G{}):
 *
 *   { {"linear", 100, 8192}, {"reshape", 128, 8, 8}, {"bn", 128},
 *     {"upsample", 2}, {"conv", 128, 128, 3, 1, 1}, {"bn", 128, eps = 0.8},
 *     {"lrelu", 0.2}, ..., {"tanh"},
 *     input_shape = {100}, init = "torch" }
 *
 * (the full reference of layer types and keys is docs/nn.md). The network
 * owns one flat block of parameters, one of gradients (same layout), one
 * of buffers (batchnorm running statistics), all in the backend's memory,
 * with named views carved out of them; activations and their gradients
 * live in a workspace allocated once for the largest batch, so forward and
 * backward allocate nothing.
 *
 * Every computation goes through the backend vtable (<ganflow/backend.h>).
 * Engine-level fusions (nearest upsample x2 + 3x3 conv -> sub-pixel conv;
 * batchnorm + ReLU/LeakyReLU) are applied where the table allows and the
 * backend supports them, unless GF_NET_NOFUSE.
 *
 * A network, its optimiser and its backend are used from one thread at a
 * time. All functions return 0 or a negative code (<ganflow/err.h>) with a
 * detail message in gf_errmsg() naming the layer ("layer 3 (conv): ...",
 * layers counted from 1 as in the Lua table) or tensor at fault.
 */
#ifndef GANFLOW_NN_H
#define GANFLOW_NN_H

#include <stddef.h>
#include <stdint.h>

#include <ganflow/backend.h>
#include <ganflow/rng.h>
#include <ganflow/safetensors.h>
#include <ganflow/tensor.h>
#include <ganflow/value.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- backends ---- */

/* Opens a backend by name: "cpu" (built in), "cuda" (loads backend_cuda.so
 * from GANFLOW_BACKEND_PATH, the build tree or the install prefix and
 * checks its descriptor's abi and size), or "auto" (cuda when it opens,
 * else cpu). opts may be NULL (defaults: all cores, device 0). The CPU
 * backend sets OpenBLAS's (process-wide) thread count to its own.
 * Returns 0, GF_ENOBACKEND (unknown name, no .so, no device) or GF_EABI.
 * Release with gf_backend_close. */
int gf_backend_open(const char *name, const gf_backend_opts *opts, gf_backend **out);
void gf_backend_close(gf_backend *be);

/* The CPU backend directly (what gf_backend_open("cpu") returns). */
int gf_backend_cpu_create(const gf_backend_opts *opts, gf_backend **out);

/* ---- networks ---- */

typedef struct gf_net gf_net;

/* Flags of gf_net_opts. */
enum {
	GF_NET_NOFUSE = 1u << 0   /* no engine fusions (tests, debugging) */
};

typedef struct gf_net_opts {
	int max_batch;              /* largest batch forward will be given (> 0) */
	unsigned flags;             /* GF_NET_* */
	int input_ndim;             /* 0: use the table's input_shape */
	int64_t input_shape[GF_MAX_DIMS - 1]; /* per-sample input shape, no batch */
} gf_net_opts;

/* Builds a network from a layer table for backend be (which must outlive
 * the network). Shapes are inferred layer by layer from the input shape;
 * a mismatch, unknown layer type, wrong number of arguments or bad key is
 * GF_EPARAM or GF_ESHAPE naming the layer: "layer 3 (conv): expects 128
 * input channels, got 64". Parameters are zero until gf_net_init. The
 * table is not retained. Release with gf_net_destroy. */
int gf_net_create(gf_net **out, gf_backend *be, const gf_value *table, const gf_net_opts *opts);
void gf_net_destroy(gf_net *net);

/* Initialises parameters and buffers from rng, layer by layer in table
 * order: PyTorch's default initialisation, or DC-GAN's (weights of conv,
 * transposed conv and linear N(0, 0.02), their biases 0, batchnorm gamma
 * N(1, 0.02), beta 0) for layers whose table or layer entry says
 * init = "dcgan". Running statistics are reset (mean 0, var 1). */
int gf_net_init(gf_net *net, gf_rng *rng);

/* The backend the network was built for. */
gf_backend *gf_net_backend(const gf_net *net);

/* The network's own generator (dropout masks), seeded with (seed, stream);
 * its state is saved in checkpoints. The pointer is owned by the net. */
gf_rng *gf_net_rng(gf_net *net);

/* Per-sample input shape (descriptor with batch = max_batch, data NULL),
 * output shape likewise, and the number of label classes (0 when the
 * network takes no labels). */
void gf_net_shapes(const gf_net *net, gf_tensor *input, gf_tensor *output);
int gf_net_classes(const gf_net *net);

/* Forward modes. */
enum {
	GF_EVAL = 0,             /* batchnorm on running statistics, no dropout */
	GF_TRAIN = 1u << 0,      /* batch statistics, dropout, running statistics updated */
	GF_FREEZE_STATS = 1u << 1 /* with GF_TRAIN: leave running statistics alone
	                           * (the read-only D replica in a G step) */
};

/* Runs the network on x (batch, input shape...) f32, batch <= max_batch;
 * labels (batch) i32 when the network takes labels, else NULL. Both may be
 * in the backend's memory or in host memory (their device field says
 * which); they are copied in, so the caller may reuse them at once. The
 * output stays valid until the next forward. */
int gf_net_forward(gf_net *net, const gf_tensor *x, const gf_tensor *labels, unsigned mode);

/* Descriptor of the last forward's output (owned by the net, valid until
 * the next forward or gf_net_destroy). */
int gf_net_output(const gf_net *net, gf_tensor *out);

/* Output of the layer named `name` (key name = "..." in its table entry)
 * in the last forward, e.g. the features of a classifier. */
int gf_net_node(const gf_net *net, const char *name, gf_tensor *out);

/* How many layers of the given type (the canonical name, "ada") the
 * network has; the view prefix of the first ("0", or its name: its
 * buffers are "<key>.<buffer>") into key (snprintf rule) when key is not
 * NULL and there is one. */
int gf_net_count_type(const gf_net *net, const char *type, char *key, size_t size);

/* Backward flags. */
enum {
	GF_NEED_DX = 1u << 0,     /* gradient w.r.t. the input x (gf_net_dx) */
	GF_NEED_DW = 1u << 1,     /* gradients w.r.t. parameters, into the grads block */
	GF_ACCUMULATE = 1u << 2   /* add into the grads block instead of overwriting it */
};

/* Back-propagates dy (the gradient of the loss w.r.t. the last forward's
 * output, same shape, device memory, not retained) through the last
 * forward. With GF_NEED_DW the parameter gradients are written (or added,
 * with GF_ACCUMULATE) into the grads block; without it no weight gradient
 * is computed at all (G's step through D). Must follow a GF_TRAIN forward,
 * or an eval forward of a network without dropout/batchnorm. */
int gf_net_backward(gf_net *net, const float *dy, unsigned flags);

/* Gradient w.r.t. x from the last backward with GF_NEED_DX (owned by the
 * net, valid until the next backward). */
int gf_net_dx(const gf_net *net, gf_tensor *dx);

/* ---- double backward (gradient penalties) ----
 *
 * Penalties on the input gradient g = dx of a backward (R1: gamma/2 |g|^2
 * on real images; WGAN-GP: (|g| - 1)^2 on interpolates; StyleGAN2's path
 * length) need the gradient of a function of g with respect to the
 * parameters: a double backward. The engine does it reverse-over-reverse,
 * layer by layer (docs/nn.md "Double backward"):
 *
 *   gf_net_forward(net, x, labels, GF_TRAIN);
 *   gf_net_backward(net, seed, GF_NEED_DX);     g = dx of <seed, y>
 *   ...P(g) and t = dP/dg (same shape as x)...
 *   gf_net_backward2(net, t, NULL, GF_NEED_DW);  dP/dw into the grads block
 *
 * The seed must not depend on the parameters (ones for R1 and WGAN-GP,
 * noise for the path length). */

/* Adds (GF_ACCUMULATE) or writes the gradient of P with respect to every
 * parameter into the grads block (GF_NEED_DW), given t = dP/dg (device,
 * the input's shape at the last batch, not retained), where g is the input
 * gradient of the last gf_net_backward (or its gradients at the penalty
 * points, below), which must have had GF_NEED_DX and
 * followed the last forward. The pass runs from the input to the output
 * (each layer's backward2: the tangent of its output, its parameter terms,
 * the second-order terms on its input), then an ordinary backward of those
 * terms; dy (may be NULL), an output gradient for the same forward (the
 * loss's), is back-propagated in that same walk, so that a step whose loss
 * and penalty share a forward pays for one backward of the weights, not
 * two. With GF_NEED_DX the input gradient (gf_net_dx) receives dP/dx plus
 * dy's input gradient. The gradient hook is called as in gf_net_backward.
 * The first call allocates the tangents (one more activation-sized
 * buffer). Overwrites the node gradients the first backward left (the
 * input gradient g included: use it before). GF_EPARAM without a kept
 * input gradient; GF_EUNSUPPORTED (see gf_net_check_backward2). */
int gf_net_backward2(gf_net *net, const float *t, const float *dy, unsigned flags);

/* 0 when every layer between the input and the output has a double
 * backward, else GF_EUNSUPPORTED naming the first that has none ("layer 7
 * (attention): has no double backward ..."): the check a stage makes when
 * a penalty is asked for. */
int gf_net_check_backward2(const gf_net *net);

/* Penalty points: a layer table's penalty_at = { "name", ... } (at most
 * GF_NET_MAX_POINTS layers with flat outputs) moves the gradient the
 * penalties take from the input to those layers' outputs: g is then the
 * gradients of the last gf_net_backward (GF_NEED_DX) at those outputs
 * (gf_net_point_grad), t holds one block (B, numel_k) per point, back to
 * back in penalty_at's order, and gf_net_backward2's pass starts at the
 * points (only the layers after them need a double backward); its final
 * walk still runs through the layers before them (StyleGAN2's path length
 * on the ws: the mapping's parameters get dP/dws through an ordinary
 * backward). gf_net_penalty_points: how many (0: the input). */
#define GF_NET_MAX_POINTS 64
int gf_net_penalty_points(const gf_net *net);
size_t gf_net_point_numel(const gf_net *net, int i);   /* point i's features per sample (0: no such point) */

/* The gradient at point i (0-based) from the last backward with GF_NEED_DX
 * (owned by the net, valid until the next backward or double backward). */
int gf_net_point_grad(const gf_net *net, int i, gf_tensor *g);

/* Gradient-ready hook: during a gf_net_backward with GF_NEED_DW, called on
 * the calling thread each time a layer's weight gradients are final, with
 * the range [offset, offset + count) of the grads block (floats) that is
 * now complete (the layer's weight and bias). Layers are visited in
 * reverse table order and laid out in table order, so the ranges arrive
 * contiguous and descending, from the end of the block to offset 0. A
 * non-zero return stops the backward, which returns that code. On a device
 * backend the values may still be in flight on its stream when the hook
 * runs (sync the backend before handing them to another engine). The data
 * parallel exchange starts all-reducing buckets from here while the
 * backward goes on. fn = NULL removes the hook. */
typedef int (*gf_grad_hook)(void *ud, size_t offset, size_t count);
void gf_net_set_grad_hook(gf_net *net, gf_grad_hook fn, void *ud);

/* ---- flat blocks and views ---- */

typedef enum {
	GF_PARAMS = 0,  /* learnable parameters */
	GF_GRADS,       /* their gradients, same layout (views of GF_PARAMS apply) */
	GF_BUFFERS      /* running statistics, not learned */
} gf_block;

/* A named slice of a flat block: "3.weight" is the weight of the layer at
 * table position 3 (0-based, PyTorch Sequential style) or of the layer
 * named in its `name` key ("features.weight"). */
typedef struct gf_view {
	const char *name;
	size_t offset;          /* in floats from the start of the block */
	size_t numel;
	int ndim;
	int64_t shape[GF_MAX_DIMS];
} gf_view;

/* The block (device memory owned by the net, valid for its life) and its
 * length in floats. */
float *gf_net_block(gf_net *net, gf_block b, size_t *n);

/* The views of a block (GF_GRADS returns those of GF_PARAMS), owned by the
 * net. */
const gf_view *gf_net_views(const gf_net *net, gf_block b, size_t *n);

/* Copies a whole block to or from host memory of gf_net_block's length. */
int gf_net_read(gf_net *net, gf_block b, float *host);
int gf_net_write(gf_net *net, gf_block b, const float *host);

/* Copies block b from src into dst (same backend, same layer table):
 * refreshing the D replica of a G step. GF_ESHAPE if the blocks differ. */
int gf_net_copy(gf_net *dst, const gf_net *src, gf_block b);

/* Zeroes the grads block. */
int gf_net_zero_grad(gf_net *net);

/* Multiply-add counts of a forward (flags 0) or a backward (GF_NEED_DX /
 * GF_NEED_DW) at the given batch, as FLOPs (2 per multiply-add) of the
 * convolutions and linear layers: *model as the table defines them (what
 * PyTorch computes), *exec as this engine executes them after fusions.
 * Either pointer may be NULL. */
void gf_net_flops(const gf_net *net, int batch, unsigned flags, double *model, double *exec);

/* The FLOPs this network has run since it was built, counted as each pass
 * runs, in gf_net_flops's convention (a layer kind's forward count per
 * forward; that count again per input gradient and per weight gradient a
 * backward computes; per output tangent and per weight term of a double
 * backward), plus the orthogonal regularisation's GEMMs and an
 * optimiser's update (gf_optim_step: its arithmetic per parameter). A
 * captured step's replay runs the same host code, so it counts too. The
 * difference of two readings is what the calls between them queued: how
 * the step stages report their FLOPs (gf_trainer). Either pointer may be
 * NULL. */
void gf_net_flops_done(const gf_net *net, double *model, double *exec);

/* One line per layer ("3 conv 128->128 k3 s1 p1 (64,128,16,16) fused:up2")
 * into buf (snprintf rule). */
int gf_net_summary(const gf_net *net, char *buf, size_t size);

/* ---- losses ---- */

/* Parses "bce", "bce_logits", "nonsat", "nonsat_logits", "hinge_d",
 * "hinge_g", "ls", "l1", "ce", "wgan". Returns 0 or GF_EPARAM. */
int gf_loss_parse(const char *name, gf_loss_kind *kind);
const char *gf_loss_name(gf_loss_kind kind);

/* Mean loss of pred (n, ...) times scale into *loss (host, may be NULL)
 * and its gradient (times scale) into dx (device, pred's size, may be
 * NULL, overwritten). Targets: target (pred's shape, f32) or, when NULL,
 * the constant target_value (1 real, 0 fake; +1/-1 for hinge_d); for "ce"
 * target is the (n) i32 labels and pred holds logits (n, classes).
 * Formulas as PyTorch: bce = -mean(t log p + (1-t) log(1-p)) with logs
 * clamped at -100; bce_logits = mean(max(x,0) - x t + log(1 + e^-|x|));
 * nonsat = -mean log p (bce with t = 1); nonsat_logits = mean softplus(-x);
 * hinge_d = mean relu(1 - t x); hinge_g = -mean x; ls = mean (x - t)^2;
 * l1 = mean |x - t|; ce = mean(-log softmax(x)[label]); wgan = -mean t x
 * (t = +1 for real samples and for G, -1 for fakes: the critic's
 * mean D(fake) - mean D(real) over the two calls). Returns 0,
 * GF_EPARAM for a bce input outside [0, 1] or a label out of range,
 * GF_ENONFINITE for a NaN bce input; other losses pass NaN through to
 * *loss, which the caller checks. */
int gf_loss(gf_backend *be, gf_loss_kind kind, float *loss, float *dx, const gf_tensor *pred,
            const gf_tensor *target, float target_value, float scale);

/* gf_loss with the mean loss left in the backend's memory: *loss_dev is a
 * float there (device memory on a GPU), written by the backend's loss_dev
 * op without waiting for the device, so it may run inside a graph step;
 * read it later. A host backend reports input errors (bce on NaN) at
 * once; a GPU backend records them for its next sync and writes NaN to
 * *loss_dev. GF_EUNSUPPORTED for a backend without loss_dev. */
int gf_loss_dev(gf_backend *be, gf_loss_kind kind, float *loss_dev, float *dx, const gf_tensor *pred,
                const gf_tensor *target, float target_value, float scale);

/* ---- optimisers ---- */

typedef struct gf_optim gf_optim;

typedef struct gf_optim_conf {
	gf_optim_kind kind;
	float lr;
	float beta1, beta2, eps;   /* adam, oadam */
	float weight_decay;
	int decoupled;             /* adam: AdamW-style decay */
	float momentum, dampening; /* sgd */
	int nesterov;
} gf_optim_conf;

/* PyTorch's defaults for kind (adam: lr 1e-3, betas 0.9/0.999, eps 1e-8;
 * sgd: lr 1e-2, no momentum). */
void gf_optim_defaults(gf_optim_conf *c, gf_optim_kind kind);

/* Reads {"adam", lr = 2e-4, betas = {0.5, 0.999}, eps = 1e-8,
 * weight_decay = 0, decoupled = false} / {"sgd", lr =, momentum =,
 * dampening =, nesterov =, weight_decay =} / {"oadam", ...like adam}
 * (the kind may also be given as kind = "adam"). Unknown keys are
 * GF_EPARAM naming the key. */
int gf_optim_conf_parse(gf_optim_conf *c, const gf_value *v);

/* Creates an optimiser over net's params/grads blocks with its state in
 * one flat block of the backend (zeroed; views "m.<param>", "v.<param>",
 * "g_prev.<param>", "momentum.<param>"). Adam, SGD as torch.optim;
 * optimistic Adam feeds 2 g_t - g_{t-1} (g_0 = 0) to Adam's moments and
 * step (the optimistic gradient of DPOSG). Release with gf_optim_destroy
 * before the net. */
int gf_optim_create(gf_optim **out, gf_net *net, const gf_optim_conf *c);
void gf_optim_destroy(gf_optim *o);

/* An optimiser over the range [offset, offset + count) of the blocks only
 * (ZeRO-1: each data-parallel rank updates its shard): its state holds
 * slots x count values ((slots, count): Adam m then v...), and
 * gf_optim_step updates only that range of the parameters from the same
 * range of the gradients. A range optimiser has no views
 * (gf_optim_views gives 0): checkpoints save a full optimiser. GF_EPARAM
 * when the range is outside the network's block. */
int gf_optim_create_range(gf_optim **out, gf_net *net, const gf_optim_conf *c, size_t offset, size_t count);

/* The range an optimiser updates (a full one: 0 and the parameter count)
 * and its number of state slots (Adam 2, optimistic Adam 3, SGD 1). */
void gf_optim_range(const gf_optim *o, size_t *offset, size_t *count);
int gf_optim_slots(const gf_optim *o);

/* One update from the net's grads block. */
int gf_optim_step(gf_optim *o);

/* Updates so far; settable (checkpoint restore). */
int64_t gf_optim_steps(const gf_optim *o);
void gf_optim_set_steps(gf_optim *o, int64_t steps);
void gf_optim_set_lr(gf_optim *o, float lr);
/* Adam's beta2 from the next update on (a schedule's; the bias correction
 * 1 - beta2^t takes the new value, as torch.optim.Adam does). */
void gf_optim_set_beta2(gf_optim *o, float beta2);
const gf_optim_conf *gf_optim_config(const gf_optim *o);

/* State block (device memory owned by o) and its views. */
float *gf_optim_state(gf_optim *o, size_t *n);
const gf_view *gf_optim_views(const gf_optim *o, size_t *n);

/* Clips the grads block to global L2 norm max_norm (torch's
 * clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is < 1).
 * *norm (may be NULL) receives the norm before clipping. The sum is in
 * double, in a fixed order. GF_ENONFINITE when the norm is NaN or Inf
 * (gradients left untouched). max_norm <= 0 only measures. */
int gf_net_clip_grad_norm(gf_net *net, float max_norm, float *norm);

/* Adds the gradient of BigGAN's orthogonal regularisation to the grads
 * block: for every parameter of two or more dimensions W (viewed as
 * (shape[0], rest)), except those of the layers named in skip (comma
 * separated layer names as in view names, "0" or "shared"; NULL = none),
 * dW += 2 beta (W W^T (.) (1 - I)) W, the gradient BigGAN-PyTorch adds for
 * beta ||W W^T (.) (1 - I)||^2 (so its beta = 1e-4 means the same).
 * Biases, gains and other 1-D parameters are left alone. beta = 0 does
 * nothing. Returns 0 or an error naming the parameter. */
int gf_net_ortho_grad(gf_net *net, float beta, const char *skip);

/* One power iteration of every spectral norm of the network on its
 * current weight, updating the buffers u and v in place (what a training
 * forward does before it uses the weight), without running the network.
 * For a network whose weights were set from outside, a moving average
 * (g_step's ema): the average of unit vectors that turned during training
 * is neither a unit vector nor the average weight's singular direction,
 * and eval-mode sigma = u^T W v of such vectors undershoots. A no-op
 * without spectral norm. */
int gf_net_sn_iterate(gf_net *net);

/* ---- checkpoints ---- */

/* One network (and optionally its optimiser) in a checkpoint: tensors are
 * named "<prefix>.<view name>" for params and buffers ("G.0.weight",
 * "G.2.running_mean"), "<prefix>.opt.<view>" for optimiser state
 * ("G.opt.m.0.weight") plus "<prefix>.opt.step" (i64 [1]), and
 * "<prefix>.rng" (i64 [3]: the net's generator). */
typedef struct gf_ckpt_part {
	const char *prefix;
	gf_net *net;
	gf_optim *opt;   /* may be NULL */
} gf_ckpt_part;

/* The named host tensors a set of parts contributes to a checkpoint (the
 * entries gf_ckpt_save writes for them, without "step" and "rng"), for a
 * caller that merges them with its own tensors (gf_st_encode, gf_st_write).
 * The entries, their names and data are owned by the struct until
 * gf_ckpt_entries_free. */
typedef struct gf_ckpt_entries {
	gf_st_entry *e;   /* (n) */
	size_t n;
	void *priv;       /* the host copies and names */
} gf_ckpt_entries;

int gf_ckpt_collect(const gf_ckpt_part *parts, int nparts, gf_ckpt_entries *out);
void gf_ckpt_entries_free(gf_ckpt_entries *ce);

/* Writes parts, "step" (i64 [1]) and "rng" (i64 [3]: seed, stream, offset;
 * skipped when rng is NULL) to path atomically (gf_st_write), metadata
 * "format" = "ganflow-nn-1" plus meta (key, value, ..., NULL; may be NULL). */
int gf_ckpt_save(const char *path, const gf_ckpt_part *parts, int nparts, int64_t step,
                 const gf_rng *rng, const char *const *meta);

/* Restores what gf_ckpt_save wrote. Every expected tensor must exist with
 * the exact shape: the first one missing or different is GF_ENOTFOUND /
 * GF_ESHAPE naming it, and nothing is modified unless all check out.
 * step and rng may be NULL. */
int gf_ckpt_load(const char *path, const gf_ckpt_part *parts, int nparts, int64_t *step, gf_rng *rng);

#ifdef __cplusplus
}
#endif
#endif
