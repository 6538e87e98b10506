/* ganflow training: the trainer every step stage is built on, and what the
 * training stages (g_step, d_step, classifier_step, sample_grid, evaluator,
 * checkpoint) share.
 *
 *  - the trainer (gf_trainer): one network a step stage trains, with its
 *    backend, optimiser, update step (learning-rate warm-up, clipping, the
 *    gradient exchange of data-parallel runs), its part of checkpoints and
 *    its resume; a step stage is then its ports, its parameters and its
 *    run loop;
 *  - the GAN losses by role (gf_gan_loss_parse);
 *  - opening the compute backend a stage asked for (or the run's);
 *  - weights messages: a network's parameter and buffer blocks in a
 *    message, so D's weights can flow to G's replica, G's to the sample
 *    grid and the evaluator;
 *  - state messages: a stage's part of a checkpoint (networks, optimiser
 *    state, counters, generator states, reader positions) encoded as one
 *    safetensors image in a u8 tensor, which the checkpoint stage merges
 *    with the other parts into one file;
 *  - restoring a stage's part from a checkpoint file on resume.
 *
 * Naming in checkpoints: every stage prefixes its tensors with its instance
 * name: "g.net.0.weight", "g.net.opt.m.0.weight", "g.net.opt.step",
 * "g.net.rng" (the scheme of gf_ckpt_part with prefix "g.net"), plus its
 * own counters ("g.step", "g.rng"). Metadata keys are prefixed the same
 * way ("g.role" = "generator", "g.table" = the network's layer table as
 * JSON, so `ganflow sample` can rebuild the network; <ganflow/ckpt.h>
 * describes the whole layout).
 *
 * Threads: a trainer is created in a stage's create() and used from its
 * run() and flush(), one thread at a time.
 */
#ifndef GANFLOW_TRAIN_H
#define GANFLOW_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include <ganflow/nn.h>
#include <ganflow/stage.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- backends ---- */

/* The parameters gf_train_backend reads, for a stage's parameter table:
 *   static const gf_param_desc params[] = { ..., GF_TRAIN_BACKEND_PARAMS }; */
#define GF_TRAIN_BACKEND_PARAMS                                                                             \
	{ "backend", GF_PARAM_STR, "", "cpu, cuda or auto (default: the run's backend)", NULL },                  \
	{ "threads", GF_PARAM_INT, "0", "compute threads (default: the run's threads setting)", "0.." },          \
	{ "precision", GF_PARAM_STR, "fp32", "fp32; tf32 (TF32 tensor-core convolutions and GEMMs, cuda; fp32 on "  \
	  "the cpu); bf16 / fp16 mixed precision with f32 master weights (cuda)", "fp32|tf32|bf16|fp16" },        \
	{ "layout", GF_PARAM_STR, "auto", "activation layout on the GPU: auto, nchw or nhwc (cuda)", "auto|nchw|nhwc" }

/* The orthogonal regularisation parameters gf_trainer_create reads, for a
 * step stage's parameter table (g_step, d_step). */
#define GF_TRAIN_ORTHO_PARAMS                                                                              \
	{ "ortho", GF_PARAM_NUM, "0", "orthogonal regularisation beta (BigGAN: 1e-4 in G); its gradient "         \
	                              "2 beta (W W^T (.) (1 - I)) W goes to every parameter of 2+ dimensions", "0.." }, \
	{ "ortho_skip", GF_PARAM_STR, "", "layers (names or positions, comma separated) ortho leaves alone, "      \
	                                 "e.g. \"shared\"", NULL }
/* Opens the compute backend a stage's parameters ask for: "backend"
 * ("cpu", "cuda", "auto"; "" = the run's backend, itself "auto" by
 * default), "threads" (0 = the run's threads setting, else all cores),
 * and, when the stage declares them, "precision" (fp32, bf16, fp16) and
 * "layout" (auto, nchw, nhwc). On failure the message is set on ctx
 * (gf_fail) and the error returned. */
int gf_train_backend(gf_ctx *ctx, const gf_value *params, gf_backend **out);

/* A second instance of the backend gf_train_backend opens for the same
 * parameters, with one thread: its own stream on a GPU, for copies that
 * overlap the step (d_step's real batches). Errors are set on ctx. */
int gf_train_copy_backend(gf_ctx *ctx, const gf_value *params, gf_backend **out);

/* 1 when be runs its ops asynchronously and has what the step stages use
 * to keep the host off the device's path: events, asynchronous copies,
 * pinned and device memory, results left on the device (a GPU backend, or
 * the CPU backend under GANFLOW_CPU_DEVICE_CHECK=1). 0: a host backend,
 * whose results are there when an op returns. */
int gf_train_async(const gf_backend *be);

/* Builds and initialises a network from a layer table for batch max_batch:
 * gf_net_create + gf_net_init with a generator (seed, stream). what names
 * the network in errors ("G", "D replica"). Errors are set on ctx. */
int gf_train_net(gf_ctx *ctx, gf_backend *be, const gf_value *table, int max_batch, const char *what,
                 uint64_t seed, uint64_t stream, gf_net **out);

/* Stable 64-bit stream id for a stage instance and a purpose, so every
 * stage draws from its own generator under the run's seed:
 * FNV-1a of "<instance>/<purpose>". */
uint64_t gf_train_stream(gf_ctx *ctx, const char *purpose);

/* ---- the trainer ---- */

typedef struct gf_trainer gf_trainer;
typedef struct gf_state gf_state; /* a checkpoint part (below) */

/* ---- schedules: options that follow the images seen ---- */

/* R3GAN's cosine_decay_with_warmup (Huang et al. 2024): from `from` to
 * `to` along half a cosine over `total` images, after a linear warm-up from
 * `warmup_from` over `warmup` images and a hold of `from` over `hold`
 * images (both optional), `to` past `total`. A pipeline writes one as
 * gf.cosine{ from =, to =, kimg =, warmup_from =, warmup_kimg =, hold_kimg =
 * } in a step stage's `schedule` table (docs/train.md "Schedules"). */
typedef struct gf_schedule {
	int on;
	double from, to, total, warmup_from, warmup, hold;
} gf_schedule;

/* Parses a schedule table v for option `what` (named in errors). Returns
 * 0, or GF_EPARAM with the key at fault in gf_errmsg(). */
