/* ganflow evaluation: generators from checkpoints, classifier features,
 * FID / IS / KID / precision-recall against cached real statistics.
 *
 * Used by `ganflow eval`, `ganflow sample` and the evaluator stage (which
 * evaluates G while training goes on). The metrics themselves live in
 * <ganflow/evalstats.h>; this layer turns images into the classifier's
 * features and class probabilities, and manages the real data's side.
 *
 * Classifier checkpoints are written by the classifier_step stage
 * (pipelines/classifier_fashion.lua): tensors "<name>.net.*", metadata
 * "<name>.role" = "classifier", "<name>.table" (layer table as Lua text),
 * "<name>.size", "<name>.channels", "<name>.resize" (the transform its
 * training data went through: real images are evaluated through the same
 * one) and "<name>.test_accuracy". The table has a layer named "features"
 * (the penultimate activations: the feature vectors) and ends in class
 * logits.
 *
 * Real statistics are computed once per (dataset split, classifier) and
 * cached beside the dataset in "<split>/.ganflow-fid-<key>.stats" (format
 * of gf_feat_stats_save, real features included for KID and precision /
 * recall), key = FNV-1a of the split's real path, record count and the
 * classifier file's bytes. A changed classifier or split gives a new key.
 */
#ifndef GANFLOW_EVALUATE_H
#define GANFLOW_EVALUATE_H

#include <stdint.h>

#include <ganflow/evalstats.h>
#include <ganflow/nn.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- generators of a training checkpoint ---- */

typedef struct gf_generators gf_generators;

/* Opens every generator of a training checkpoint (metadata "<g>.role" =
 * "generator"; path is a checkpoint file or a run directory, resolved as
 * gf_ckpt_resolve does): builds each network from "<g>.table" for batches up to
 * max_batch on backend be and loads its weights. Per-class checkpoints
 * hold one generator per class ("<g>.class" >= 0). Returns 0, or
 * GF_ENOTFOUND (no generator), GF_ESHAPE / GF_ECORRUPT, GF_ENONFINITE (a
 * NaN or infinite weight, named: "g.net.2.weight[0] is nan") with the
 * message in gf_errmsg(). Release with gf_generators_close. */
int gf_generators_open(gf_generators **out, const char *path, gf_backend *be, int max_batch);

/* How gf_generators_open_with samples. */
typedef struct gf_generators_opts {
	int ema;            /* -1: a generator's moving average (g_step's `ema`) when the
	                     * checkpoint has one, else its weights (gf_generators_open);
	                     * 0: the trained weights; 1: the average, GF_ENOTFOUND without */
	float truncation;   /* > 0: the truncation trick, every |z_i| > truncation redrawn; for a
	                     * StyleGAN2 G (w_avg layers in its table) psi = truncation in w-space
	                     * instead (w -> w_avg + psi (w - w_avg)), z untouched */
} gf_generators_opts;

/* gf_generators_open with options (NULL: the defaults above). */
int gf_generators_open_with(gf_generators **out, const char *path, gf_backend *be, int max_batch,
                            const gf_generators_opts *o);

/* 1 when the generators run on moving-average weights. */
int gf_generators_ema(const gf_generators *g);
/* 1 when the truncation is in w-space (the generators have w_avg layers). */
int gf_generators_wspace(const gf_generators *g);
void gf_generators_close(gf_generators *g);

/* Builds `count` generators from one layer table (weights zero until
 * loaded through gf_generators_net + gf_weights_unpack): one G when count
 * is 1, per-class generators for classes 0..count-1 otherwise. For the
 * evaluator stage, which receives the weights from g_step. */
int gf_generators_create(gf_generators **out, const gf_value *table, int count, gf_backend *be, int max_batch);

/* Number of generators, of classes (conditional G: its classes; per-class
 * checkpoint: the number of generators; else 0), and the image shape
 * (c, h, w) they make. */
int gf_generators_count(const gf_generators *g);
int gf_generators_classes(const gf_generators *g);
void gf_generators_shape(const gf_generators *g, int *c, int *h, int *w);

