/* ganflow training helpers: what the training stages (g_step, d_step,
 * sample_grid, evaluator, checkpoint) share.
 *
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
 * Lua text, so `ganflow sample` can rebuild the network).
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

/* Opens the compute backend a stage's parameters ask for: "backend"
 * ("cpu", "cuda", "auto"; "" = the run's backend, itself "auto" by
 * default), "threads" (0 = the run's threads setting, else all cores),
 * and, when the stage declares them, "precision" (fp32, bf16, fp16) and
 * "layout" (auto, nchw, nhwc). On failure the message is set on ctx
 * (gf_fail) and the error returned. */
int gf_train_backend(gf_ctx *ctx, const gf_value *params, gf_backend **out);

/* Builds and initialises a network from a layer table for batch max_batch:
 * gf_net_create + gf_net_init with a generator (seed, stream). what names
 * the network in errors ("G", "D replica"). Errors are set on ctx. */
int gf_train_net(gf_ctx *ctx, gf_backend *be, const gf_value *table, int max_batch, const char *what,
                 uint64_t seed, uint64_t stream, gf_net **out);

/* Stable 64-bit stream id for a stage instance and a purpose, so every
 * stage draws from its own generator under the run's seed:
 * FNV-1a of "<instance>/<purpose>". */
uint64_t gf_train_stream(gf_ctx *ctx, const char *purpose);

/* ---- weights messages ---- */

/* Fills m with net's parameters (t[0], f32 (P)) and buffers (t[1], f32
 * (B)), copied to host memory, and sets m->version. Returns 0 or an error
 * (allocation). */
int gf_weights_pack(gf_msg *m, gf_net *net, int64_t version);

/* Loads a weights message into net (a network built from the same table).
 * Returns 0 or GF_ESHAPE naming both sizes in gf_errmsg(). */
int gf_weights_unpack(gf_net *net, const gf_msg *m);

/* ---- state messages ---- */

typedef struct gf_state gf_state;

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

/* Adds n floats as a 1-d tensor `name` (copied). */
int gf_state_add_f32(gf_state *s, const char *name, const float *v, size_t n);

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
 * table as Lua text) and "<instance>.class" (the class of a per-class
 * pair, -1 otherwise). */
int gf_state_describe(gf_state *s, gf_ctx *ctx, const char *role, const char *table, int cls);

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

/* Reads a generator state written by gf_state_add_rng. */
int gf_state_read_rng(const char *path, const char *name, gf_rng *r);

#ifdef __cplusplus
}
#endif
#endif