int gf_schedule_parse(const gf_value *v, const char *what, gf_schedule *out);
/* Its value after nimg images. */
double gf_schedule_at(const gf_schedule *s, double nimg);

/* The options a step stage schedules itself, besides the lr, beta2 and
 * ema_kimg that every trainer applies (gf_trainer_conf.schedules):
 * d_step's weights r1, r2, gp, lecam (in this order: d_step indexes its
 * fields so) and ADA's p; g_step's path-length weight. NULL-ended. */
extern const char *const gf_train_d_schedules[];
extern const char *const gf_train_g_schedules[];
/* 1 when a metrics scalar is a scheduled option's value as a trainer names
 * it (gf_trainer_metrics: "<option>_<tag>", lr_d, r1_d...): a setting at a
 * step, which the metrics stage reports as its latest value, not a mean. */
int gf_train_schedule_metric(const char *name);

/* The parameter of a step stage's table that holds its schedules. */
#define GF_TRAIN_SCHEDULE_PARAMS                                                                              \
	{ "schedule", GF_PARAM_TABLE, "nil", "options that follow the images seen, e.g. { lr = gf.cosine{ from = "  \
	  "2e-4, to = 5e-5, kimg = 20000 }, beta2 = ... } (docs/train.md \"Schedules\")", NULL }

/* What a step stage tells gf_trainer_create besides its parameters. */
typedef struct gf_trainer_conf {
	const char *what;   /* the network in messages: "G", "D", "classifier" */
	const char *tag;    /* suffix of its metrics: "g" -> comm_wait_g */
	const char *role;   /* "<instance>.role" in checkpoints: generator, discriminator, classifier */
	const char *unit;   /* one update in messages: "step", "iteration" */
	int max_batch;      /* largest batch the network will see */
	int net_batch;      /* the network's batch when it runs on more at once (a pair batch of
	                     * reals and fakes: 2 max_batch); 0 = max_batch */
	gf_optim_conf opt;  /* the optimiser when parameter "opt" is left out; the
	                     * defaults of the fields a given "opt" table omits */
	int grads_port;     /* output port of kind "grads" to an exchange, -1 = none */
	int reduced_port;   /* its input port of the exchange's answer, -1 = none */
	int state_port;     /* output port of checkpoint parts, -1 = none */
	int cls;            /* the class of a per-class pair, -1 otherwise */
	int images;         /* images per update counter step, for schedules (0: max_batch) */
	const char *const *schedules; /* the stage's own schedulable options (NULL-terminated), besides the
	                     * trainer's lr, beta2 and ema_kimg */
	int reg_every;      /* lazy regularisation (StyleGAN2): a penalty's own update every this
	                     * many updates, and the optimiser adjusted to it (gf_penalty_adam_ratio);
	                     * 0 or 1: none */
} gf_trainer_conf;

/* Builds the trainer of a step stage (its create()): the backend the
 * parameters ask for (gf_train_backend), the network from parameter "net"
 * (initialised from the run's seed and the stage's "init" stream), its
 * optimiser (parameter "opt", else conf->opt), the learning-rate warm-up,
 * clipping and orthogonal regularisation of parameters "lr_warmup",
 * "clip", "ortho" and "ortho_skip" (gf_net_ortho_grad) when the stage
 * declares them (absent: none), and the exchange client of conf's ports.
 * conf is copied; its strings must outlive the trainer (literals). On
 * failure *out may hold a partly built trainer (gf_trainer_destroy frees
 * it) and the message is set on ctx (gf_fail). */
int gf_trainer_create(gf_trainer **out, gf_ctx *ctx, const gf_value *params, const gf_trainer_conf *conf);
void gf_trainer_destroy(gf_trainer *t);

/* The network, its backend and its optimiser: owned by the trainer, valid
 * until gf_trainer_destroy (the optimiser until the next gf_trainer_start,
 * which may replace it for ZeRO-1). */
gf_net *gf_trainer_net(const gf_trainer *t);
gf_backend *gf_trainer_backend(const gf_trainer *t);

/* FLOPs and MFU: gf_trainer_create reports its backend's peak FLOP/s to
 * the runtime (gf_report_peak: the peak_flops op, measured once on the
 * CPU), and every update (gf_trainer_update, _update_dev) reports the
 * FLOPs its network ran since the last (gf_report_flops of
 * gf_net_flops_done's difference: forwards, backwards, double backwards,
 * the orthogonal regularisation and the update; docs/train.md "FLOPs and
 * MFU"). count_net adds a network the stage also runs in its steps
 * (g_step's replica of D); it must live until the trainer's last update.
 * Up to 3; returns 0 or GF_EFAIL set on ctx. */
int gf_trainer_count_net(gf_trainer *t, gf_net *net);
gf_optim *gf_trainer_optim(const gf_trainer *t);

/* The network's layer table as JSON (what checkpoints record as
 * "<instance>.table", <ganflow/ckpt.h>); owned by the trainer. */
const char *gf_trainer_table(const gf_trainer *t);

/* On a resumed run, restores the network, its optimiser and the step
 * counter "<instance>.step" into *step (gf_train_resume), and remembers
 * that the part of that step is already saved. Does nothing otherwise.
 * Errors are set on ctx. */
int gf_trainer_resume(gf_trainer *t, int64_t *step);

/* Checks a batch message against the network (a stage's first batch):
 * t[0] f32 of the network's input shape but for the batch dimension,
 * which must not exceed conf.max_batch, and labels in t[1] (i32) when
 * `labels` is set or the network is conditional. `what` names the batches
 * ("real batches"). Returns 0 or GF_EFAIL with a message naming both
 * shapes and what to change. */
int gf_trainer_check_batch(gf_trainer *t, const gf_msg *m, const char *what, int labels);

/* Start of run(): the handshake with the exchange stage, if connected.
 * Returns 0, GF_ESTOP or an error set on ctx. */
int gf_trainer_start(gf_trainer *t);

/* 1 when gradients go through an exchange stage (any mode but none). */
int gf_trainer_exchanging(const gf_trainer *t);

/* 1 when this rank should draw its slice of a world-sized noise draw
 * (gf_dist_normal_slice): data parallel with more than one rank. */
