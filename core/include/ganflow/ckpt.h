/* ganflow training checkpoints: their layout, known here and nowhere else.
 *
 * A run directory holds checkpoints/ckpt-<step, 8 digits>.safetensors and
 * checkpoints/latest, a text file naming the newest of them (replaced
 * atomically). One checkpoint file holds the parts of every training stage
 * of the run (the checkpoint stage merges them), each under the stage's
 * instance name NAME:
 *
 *   tensors   NAME.net.<layer>.<param>, NAME.net.opt.*, NAME.net.rng
 *                               the network, as gf_ckpt_part names them
 *             NAME.ema.<layer>.<param>, NAME.ema.rng
 *                               a g_step with `ema`: the moving average of
 *                               its network (parameters and buffers)
 *             NAME.step         i64 [1]: the stage's updates
 *             NAME.data_pos     i64 [2]: epoch and position of the last real
 *                               batch used (a d_step)
 *             NAME.<what>_rng   i64 [3]: a generator's state
 *   metadata  format            "ganflow-checkpoint-1"; step
 *             NAME.role         generator | discriminator | classifier
 *             NAME.table        the network's layer table as JSON (older
 *                               checkpoints: as Lua text, still read)
 *             NAME.class        the class of a per-class pair, -1 otherwise
 *             NAME.reader       the lmdb_reader instance NAME.data_pos is of
 *
 * So Python's json module reads a network's architecture:
 *   json.loads(header["__metadata__"]["g.table"])
 *
 * Threads: a gf_ckpt is used by one thread at a time.
 */
#ifndef GANFLOW_CKPT_H
#define GANFLOW_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include <ganflow/nn.h>
#include <ganflow/value.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The checkpoint folder of a run directory, and the file naming the newest. */
#define GF_CKPT_DIR "checkpoints"
#define GF_CKPT_LATEST "latest"
/* The value of metadata "format" in the checkpoints training writes. */
#define GF_CKPT_FORMAT "ganflow-checkpoint-1"
/* Every format this version reads: what training has written since its
 * first checkpoint (layer tables as JSON or, before that, as Lua text), and
 * single networks saved by gf_ckpt_save (<ganflow/nn.h>: the evaluator's
 * classifier, `ganflow weights import`). python/ganflow/checkpoint.py
 * holds the same list. */
#define GF_CKPT_FORMATS GF_CKPT_FORMAT ", ganflow-nn-1"

/* ---- files of a run ---- */

/* "<dir>/ckpt-<step, 8 digits>.safetensors" into buf; returns buf. */
const char *gf_ckpt_file_name(const char *dir, int64_t step, char *buf, size_t size);

/* Records file (a path inside dir, or its base name) as the newest
 * checkpoint of dir: dir/latest, written to a temporary file, synced and
 * renamed over the old one. Returns 0 or -errno naming the file in
 * gf_errmsg(). */
int gf_ckpt_set_latest(const char *dir, const char *file);

/* ---- the record of how a run was started ----
 *
 * RUN/pipeline.lua and RUN/args.txt (`ganflow run` writes them) say how
 * the checkpoints of RUN were made, and `resume=RUN` restores the
 * arguments from args.txt. A run that would replace them (one that
 * continues RUN) writes its own into RUN/.next/ instead; they take the old
 * ones' place with the first checkpoint it writes (the checkpoint stage
 * calls gf_ckpt_commit_record after `latest`), or when it ends well without
 * writing one. A run that fails before either leaves RUN's record as it
 * was: a resume with options that break it at once cannot change how the
 * run resumes next. */
#define GF_RUN_NEXT ".next"

/* Moves every file of run_dir/.next into run_dir (one rename each), then
 * removes the folder; nothing when there is none. Returns 0 or -errno
 * with gf_errmsg() naming the file. */
int gf_ckpt_commit_record(const char *run_dir);

/* The record file `name` (e.g. "args.txt") of the run in progress in
 * run_dir, into buf: run_dir/.next/name while it waits there, else
 * run_dir/name. Returns buf. */
const char *gf_ckpt_record_file(const char *run_dir, const char *name, char *buf, size_t size);

/* Resolves path, a checkpoint file, a run directory (through
 * checkpoints/latest) or a checkpoints folder (through latest), to the
 * checkpoint file, into out. Returns 0, or -errno / GF_ENOTFOUND with a
 * message naming the path ("'runs/x' is a directory without
 * checkpoints/latest (give a checkpoint file)") in gf_errmsg(). */
int gf_ckpt_resolve(const char *path, char *out, size_t size);

/* ---- reading a checkpoint ---- */