/* A conditional G's classes that its training data held images of, as the
 * checkpoint records them (d_step's "<d>.data_classes"): 1 when class k
 * (0 <= k < classes) did, or when the checkpoint records nothing (older
 * checkpoints: every class); 0 otherwise. seen_text gives them as ranges
 * ("7", "0-6,8,9"), or NULL when the checkpoint records none. */
int gf_generators_seen(const gf_generators *g, int k);
const char *gf_generators_seen_text(const gf_generators *g);

/* Loads new weights into generator i (a weights message's blocks, as
 * gf_weights_unpack; used by the evaluator stage). */
gf_net *gf_generators_net(gf_generators *g, int i);

/* Generates n (<= max_batch) images into images (n, c, h, w) host memory,
 * f32 in [-1, 1], from noise drawn with r (truncated when opened so). labels (n) selects the class of
 * each image (conditional G: its label; per-class: which G), or is NULL
 * for an unconditional single G. mode is GF_EVAL (batchnorm on running
 * statistics) or GF_TRAIN | GF_FREEZE_STATS. Returns 0, GF_EPARAM, or
 * GF_ENONFINITE when an image holds NaN or infinite values ("generator
 * output is not finite", naming the generator and the image). */
int gf_generators_sample(gf_generators *g, gf_rng *r, const int32_t *labels, int n, unsigned mode,
                         float *images);

/* The noise (n, z) of the last gf_generators_sample, owned by g. */
const float *gf_generators_noise(const gf_generators *g);

/* ---- the evaluator ---- */

typedef struct gf_evaluator gf_evaluator;

typedef struct gf_evaluator_opts {
	const char *classifier;  /* classifier checkpoint (required) */
	const char *real;        /* real dataset split or image folder: the reference
	                          * (NULL: none, features only, gf_evaluator_compute fails) */
	int64_t real_n;          /* real images used (0 = the whole split) */
	int batch;               /* images per classifier forward (default 256) */
	int threads;             /* compute threads (0 = all cores) */
	int stats_threads;       /* BLAS threads for the statistics (0 = leave as is) */
	int use_cache;           /* read / write the real statistics cache */
	int per_class;           /* keep per-class real statistics (per-class FID) */
	double max_bad_fraction; /* bad records of a dataset that are skipped (counted,
	                          * warned about) before reading fails (default 0.01,
	                          * as lmdb_reader and jpeg_decode) */
	gf_eval_opts stats;      /* IS splits, KID subsets, precision/recall k */
	int clean_resize;        /* FID Inception only: clean-fid's resize (gf_fid_resize_clean)
	                          * instead of pytorch-fid's (gf_fid_resize) */
	const char *other_what;  /* the images the caller will add, for messages ("generated
	                          * images", a path; NULL: not known yet, other_n unused) */
	int64_t other_n;         /* how many: no more than the feature dimension fails
	                          * gf_evaluator_open before the real split is read, as a
	                          * short real split does */
} gf_evaluator_opts;

/* Defaults: batch 256, whole split, cache on, per-class on,
 * max_bad_fraction 0.01, stats defaults. */
gf_evaluator_opts gf_evaluator_defaults(void);

/* Loads the classifier and the real statistics (from the cache, or by
 * extracting features of the real split and writing the cache), showing a
 * progress bar on long work. Bad records of the real split are skipped
 * and counted up to max_bad_fraction (gf_evaluator_real_bad); statistics
 * with records skipped are not cached. A split of no more images than the
 * feature dimension fails before any work (nothing is cached), and so does
 * an other_n that is no more (whichever side is short, no feature is
 * computed). Returns 0
 * or an error with the message naming the file (a classifier checkpoint
 * that does not match its table or is not finite, a dataset that cannot be
 * read, too many bad records...). */
int gf_evaluator_open(gf_evaluator **out, const gf_evaluator_opts *o);
void gf_evaluator_close(gf_evaluator *e);

/* The images of a dataset split or image folder, as gf_evaluator_add_dataset
 * reads them, into *count (bad records not yet known). Returns 0 or an error
 * naming the path. */
int gf_evaluator_count(const char *path, uint64_t *count);

/* Feature dimension, classes, and the image shape (c, h, w) the classifier
 * takes. */