int gf_trainer_sliced(const gf_trainer *t);

/* Right before the LAST backward with GF_NEED_DW of an update, when the
 * update follows in the same graph step: lets gradient buckets be
 * all-reduced while that backward goes on (without it the update
 * all-reduces the whole block). */
void gf_trainer_arm(gf_trainer *t, int64_t step);

/* The update of step `step` (0-based) once its gradients are in the
 * network: the exchange's reduction, the orthogonal regularisation's
 * gradient (parameter "ortho"), the warm-up learning rate
 * lr * min(1, (step + 1) / lr_warmup), clipping, the optimiser step (and
 * the gossip or all-gather after it). *norm (may be NULL) receives the
 * gradient norm before clipping. Returns 0, GF_ESTOP, or GF_EFAIL with the
 * message set on ctx (a non-finite gradient names the network and step:
 * "step 30: a gradient of network D is non-finite; ..."). */
int gf_trainer_update(gf_trainer *t, int64_t step, float *norm);

/* ---- the update without the host (graph steps, docs/cuda.md) ---- */

/* 1 when gf_trainer_update_dev can do this trainer's update: no orthogonal
 * regularisation under fp16 (its weight follows the device's loss scale).
 * Clipping stays on the device (the backend's clip_dev scales by the norm
 * reduce_dev left there), and a data-parallel exchange is no obstacle: its
 * collectives are backend ops (docs/dist.md). */
int gf_trainer_update_on_device(const gf_trainer *t);

/* The update of step `step` (0-based) with device ops only: the
 * exchange's reduction, the learning rate (warm-up, schedule), the
 * orthogonal regularisation's gradient, the gradient block's sum of
 * squares into *sumsq (a double in the backend's memory, read after the
 * step: gf_trainer_check_norm; ZeRO-1: the shards' sums summed across
 * ranks), clipping by it, the optimiser step, the exchange's all-gather or
 * gossip, and the EMA. Nothing in it waits for the host, so it may run inside a graph
 * step. Returns 0, GF_EUNSUPPORTED when gf_trainer_update_on_device is 0
 * (nothing done), or an error set on ctx. The same values as
 * gf_trainer_update, which measures the norm on the host. */
int gf_trainer_update_dev(gf_trainer *t, int64_t step, double *sumsq);

/* What changes the op sequence of the update of step `step` (the EMA's
 * plain-copy phase before ema_start): part of a graph step's key. */
uint64_t gf_trainer_update_key(const gf_trainer *t, int64_t step);

/* Checks of a step's results once they are on the host, which on a GPU is
 * after later steps were queued ("detected at the next read"): a
 * non-finite loss fails the stage as gf_trainer_loss does, naming the
 * step it belongs to; check_norm turns the update's sum of squares into
 * the norm (*norm) and fails for a non-finite one ("step 30: a gradient of
 * network G is non-finite") unless the backend trains in fp16, where the
 * optimiser skipped that update and lowered the loss scale. */
int gf_trainer_check_loss(gf_trainer *t, int64_t step, double loss);
int gf_trainer_check_norm(gf_trainer *t, int64_t step, double sumsq, float *norm);

/* The precision the trainer's backend was opened with. */
gf_precision gf_trainer_precision(const gf_trainer *t);

/* Loss of kind on pred, the network's output or another network's (G's
 * loss on D's output), with its gradient times scale into dpred (device
 * memory of pred's size): gf_loss. A non-finite loss fails naming the
 * network and step: "iteration 30: the D loss is nan (non-finite) in
 * network D; the last good checkpoint is kept". Returns 0 or GF_EFAIL (set
 * on ctx). */
int gf_trainer_loss(gf_trainer *t, int64_t step, gf_loss_kind kind, const gf_tensor *pred,
                    const gf_tensor *labels, float target, float scale, float *dpred, float *loss);

/* gf_trainer_loss with the loss left in the backend's memory (gf_loss_dev:
 * *loss_dev, a device float, read after the step and checked there with
 * gf_trainer_check_loss). Usable inside a graph step. Errors the backend
 * reports at once (a bce input that is NaN, on a host backend) fail as
 * gf_trainer_loss's do. */
int gf_trainer_loss_dev(gf_trainer *t, int64_t step, gf_loss_kind kind, const gf_tensor *pred,
                        const gf_tensor *labels, float target, float scale, float *dpred, float *loss_dev);

/* A weights message of the network (gf_weights_pack) taken from output
 * port `port`, with version, step = version and label = the pair's class:
 * the caller adds scalars if it wants and pushes it (gf_push). Returns 0,
 * GF_ESTOP, or an error set on ctx. */
int gf_trainer_weights(gf_trainer *t, int port, int64_t version, gf_msg **out);

/* A metrics message from output port `port` with step and source set, or
 * *out = NULL when the port is not connected (nothing to do). With an
 * exchange, it carries "comm_wait_<tag>" and "comm_busy_<tag>" (seconds
 * of the last update spent waiting for, and in, communication). Returns 0,
 * GF_ESTOP or an error. */
int gf_trainer_metrics(gf_trainer *t, int port, int64_t step, gf_msg **out);

/* The schedule of option `name` (parameter `schedule`), or NULL when it
 * has none. The trainer applies lr, beta2 and ema_kimg itself at every
 * update; the stage the others it declared (conf.schedules), with the
 * value at gf_trainer_images(t, step). Every scheduled value goes to the
 * metrics as "<name>_<tag>" (lr_d, r1_d, ...). */
const gf_schedule *gf_trainer_schedule(const gf_trainer *t, const char *name);
/* Refuses a schedule of option `name` that the stage's plain parameter left
 * off (on = 0: r1 = 0, no ada layer...), a schedule that would move nothing:
 * 0, or an error on the trainer's context that names the option. */
int gf_trainer_schedule_on(const gf_trainer *t, const char *name, int on);
/* The images the network has seen before update `step`: step x conf.images. */
double gf_trainer_images(const gf_trainer *t, int64_t step);

/* Begins the trainer's checkpoint part of step `step`: *s receives the
 * state, holding the network and optimiser under "<instance>.net", the
 * step counter "<instance>.step" and the description (gf_state_describe),
 * to which the stage adds its own entries before gf_trainer_state_push;
 * *s = NULL when there is nothing to push (state port unconnected, or the
 * part of this step already pushed). ZeRO-1 gathers the optimiser shards:
 * COLLECTIVE, every rank calls it at the same steps, also a rank that
 * saves nothing. Returns 0, GF_ESTOP or an error set on ctx. */