/* Checks that the checkpoint file path (a file, not a run directory) is
 * of a format this version reads (GF_CKPT_FORMATS), from its header alone.
 * Returns 0, the error of reading the header, or GF_ECORRUPT naming the
 * file, the format found (or that it records none) and the formats this
 * version reads. gf_ckpt_open checks it too; resume= checks it before a
 * run starts. */
int gf_ckpt_check_format(const char *path);

typedef struct gf_ckpt gf_ckpt;

/* Opens the checkpoint file path (see gf_ckpt_resolve for the other forms)
 * and lists its training-stage parts (the instances with a NAME.role).
 * Returns 0, -EISDIR for a directory ("'x' is a directory: give a
 * checkpoint file or a run directory"), GF_ECORRUPT for a format this
 * version does not read (gf_ckpt_check_format), or an error naming the
 * file in gf_errmsg(). */
int gf_ckpt_open(gf_ckpt **out, const char *path);
void gf_ckpt_close(gf_ckpt *c);

/* The file's path; owned by c. */
const char *gf_ckpt_path(const gf_ckpt *c);

/* The step the checkpoint was written at (metadata "step"), or -1 when it
 * records none (a single network of gf_ckpt_save). */
int64_t gf_ckpt_step(const gf_ckpt *c);

/* Parts, in the order of the file's metadata: their number, and part i's
 * instance name, role and class (-1 when it records none). Strings are
 * owned by c. */
int gf_ckpt_nparts(const gf_ckpt *c);
const char *gf_ckpt_part_name(const gf_ckpt *c, int i);
const char *gf_ckpt_part_role(const gf_ckpt *c, int i);
int gf_ckpt_part_class(const gf_ckpt *c, int i);

/* Index of the first part of role, or -1. */
int gf_ckpt_find(const gf_ckpt *c, const char *role);

/* Metadata "<name of part i>.<key>", or NULL when absent; owned by c. */
const char *gf_ckpt_part_meta(const gf_ckpt *c, int i, const char *key);

/* Part i's layer table into *table (the caller frees it): parsed from
 * JSON, or from the Lua text of checkpoints written before layer tables
 * were JSON. A `noise` layer that names no strength but whose tensor holds
 * one per channel (a checkpoint written before the layer took StyleGAN2's
 * one strength per layer) gets strength = "channel", so the network loads
 * as it was trained. Returns 0 or an error naming the file and part. */
int gf_ckpt_table(const gf_ckpt *c, int i, gf_value *table);

/* Builds part i's network on be for batches up to max_batch and loads its
 * parameters and buffers (not its optimiser). Returns 0 (*out owned by the
 * caller: gf_net_destroy) or an error naming the file, the part and the
 * first tensor that differs; GF_ENONFINITE naming the first NaN or
 * infinite value ("g.net.2.weight[0] is nan") when the loaded network is
 * not finite. */
int gf_ckpt_net(const gf_ckpt *c, int i, gf_backend *be, int max_batch, gf_net **out);

/* gf_ckpt_net with the weights of "<part>.<which>": "net" (the trained
 * network) or "ema" (its moving average, when gf_ckpt_has_ema). */
int gf_ckpt_net_weights(const gf_ckpt *c, int i, const char *which, gf_backend *be, int max_batch, gf_net **out);

/* gf_ckpt_net_weights building the network from `table` (part i's table
 * as gf_ckpt_table gave it, edited by the caller in ways that keep its
 * parameters and buffers: `ganflow sample truncation=` sets psi on a
 * StyleGAN2 G's w_avg layers); the caller keeps the table. */
int gf_ckpt_net_weights_table(const gf_ckpt *c, int i, const char *which, const gf_value *table, gf_backend *be,
                              int max_batch, gf_net **out);

/* 1 when part i holds a moving average of its network: any tensor
 * "<part>.ema.*". Loading the average (gf_ckpt_net_weights "ema") then
 * needs every tensor of the network under that prefix, and a missing one
 * is GF_ENOTFOUND naming it ("...: the moving average of 'g' (g.ema.*) is
 * incomplete; ema=0 takes the trained weights (g.net.*)"): never the
 * trained weights in its place. python/ganflow/torch.py follows the same
 * rule (docs/bridge.md). */
int gf_ckpt_has_ema(const gf_ckpt *c, int i);

/* The data position recorded for lmdb_reader instance `reader` (the
 * NAME.data_pos of the part whose NAME.reader names it): *found = 1 and
 * pos = {epoch, position}, or *found = 0 when no part records one.
 * Returns 0 or an error reading the tensor. */
int gf_ckpt_data_pos(const gf_ckpt *c, const char *reader, int64_t pos[2], int *found);

#ifdef __cplusplus
}
#endif
#endif