int gf_evaluator_dim(const gf_evaluator *e);
int gf_evaluator_classes(const gf_evaluator *e);
void gf_evaluator_shape(const gf_evaluator *e, int *c, int *h, int *w);

/* 1 when the feature network is the FID Inception (a checkpoint written by
 * `ganflow weights import`, metadata "<name>.input" = "fid"): images of
 * any size and 1 or 3 channels are then accepted and go through
 * gf_fid_resize to its 299x299 input; datasets and folders are decoded at
 * their own size first, as pytorch-fid reads files. */
int gf_evaluator_fid(const gf_evaluator *e);

/* The features of the images added so far: (*n, gf_evaluator_dim) floats
 * owned by e, valid until the next add, reset or close. */
const float *gf_evaluator_features(const gf_evaluator *e, int64_t *n);

/* gf_hash64 of the classifier (feature network) file's bytes: what the
 * real statistics' cache key holds, for records that name the network. */
uint64_t gf_evaluator_features_hash(const gf_evaluator *e);

/* Real statistics in use (owned by e), where they came from, and how many
 * bad records of the real split were skipped (0 for cached statistics). */
const gf_feat_stats *gf_evaluator_real(const gf_evaluator *e);
int gf_evaluator_real_cached(const gf_evaluator *e);
uint64_t gf_evaluator_real_bad(const gf_evaluator *e);

/* Forgets the images added so far. */
void gf_evaluator_reset(gf_evaluator *e);

/* Adds n images (n, c, h, w) f32 in [-1, 1], host memory, with their
 * labels (n, may be NULL when unknown): runs the classifier and keeps
 * features and class probabilities. Images of another shape than the
 * classifier's input are GF_ESHAPE naming both shapes. */
int gf_evaluator_add(gf_evaluator *e, const float *images, const int32_t *labels, int64_t n, int c, int h,
                     int w);

/* Adds n images of the dataset or image folder at path (evenly spaced over it; n <= 0 or
 * more than it holds: all of them) with their labels, read through the
 * classifier's size (bilinear resize), as gf_evaluator_add. Bad records
 * are skipped and counted in *bad, up to o.max_bad_fraction of those read
 * (more fails naming the last one); *added receives the images added.
 * Returns 0 or an error naming the dataset. */
int gf_evaluator_add_dataset(gf_evaluator *e, const char *path, int64_t n, int64_t *added, uint64_t *bad);

/* Metrics of the added images against the real statistics (see
 * gf_eval_metrics). When per_class is not NULL and labels were given,
 * per_class[k] (classes entries) receives the FID of class k (NAN where
 * either side has too few images). n not above the feature dimension is
 * GF_EPARAM with a message suggesting a larger n. */
int gf_evaluator_compute(gf_evaluator *e, gf_eval_result *out, double *per_class);

/* Seconds spent in classifier forwards since the evaluator was opened
 * (feature extraction of added images, not of the real split). */
double gf_evaluator_feature_seconds(const gf_evaluator *e);

/* ---- the FID Inception's input ---- */

/* pytorch-fid's input pipeline: n images src (n, c, h, w), c = 1 (repeated
 * to three channels) or 3, resized by bilinear interpolation as
 * F.interpolate(mode = "bilinear", align_corners = False) (no
 * antialiasing) to dst (n, 3, oh, ow), then dst = v * scale + shift:
 * scale = 2 / 255, shift = -1 maps [0, 255] images to [-1, 1]; scale 1,
 * shift 0 keeps [-1, 1] images (a generator's). Host memory; dst must not
 * overlap src. Returns 0, -ENOMEM or GF_EPARAM for sizes out of range. */
int gf_fid_resize(float *dst, const float *src, int n, int c, int h, int w, int oh, int ow, float scale,
                  float shift);

/* clean-fid's input pipeline ("clean" mode): as gf_fid_resize, but each
 * channel resized as PIL's Image.resize(BICUBIC) does a float image
 * (bicubic a = -0.5, antialiased when shrinking), and the result clipped
 * to [-1, 1] after the map (clean-fid clips to [0, 255]). */
int gf_fid_resize_clean(float *dst, const float *src, int n, int c, int h, int w, int oh, int ow, float scale,
                        float shift);

#ifdef __cplusplus
}
#endif
#endif