int gf_trainer_state_begin(gf_trainer *t, int64_t step, gf_state **s);

/* Pushes the part begun by gf_trainer_state_begin, filed under step
 * `filed` (the run step whose checkpoint it joins). rc is the result of
 * adding the stage's own entries: non-zero drops the part and reports
 * "checkpoint state: ...". Returns 0, GF_ESTOP, or an error set on ctx. */
int gf_trainer_state_push(gf_trainer *t, int rc, int64_t filed);

/* Forgets that the current step's part was pushed, so the next
 * gf_trainer_state_begin of that step builds it again (a stage that has
 * new entries for it, such as a final test accuracy). */
void gf_trainer_state_renew(gf_trainer *t);

/* ---- captured steps (CUDA graphs, docs/cuda.md) ---- */

typedef struct gf_stepgraph gf_stepgraph;

/* The captured steps of one stage. A step is bracketed by
 * gf_stepgraph_begin / gf_stepgraph_end around the same code eagerly or
 * not; its key names what makes two steps' op sequences differ (batch
 * sizes, which micro-batch, the EMA's phase). The first step of a key
 * runs eagerly (a warm-up: cuDNN times its algorithms there, and a short
 * last batch never costs a capture), the second is captured into a graph
 * (graph_begin / graph_end, <ganflow/backend.h>) and later ones replay it.
 * Up to 8 keys keep their graphs; a ninth replaces the least recently
 * used. With enabled = 0 (parameter graphs = false), or a backend without
 * graph_begin, every step runs eagerly. `what` names the step in errors
 * ("D step"), and must outlive the object. */
int gf_stepgraph_create(gf_stepgraph **out, gf_backend *be, int enabled, const char *what);
void gf_stepgraph_destroy(gf_stepgraph *g);

/* 1 when steps may be captured (enabled and the backend has graphs). */
int gf_stepgraph_enabled(const gf_stepgraph *g);

/* Begins a step of kind key; eager = 1 runs it eagerly whatever the key
 * (a feature that needs the host in the step). Returns 0 or graph_begin's
 * error. */
int gf_stepgraph_begin(gf_stepgraph *g, uint64_t key, int eager);

/* Ends the step begun; rc is the result of its ops (non-zero: the graph
 * of the key is dropped). Always call it after gf_stepgraph_begin.
 * Returns rc, or graph_end's error with gf_errmsg() set: a replay whose
 * ops differ from the captured ones did not run (a stage bug the message
 * names), an op that needs the host was refused. */
int gf_stepgraph_end(gf_stepgraph *g, int rc);

/* Steps run eagerly, captured, and replayed so far. */
void gf_stepgraph_counts(const gf_stepgraph *g, int64_t *eager, int64_t *captured, int64_t *replayed);
/* Of the eager steps, those that were not a key's warm-up: asked to run
 * eagerly (a feature that needs the host), or graphs off. */
int64_t gf_stepgraph_forced(const gf_stepgraph *g);

/* ---- step results read after the step (docs/cuda.md) ---- */

typedef struct gf_readback gf_readback;

/* The values a step leaves in the backend's memory (losses from loss_dev,
 * sums from reduce_dev: nvals slots of 8 bytes, a float in the first 4
 * bytes of its slot) and the time the step took. On a backend with events
 * (gf_train_async) each gf_readback_push queues a copy of the slots into
 * pinned host memory behind an event, and only gf_readback_take waits,
 * for that entry; on a host backend the values are there at once.
 * depth: entries that may be in flight (>= 1). */
int gf_readback_create(gf_readback **out, gf_backend *be, int nvals, int depth);
void gf_readback_destroy(gf_readback *r);

/* The slots the step's ops write (fixed for the object's life, so a
 * graph step's buffers stay the same). */
double *gf_readback_slots(gf_readback *r);

/* The step's device work begins (timing starts here). */
int gf_readback_begin(gf_readback *r);

/* The step's work is queued: its slots become entry `tag`. GF_EPARAM when
 * depth entries are in flight (take one first). */
int gf_readback_push(gf_readback *r, int64_t tag);

/* Entries pushed and not taken. */
int gf_readback_count(const gf_readback *r);

/* Takes the oldest entry, waiting until its values are on the host:
 * *tag, *vals (nvals values, valid until the next push), *busy: seconds
 * the step kept the device busy (between timed events recorded at begin
 * and push; on a host backend, the host seconds between them). */
int gf_readback_take(gf_readback *r, int64_t *tag, const double **vals, double *busy);

/* 1 when values reach the host after later steps were queued (a backend
 * with events); 0 when they are there at push. */
int gf_readback_deferred(const gf_readback *r);

/* 1 when *busy is timed on the device (events), 0 on the host. */
int gf_readback_device_timed(const gf_readback *r);

/* ---- the step driver: the captured-step protocol of every step stage ---- */

/* One driver per step stage (d_step, g_step, classifier_step) runs the
 * protocol of docs/cuda.md ("Step stages") so that the stage says only
 * what its step computes:
 *  - a step's device work is an *entry*: gf_stepdrv_begin (its device time
 *    starts), one or more gf_stepdrv_run (each a bracket: eager the first
 *    time its key is met, captured the second, replayed after; eager
 *    always when the stage or the plan says so), gf_stepdrv_push (the
 *    values its ops left in gf_stepdrv_slots are queued for the host);
 *  - entries belong to a *record*, the stage's unit of metrics (an
 *    iteration of D, a step of G): gf_stepdrv_open before its first entry,
 *    gf_stepdrv_close after its last; the stage keeps its sums in its own
 *    array of GF_STEPDRV_RECS, indexed by the record's slot;
 *  - results are read a step later: after each push the driver takes the
 *    entries beyond the lag (the entries of one record when results may
 *    stay in flight, 0 when they may not), calls the stage's fold for
 *    each, reports its busy time (gf_report_busy) and, once a closed
 *    record has all its entries, the stage's finish (its metrics);
 *    gf_stepdrv_settle(0) is a read point (a checkpoint, the end).
 * Errors are set on ctx naming the stage's unit and step ("iteration 12:
 * D step: ..."). */
typedef struct gf_stepdrv gf_stepdrv;

#define GF_STEPDRV_RECS 4 /* records whose results may be in flight */

/* An entry as the stage pushed it: its record's step, and what the stage
 * needs to fold its values (flags: which slots hold what; n: sizes). */
typedef struct gf_stepdrv_entry {
	int64_t step;
	unsigned flags;
	int64_t n[2];
} gf_stepdrv_entry;

typedef struct gf_stepdrv_conf {
	const char *what;       /* the step in errors and the end-of-run line: "D step" */
	const char *unit;       /* what a record is called in errors: "iteration", "step" */
	int nvals;              /* value slots a step's ops write (8 bytes each) */
	int max_lag;            /* entries whose results may be in flight, at most */
	int graphs;             /* the stage's `graphs` parameter */
	void *self;             /* passed to fold and finish */
	/* Folds one entry's values into the stage's record slot r: checks and
	 * sums. Returns 0 or an error set on ctx. */
	int (*fold)(void *self, gf_ctx *ctx, int r, const gf_stepdrv_entry *e, const double *vals);
	/* Record slot r (of step `step`) is complete: push its metrics.
	 * Returns 0, GF_ESTOP or an error set on ctx. */
	int (*finish)(void *self, gf_ctx *ctx, int r, int64_t step);
} gf_stepdrv_conf;

/* The driver of a stage on backend be (the trainer's); conf is copied
 * (its strings must outlive the driver). Returns 0 or an error (gf_errmsg). */
int gf_stepdrv_create(gf_stepdrv **out, gf_backend *be, const gf_stepdrv_conf *conf);
/* Waits for what is still in flight on the device, then frees. */
void gf_stepdrv_destroy(gf_stepdrv *d);

/* Once the stage knows (after the exchange handshake): eager = 1 when a
 * feature needs the host inside its steps (every step then runs eagerly
 * and is read at once). */
void gf_stepdrv_plan(gf_stepdrv *d, int eager);
/* 1 when results may stay in flight (a backend with events, not eager). */
int gf_stepdrv_deferred(const gf_stepdrv *d);
/* The plan's eager flag. */
int gf_stepdrv_eager(const gf_stepdrv *d);

/* Opens the record of step `step`, of `need` entries; *r receives its
 * slot (0 .. GF_STEPDRV_RECS - 1). Fails when that slot's record is still
 * in flight. */
int gf_stepdrv_open(gf_stepdrv *d, gf_ctx *ctx, int64_t step, int need, int *r);
/* Adds entries to the open record of step (a lazy penalty step decided
 * late). */
void gf_stepdrv_need(gf_stepdrv *d, int64_t step, int more);
/* Closes the record of step: finish runs once its entries are folded
 * (now, if they are). */
int gf_stepdrv_close(gf_stepdrv *d, gf_ctx *ctx, int64_t step);

/* The value slots of the step being queued (fixed for the driver's life). */
double *gf_stepdrv_slots(gf_stepdrv *d);

/* An entry begins: its device time starts here. */
int gf_stepdrv_begin(gf_stepdrv *d, gf_ctx *ctx);

/* The ops of a step, called between the brackets. Returns 0, GF_ESTOP,
 * GF_EFAIL (set on ctx) or an error (gf_errmsg). */
typedef int (*gf_stepdrv_ops)(void *self, gf_ctx *ctx, void *arg);

/* Runs ops(self, ctx, arg) as one bracketed step of kind `key` (what
 * makes two steps' op sequences differ) for record step `step`; `what`
 * names it in errors (NULL: conf's). eager = 1: eagerly whatever the key
 * (the step needs the host). */
int gf_stepdrv_run(gf_stepdrv *d, gf_ctx *ctx, int64_t step, const char *what, uint64_t key, int eager,
                   gf_stepdrv_ops ops, void *arg);

/* The entry begun is queued: its values become an entry of e->step's
 * record; then the entries beyond the lag are read and folded. */
int gf_stepdrv_push(gf_stepdrv *d, gf_ctx *ctx, const gf_stepdrv_entry *e);

/* Reads entries until at most keep are in flight (0: a read point). */
int gf_stepdrv_settle(gf_stepdrv *d, gf_ctx *ctx, int keep);

/* Steps run eagerly, captured and replayed; with what the stage adds
 * ("; fakes in device memory"), the end-of-run line "D steps: 3 eager,
 * 1 captured, 96 replayed as graphs (0 eager after warm-up, 0 host waits
 * inside steps, 1.00 per iteration)..." when anything was captured or the
 * backend is a device. */
void gf_stepdrv_counts(const gf_stepdrv *d, int64_t *eager, int64_t *captured, int64_t *replayed);
void gf_stepdrv_summary(const gf_stepdrv *d, gf_ctx *ctx, const char *extra);

/* On a backend that counts them (host_waits: the CUDA backend, the CPU
 * device check), the host's waits for the device while entries were
 * queued (between gf_stepdrv_begin and gf_stepdrv_push: 0 when nothing in
 * a step needs the host) and over the whole run; -1 without the count.
 * *forced: eager steps that were not a warm-up. */
void gf_stepdrv_waits(const gf_stepdrv *d, int64_t *inside, int64_t *total, int64_t *forced);

/* ---- real batches staged for a step's device buffers ---- */

typedef struct gf_staging gf_staging;

/* A step's real batches on their way to its fixed device buffers (a
 * captured step reads the same addresses every time), double-buffered:
 * with a copy instance cbe (gf_train_copy_backend: its own stream), a
 * batch's copy starts when it is put, while the step before runs, and the
 * step that uses it waits for it on the device, not on the host; without
 * one (NULL), the copy is made at use, on be. The staging takes over cbe
 * (closed at gf_staging_destroy, or here on failure). sample: bytes of one
 * image; labels: the batches' labels (tensor 1, int32) go too; max_batch:
 * the largest batch. 0 or an error code with gf_seterr detail; destroy
 * *out after a failure too. */
int gf_staging_create(gf_staging **out, gf_backend *be, gf_backend *cbe, size_t sample, int labels, int max_batch);
/* Releases the batches still held (after their copies ran), frees the
 * staging and closes the copy instance. NULL is a no-op. */
void gf_staging_destroy(gf_staging *g);
/* Takes over the caller's reference to m, a checked batch
 * (gf_trainer_check_batch), into the next of the two slots (*slot),
 * releasing the batch the slot held once its copy ran, and starts its copy
 * on the copy stream. The message stays readable (gf_staging_msg) until
 * the slot is put again. 0 or an error code (m released). */
int gf_staging_put(gf_staging *g, gf_msg *m, int *slot);
/* The batch of a slot. */
const gf_msg *gf_staging_msg(const gf_staging *g, int slot);
/* Queues the slot's batch into the step's buffers x and l (l: only with
 * labels) on be, after its staging copy. 0 or an error code. */
int gf_staging_use(gf_staging *g, int slot, void *x, void *l);
/* Releases the batches held, once their copies ran (the end of a run). */
void gf_staging_release(gf_staging *g);
/* 1 when the copies run ahead on a copy stream. */
int gf_staging_copy_stream(const gf_staging *g);

/* ---- messages in device memory (docs/cuda.md's protocol) ---- */

typedef struct gf_devmsg gf_devmsg;

/* A step stage's side of messages whose tensors stay in device memory
 * (fakes g -> d, D's weights d -> g on one device): the events of the
 * messages it produces, and the messages it consumed but keeps until its
 * own copies out of them have run. be: the stage's backend. */
int gf_devmsg_create(gf_devmsg **out, gf_backend *be);
/* Waits for the held messages' work and releases them; destroys the events. */
void gf_devmsg_destroy(gf_devmsg *d);

/* Producer: the work that fills m is queued on be: records m's event (one
 * per envelope, made on its first use) and sets m->event. */
int gf_devmsg_ready(gf_devmsg *d, gf_msg *m);

/* Consumer: be's later ops wait on the device for m's event (the host does
 * not wait); nothing for a host message (event NULL). */
int gf_devmsg_wait(gf_devmsg *d, const gf_msg *m);

/* Consumer: takes over the caller's reference to m and releases it once
 * the work be has queued so far (its copies out of m) has run: at a later
 * gf_devmsg_release, or at once on a host backend. */
int gf_devmsg_hold(gf_devmsg *d, gf_msg *m);

/* Releases the held messages but the newest `keep`, waiting for their
 * work first (queued a step or more ago: in practice done). */
int gf_devmsg_release(gf_devmsg *d, int keep);

/* A point after the work be queued so far, and a wait for the last such
 * point: for messages another owner may release (the fake cache). */
int gf_devmsg_fence(gf_devmsg *d);
int gf_devmsg_fence_wait(gf_devmsg *d);

/* The allocators of message buffers for be: pinned host memory (batches
 * a GPU copies from asynchronously) and device memory. 0, or
 * GF_EUNSUPPORTED when be has none. */
int gf_train_pinned_allocator(gf_backend *be, gf_allocator *out);
int gf_train_device_allocator(gf_backend *be, gf_allocator *out);

/* ---- GANs ---- */

/* The optimiser of the DC-GAN papers, the default of g_step and d_step:
 * Adam, lr 2e-4, betas (0.5, 0.999). */
void gf_gan_optim_defaults(gf_optim_conf *c);

/* A GAN loss as a pipeline names it (parameter "loss" of g_step and
 * d_step) and what each network trains with. */
typedef struct gf_gan_loss {
	gf_loss_kind g;         /* G's loss on D's output for its fakes */
	gf_loss_kind d;         /* D's loss, applied to real and fake outputs */
	float real, fake;       /* D's targets for real and fake outputs */
} gf_gan_loss;

/* Parses name: "bce" (D ends in a sigmoid; G non-saturating), "bce_logits"
 * (the same on logits), "hinge", "ls", "wgan" (the critic's mean difference,
 * D: mean D(G(z)) - mean D(x), G: -mean D(G(z)); no gradient penalty),
 * "rpgan" (R3GAN's relativistic pairing: D mean softplus(-(D(x) - D(G(z)))),
 * G mean softplus(-(D(G(z)) - D(x)), over pairs of one real and one fake:
 * both networks see the pair's two batches in one forward, GF_LOSS_RELATIVISTIC
 * with target 1). Returns 0 or GF_EPARAM with a message listing the names
 * (gf_errmsg()). */
int gf_gan_loss_parse(const char *name, gf_gan_loss *out);

/* The names gf_gan_loss_parse accepts, as parameter choices
 * ("bce|bce_logits|hinge|ls"). */
#define GF_GAN_LOSSES "bce|bce_logits|hinge|ls|wgan|rpgan"

/* ---- LeCam regularisation of D (Tseng et al. 2021) ---- */

/* lambda (mean_i relu(D(x_i) - a_fake)^2 + mean_i relu(a_real - D(G(z_i)))^2)
 * with a_real, a_fake exponential moving averages of D's mean real and fake
 * outputs over previous D steps. */
typedef struct gf_lecam {
	float lambda, decay;
	double ema[2];          /* a_real, a_fake */
	int set;                /* ema holds values (after the first average) */
} gf_lecam;

/* The term of one half-step's n outputs (real, or fake when `fake`) times
 * scale, returned, and its gradient w.r.t. the outputs into grad (n). Both
 * are 0 before the first gf_lecam_average. */
double gf_lecam_grad(const gf_lecam *l, const float *out, size_t n, int fake, float scale, float *grad);

/* Folds a D step's mean real and fake outputs into the averages: a =
 * decay a + (1 - decay) mean; the first call takes the means as they are. */
void gf_lecam_average(gf_lecam *l, double real, double fake);

/* ---- adaptive discriminator augmentation (StyleGAN2-ADA) ----
 * The controller of the augmentation probability p of D's `ada` layer
 * (docs/train.md "ADA"): D's outputs on real images give r_t = E[sign(D(x))]
 * (for a D that ends in a sigmoid, the sign of its logit: sign(D(x) - 1/2));
 * every `interval` D steps p moves by sign(r_t - target) times the real
 * images of those steps / (kimg * 1000), so that p can cross 0..1 in kimg
 * thousand images, and is clamped to [0, 1]. */
typedef struct gf_ada {
	double target;          /* r_t's target (StyleGAN2-ADA: 0.6) */
	int interval;           /* D steps between adjustments (4) */
	double kimg;            /* thousands of images for p to cross 0..1 (500); 0: p stays */
	int64_t signs;          /* since the last adjustment: sum of the signs, */
	int64_t count;          /* the outputs counted, */
	int64_t images;         /* the real images, */
	int64_t steps;          /* the D steps */
	double rt;              /* r_t of the last adjustment (NaN before the first) */
} gf_ada;

/* Adds n real outputs of D (host) to the signs; sigmoid: D ends in a
 * sigmoid (its logit's sign is that of out - 1/2). */
void gf_ada_observe(gf_ada *a, const float *out, size_t n, int sigmoid);

/* After a D step that used `images` real images: on every interval-th
 * step since the last adjustment, sets r_t and moves *p (clamped to
 * [0, 1]; kimg 0 leaves it); returns 1 then, else 0. */
int gf_ada_step(gf_ada *a, int64_t images, float *p);

/* The state a checkpoint keeps (signs, count, images, steps, r_t's bits)
 * and its restore. */
void gf_ada_save(const gf_ada *a, int64_t v[5]);
void gf_ada_load(gf_ada *a, const int64_t v[5]);

/* ---- gradient penalties (R1, WGAN-GP, path length) ---- */

/* A penalty P = weight * mean_i phi(|g_i|) on the per-sample input
 * gradient g_i = d<seed, net(x)>/dx_i of a network's last forward, and its
 * gradient with respect to the parameters through the engine's double
 * backward (gf_net_backward2). One per network, made in create(). */
typedef struct gf_penalty gf_penalty;

typedef enum {
	GF_PENALTY_SQUARE = 0,   /* phi = |g|^2 / 2 (R1: weight = gamma) */
	GF_PENALTY_DISTANCE      /* phi = (|g| - center)^2 (WGAN-GP: center 1; path length: its mean) */
} gf_penalty_kind;

/* Buffers for batches up to max_batch. GF_EUNSUPPORTED naming the layer
 * when the network has a kind without a double backward
 * (gf_net_check_backward2), or the backend lacks row_dot/row_scale. */
int gf_penalty_create(gf_penalty **out, gf_net *net, int max_batch);
void gf_penalty_destroy(gf_penalty *p);

/* After a forward: queues the backward of <seed, output> (seed: device,
 * the output's shape; NULL = ones, d sum(output)/dx) for g and its squared
 * lengths per sample, on the device (nothing is read on the host). */
int gf_penalty_lengths(gf_penalty *p, const float *seed);

/* Then queues the penalty d (d->distance: GF_PENALTY_SQUARE or _DISTANCE;
 * weight; center, or the moving center *center_st, a device double moved
 * by d->decay first, the path length's mean; NULL: d->center) and the
 * gradient of d->scale * P added to (GF_ACCUMULATE) or written into the
 * network's gradients (flags as gf_net_backward2, GF_NEED_DW); dy (may be
 * NULL) is an output gradient of the same forward walked in the same
 * pass. out (2 device doubles, may be NULL) receives P (weight * mean phi,
 * unscaled) and mean_i |g_i|, for the step's results. Usable inside a
 * captured step. */
int gf_penalty_apply(gf_penalty *p, const gf_penalty_desc *d, double *center_st, double *out, const float *dy,
                     unsigned flags);

/* StyleGAN2's lazy regularisation: with a penalty's update every `every`
 * updates, lr *= r and Adam's betas ^= r, r = every / (every + 1) (the
 * penalty's updates run every + 1 steps in every); nothing for every <= 1. */
void gf_penalty_adam_ratio(gf_optim_conf *c, int every);

/* ---- labels of generated batches ---- */

typedef struct gf_labels gf_labels;

/* A label sampler for batches of at most max: with classes == 0 (an
 * unconditional generator) every label is cls (a per-class pair's class,
 * or -1); otherwise classes drawn uniformly, or following the class
 * histogram of dataset when it is given (non-empty). Returns 0, -ENOMEM,
 * or an error naming the dataset in gf_errmsg() (cannot open it; its
 * class count differs from classes). *out may be set on failure:
 * gf_labels_destroy frees it. */
int gf_labels_create(gf_labels **out, int classes, int cls, int max, const char *dataset);
void gf_labels_destroy(gf_labels *l);

/* Draws n (<= max) labels into out from r. With world > 1 this rank takes
 * elements [rank n, (rank + 1) n) of one draw of world * n uniforms
 * (gf_dist_uniform_slice), so data-parallel ranks draw what one process
 * with the whole batch draws. */
void gf_labels_draw(gf_labels *l, gf_rng *r, int32_t *out, int n, int rank, int world);

/* ---- the classes the training data serves ---- */

/* The classes of the data that reaches input `port` of this stage from the
 * nearest lmdb_reader upstream (its dataset's classes holding images,
 * through the reader's `classes` filter), checked against a network
 * conditional on `classes` classes (`what` names it: "D"). Writes them as
 * ranges ("0-6,8,9") into out (size >= 2): "" when they are unknown (no
 * reader upstream, a label_shard or class_shard choosing classes, more
 * ranges than fit) or the network is unconditional. A class the network
 * cannot take (>= classes), or an unlabelled dataset for a conditional
 * network, fails the stage naming them; classes of the network with no
 * image in the data earn one warning (rank 0) naming the classes present.
 * Returns 0 or the gf_fail code. */
int gf_data_classes(gf_ctx *ctx, int port, int classes, const char *what, char *out, size_t size);

/* Parses the ranges gf_data_classes writes into mask (classes entries, 1
 * for a class listed). Returns 0, or GF_EPARAM for text that is not
 * ranges of classes below `classes` (the message quotes it). */
int gf_data_classes_parse(const char *text, int classes, unsigned char *mask);

/* The classes set in mask (classes entries) as ranges into out ("" when
 * none; cut short with "..." when out is too small). Returns out. */
char *gf_data_classes_format(const unsigned char *mask, int classes, char *out, size_t size);

/* ---- the fake cache of asynchronous D steps ---- */

typedef struct gf_fake_cache gf_fake_cache;

/* A cache of up to capacity fakes messages; each may serve `reuse` D
 * steps, and only while made with D weights at most `staleness` versions
 * old. Returns 0, -ENOMEM or GF_EPARAM (capacity < 1). */
int gf_fake_cache_create(gf_fake_cache **out, int capacity, int reuse, int64_t staleness);

/* Releases every message still cached. */
void gf_fake_cache_destroy(gf_fake_cache *c);

/* Takes ownership of m (its version: the D weights G used), dropping the
 * oldest batch when full. */
void gf_fake_cache_add(gf_fake_cache *c, gf_msg *m);

/* The newest batch that may serve D at version `version` (counted as one
 * more use), or NULL when none may. The message stays the cache's. */
gf_msg *gf_fake_cache_pick(gf_fake_cache *c, int64_t version);

/* ---- weights messages ---- */

/* Fills m with net's parameters (t[0], f32 (P)) and buffers (t[1], f32
 * (B)), copied to host memory, and sets m->version. Returns 0 or an error
 * (allocation). */
int gf_weights_pack(gf_msg *m, gf_net *net, int64_t version);

/* Fills m, whose buffers are device memory of net's backend (a pool
 * with gf_train_device_allocator), with copies of net's parameters and
 * buffers queued on net's backend; the caller then marks it ready
 * (gf_devmsg_ready). No finite check (the values are not on the host):
 * the loss and checkpoint checks catch a network gone non-finite.
 * Returns 0 or an error. */
int gf_weights_pack_dev(gf_msg *m, gf_net *net, int64_t version);

/* Loads a weights message into net (a network built from the same table):
 * a host message through gf_net_write, a device message (m->event set)
 * by device copies ordered after the event. The caller keeps a device
 * message until those copies ran (gf_devmsg_hold). Returns 0 or GF_ESHAPE
 * naming both sizes in gf_errmsg(). */
int gf_weights_unpack(gf_net *net, const gf_msg *m);

/* ---- state messages ---- */

/* A state under construction: the entries and metadata a stage adds before
 * pushing it. Reusable: gf_state_push clears it. */
int gf_state_create(gf_state **out);
void gf_state_destroy(gf_state *s);
void gf_state_clear(gf_state *s);

/* Adds a network (params, buffers, its generator) and optionally its
 * optimiser under prefix, named as gf_ckpt_save names them. Data is copied
 * at once. */
int gf_state_add_net(gf_state *s, const char *prefix, gf_net *net, gf_optim *opt);

/* Adds n int64 values as tensor `name` (copied). */
int gf_state_add_i64(gf_state *s, const char *name, const int64_t *v, int n);

/* Adds a generator state as an i64 [3] tensor (seed, stream, offset). */
int gf_state_add_rng(gf_state *s, const char *name, const gf_rng *r);

/* Sets a metadata key (copied). */
int gf_state_meta(gf_state *s, const char *key, const char *value);

/* Encodes the state into a message taken from out port `port` (t[0] = u8
 * safetensors image), sets msg->step = step, pushes it, clears s.
 * Returns 0, GF_ESTOP, or an error set on ctx. */
int gf_state_push(gf_state *s, gf_ctx *ctx, int port, int64_t step);

/* "<instance>.<suffix>" into buf (the names of a stage's part of a
 * checkpoint); returns buf. */
const char *gf_train_key(gf_ctx *ctx, const char *suffix, char *buf, size_t size);

/* Adds the metadata every training stage records: "<instance>.role"
 * (generator, discriminator, classifier), "<instance>.table" (the layer
 * table as JSON) and "<instance>.class" (the class of a per-class
 * pair, -1 otherwise). */
int gf_state_describe(gf_state *s, gf_ctx *ctx, const char *role, const char *table, int cls);

/* ---- finite checks ---- */

/* Index of the first NaN or infinity among x[0..n) (host memory), or n
 * when every value is finite. One vectorised pass over the values' bit
 * patterns (about 0.3 ms per million values on one core): cheap
 * enough for every weights message and checkpoint part. */
size_t gf_finite_find(const float *x, size_t n);

/* Checks host, a copy of block b (GF_PARAMS or GF_BUFFERS) of net in
 * gf_net_read's layout: 0 when every value is finite, else GF_ENONFINITE
 * with the first non-finite value named by its tensor in gf_errmsg():
 * "d.net.3.running_var[12] is inf" for prefix "d.net" (NULL: the view
 * name alone). */
int gf_train_check_block(const gf_net *net, gf_block b, const float *host, const char *prefix);

/* Reads net's parameter and buffer blocks to host memory and checks them
 * as gf_train_check_block (for a network loaded from a file). Returns 0,
 * GF_ENONFINITE (named), or -ENOMEM / a backend error. */
int gf_train_check_net(gf_net *net, const char *prefix);

/* Checks the f32 tensors of a state under construction (networks and
 * optimiser state as they will be written): 0, or GF_ENONFINITE naming
 * the first non-finite value by its checkpoint name
 * ("d.net.3.running_var[12] is inf") in gf_errmsg(). */
int gf_state_check_finite(const gf_state *s);

/* ---- restoring ---- */

/* On a resumed run (gf_ctx_run(ctx)->resume set), restores the stage's
 * network "<instance>.net" (and optimiser, may be NULL) and its step
 * counter "<instance>.step" into *step; does nothing otherwise. Errors are
 * set on ctx (gf_fail), naming the checkpoint and the first tensor that
 * differs. */
int gf_train_resume(gf_ctx *ctx, gf_net *net, gf_optim *opt, int64_t *step);

/* On a resumed run, reads "<instance>.<suffix>": n int64 values, or a
 * generator state. Errors are set on ctx. */
int gf_train_resume_i64(gf_ctx *ctx, const char *suffix, int64_t *v, int n);
int gf_train_resume_rng(gf_ctx *ctx, const char *suffix, gf_rng *r);

/* Restores net (and opt, may be NULL) from the entries under prefix of the
 * checkpoint file path. Returns 0, or GF_ENOTFOUND / GF_ESHAPE naming the
 * first tensor that differs (gf_errmsg()). */
int gf_state_load_net(const char *path, const char *prefix, gf_net *net, gf_optim *opt);

/* Reads tensor name (i64, n values) from an open checkpoint. */
int gf_state_read_i64(const char *path, const char *name, int64_t *v, int n);

#ifdef __cplusplus
}
#endif
#endif
