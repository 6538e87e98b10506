/* ganflow evaluation statistics: FID, IS, KID, precision/recall.
 *
 * The statistics half of the evaluator. The evaluator stage and the
 * `ganflow eval` command generate images, run the classifier and hand the
 * resulting features (penultimate layer, float (n, d) row-major) and class
 * probabilities (float (n, k) row-major, softmax outputs) to the functions
 * below. Real-data statistics are computed once per (dataset split,
 * classifier) and cached with gf_feat_stats_save/_load, keyed by a hash the
 * caller builds with gf_hash64/gf_hash64_file.
 *
 * Definitions and conventions (covariance denominator, eigenvalue clamping,
 * KID kernel and subsets, precision/recall neighbourhood) are in
 * docs/eval.md; the short version is on each function.
 *
 * Every function returns 0 or a negative code (-errno, GF_E*; see err.h)
 * and sets a detail message readable with gf_errmsg(). Nothing here keeps
 * pointers to its inputs after it returns. Linear algebra runs on the
 * process's OpenBLAS (its thread count: gf_evalstats_threads); for a given
 * thread count every result is bit-for-bit reproducible.
 */
#ifndef GANFLOW_EVALSTATS_H
#define GANFLOW_EVALSTATS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Defaults used by the evaluator (docs/eval.md explains each). */
#define GF_IS_SPLITS 10
#define GF_KID_SUBSETS 100
#define GF_KID_SUBSET_SIZE 1000
#define GF_KID_SEED 0x6b6964ULL   /* "kid" */
#define GF_PR_K 3

/* ---- feature statistics (FID's Gaussian) ---- */

/* Mean and covariance of n feature vectors of dimension d, in double
 * precision, covariance with the n - 1 denominator (numpy.cov's default).
 * The cache fields describe where the statistics came from; they are
 * written and checked by gf_feat_stats_save/_load. */
typedef struct gf_feat_stats {
	int d;                /* feature dimension */
	int64_t n;            /* number of feature vectors the statistics came from */
	double *mu;           /* (d) mean */
	double *sigma;        /* (d, d) covariance, row-major, symmetric */
	float *feats;         /* (n, d) the features themselves, or NULL: set by
	                       * gf_feat_stats_load when the file holds them (KID and
	                       * precision/recall need the real features). Owned by
	                       * the struct (freed by gf_feat_stats_free): a caller
	                       * that points it at memory of its own (a malloc'ed
	                       * copy is fine) sets it back to NULL before freeing */
	uint64_t key;         /* cache key (0 = none); see gf_feat_stats_save */
	char split[64];       /* name of the split, NUL-terminated ("" = none) */
} gf_feat_stats;

/* Computes the mean and covariance of x (n, d), row-major float.
 * Sums in double (mean first, then a double dsyrk over centred blocks of
 * rows, in a fixed order). Needs n >= 2; FID additionally needs n > d
 * (gf_evalstats_check_n), checked by gf_fid rather than here so that
 * statistics of small sets can still be inspected.
 * out is overwritten (call gf_feat_stats_free on a previous value first);
 * on success out->mu and out->sigma are malloc'ed and owned by out until
 * gf_feat_stats_free; out->feats is NULL, key 0, split "". On failure
 * out holds nothing to free.
 * Returns 0, GF_EPARAM (NULL, n < 2, d < 1), GF_ENONFINITE (NaN/Inf in x,
 * naming the row and column), -ENOMEM. */
int gf_feat_stats_compute(const float *x, int64_t n, int d, gf_feat_stats *out);

/* As gf_feat_stats_compute over the rows i of x (n, d) with
 * labels[i] == label only: the per-class statistics for per-class FID
 * (compute one per class on both sides and call gf_fid on each pair).
 * Returns GF_EPARAM naming the label when fewer than 2 rows carry it. */
int gf_feat_stats_compute_label(const float *x, const int32_t *labels, int64_t n,
                                int d, int32_t label, gf_feat_stats *out);

/* Frees what s owns (mu, sigma, feats) and zeroes it. NULL-safe; safe on a
 * zeroed struct and on one already freed. */
void gf_feat_stats_free(gf_feat_stats *s);

/* Writes s (d, n, key, split, mu, sigma) and, when feats is not NULL, the
 * features feats (s->n, s->d) to path, atomically: a temporary file in the
 * same directory, fsync, rename. Little-endian binary format "GFSTATS1"
 * described in docs/eval.md, ending in a 64-bit FNV-1a checksum.
 * Returns 0, GF_EPARAM, or -errno naming the file. */
int gf_feat_stats_save(const char *path, const gf_feat_stats *s, const float *feats);

/* Reads a file written by gf_feat_stats_save into out (overwritten; on
 * success owned by out until gf_feat_stats_free, out->feats set when the
 * file holds features, else NULL).
 * When key is not 0 the file's key must equal it, and when split is not
 * NULL the file's split name must equal it: a stale cache (other classifier
 * checkpoint, other split) is GF_ENOTFOUND with both keys in the message,
 * so the caller recomputes. A missing file is -ENOENT; a truncated or
 * damaged file (bad magic, sizes, checksum) GF_ECORRUPT. On failure out
 * holds nothing to free. */
int gf_feat_stats_load(const char *path, uint64_t key, const char *split, gf_feat_stats *out);

/* ---- cache keys ---- */

#define GF_HASH64_INIT 0xcbf29ce484222325ULL   /* FNV-1a 64 offset basis */

/* 64-bit FNV-1a of len bytes, continuing from state h (GF_HASH64_INIT to
 * start): hashing a then b from the result of a equals hashing a||b, so a
 * cache key is built by chaining, e.g.
 *   h = gf_hash64(split_name, strlen(split_name), GF_HASH64_INIT);
 *   gf_hash64_file(classifier_path, h, &h);
 * Same function as the one in tests/fixtures/eval/make_refs.py. */
uint64_t gf_hash64(const void *data, size_t len, uint64_t h);

/* Continues state h over every byte of the file at path; writes the result
 * to *out. Returns 0 or -errno (the message names the file). */
int gf_hash64_file(const char *path, uint64_t h, uint64_t *out);

/* ---- metrics ---- */

/* Checks that n feature vectors of dimension d are enough for FID: the
 * covariance of n vectors has rank at most n - 1, so n must exceed d.
 * what names the set in the message ("generated images", "real split
 * 'test'"). Returns 0 or GF_EPARAM with a message such as
 * "generated images: n=500 is not more than the feature dimension 512:
 *  FID needs n >= 513 (10000 or more is usual)". */
int gf_evalstats_check_n(int64_t n, int d, const char *what);

/* Frechet distance between the Gaussians a and b:
 *   ||mu_a - mu_b||^2 + tr(S_a) + tr(S_b) - 2 tr((S_a^1/2 S_b S_a^1/2)^1/2)
 * Square roots through LAPACK's symmetric eigensolver (dsyevd); eigenvalues
 * below zero (rounding of a positive semi-definite matrix) count as zero.
 * Requires a->d == b->d (GF_ESHAPE) and n > d on both sides (GF_EPARAM, see
 * gf_evalstats_check_n, with the split name when set). *out is the FID,
 * >= 0 up to rounding. Returns 0, GF_EPARAM, GF_ESHAPE, GF_ENONFINITE,
 * -ENOMEM, GF_EFAIL (LAPACK did not converge). */
int gf_fid(const gf_feat_stats *a, const gf_feat_stats *b, double *out);

/* Inception score of class probabilities probs (n, k) row-major (softmax
 * outputs: each row non-negative and summing to 1 within 1e-3, else
 * GF_EPARAM naming the row: logits are a common mistake). Rows are cut into
 * `splits` consecutive parts [i n / splits, (i+1) n / splits); per part
 *   exp( mean_x KL(p(y|x) || p(y)) ),  p(y) = the part's mean row,
 * with 0 log 0 = 0, all in double. *mean and *std are the mean and the
 * population standard deviation (np.std) over the parts, as in the
 * original implementation. Needs splits >= 1 and n >= splits. */
int gf_inception_score(const float *probs, int64_t n, int k, int splits,
                       double *mean, double *std);

/* Kernel inception distance of x (nx, d) and y (ny, d): the unbiased
 * estimate of MMD^2 with the kernel k(a, b) = (a.b / d + 1)^3, over
 * `subsets` pairs of subsets of subset_size rows each, drawn without
 * replacement within a subset (independently for x and y and for each
 * subset) from a splitmix64 stream seeded with seed; *mean and *std are the
 * mean and the population std over subsets (as torch-fidelity). Dot
 * products in float (sgemm), kernel values and sums in double. Needs
 * 2 <= subset_size <= min(nx, ny) (GF_EPARAM suggests a smaller
 * kid_subset_size or a larger n) and subsets >= 1. The sampler is spelled
 * out in docs/eval.md and tests/fixtures/eval/make_refs.py. */
int gf_kid(const float *x, int64_t nx, const float *y, int64_t ny, int d,
           int subsets, int subset_size, uint64_t seed, double *mean, double *std);

/* Improved precision and recall (Kynkaanniemi et al. 2019) of fake
 * (nf, d) against real (nr, d). Each real point's radius is the distance to
 * its k-th nearest other real point (the (k+1)-th smallest distance to all
 * reals counting itself, as the reference implementation); precision is
 * the fraction of fakes within the radius of at least one real point
 * (distance <= radius); recall is the same with the roles swapped. Squared
 * Euclidean distances ||a||^2 + ||b||^2 - 2 a.b from sgemm in blocks of
 * rows (about 32 MB of work memory whatever n). Needs 1 <= k < nr, k < nf. */
int gf_precision_recall(const float *real, int64_t nr, const float *fake, int64_t nf,
                        int d, int k, double *precision, double *recall);

/* ---- all of them at once ---- */

typedef struct gf_eval_opts {
	int is_splits;        /* GF_IS_SPLITS */
	int kid_subsets;      /* GF_KID_SUBSETS; 0 = no KID */
	int kid_subset_size;  /* GF_KID_SUBSET_SIZE */
	uint64_t kid_seed;    /* GF_KID_SEED */
	int pr_k;             /* GF_PR_K; 0 = no precision/recall */
} gf_eval_opts;

/* The defaults above. */
gf_eval_opts gf_eval_opts_default(void);

typedef struct gf_eval_result {
	int64_t n;            /* generated feature vectors */
	int64_t n_real;       /* real feature vectors behind the statistics */
	double fid;
	double is_mean, is_std;        /* NAN when no probabilities were given */
	double kid_mean, kid_std;      /* NAN when KID was not computed */
	double precision, recall;      /* NAN when not computed */
	double sec_stats;     /* seconds: mean/covariance of the generated features */
	double sec_fid;       /* seconds: the Frechet distance itself */
	double sec_is, sec_kid, sec_pr;
} gf_eval_result;

/* Computes every metric of generated features fake (n, d) (and, when probs
 * is not NULL, their class probabilities probs (n, k); k is ignored
 * otherwise) against real statistics real (gf_feat_stats_compute or
 * gf_feat_stats_load; the generated side's statistics are computed here):
 * FID always; IS when probs is given; KID when opts->kid_subsets > 0 and
 * precision/recall when opts->pr_k > 0, both of which need real->feats
 * (GF_EPARAM otherwise: save the real features in the cache). opts NULL
 * means gf_eval_opts_default(). Timings of each part go to out. Nothing is
 * kept. Returns the first failing part's code (its message says which). */
int gf_eval_metrics(const gf_feat_stats *real, const float *fake, int64_t n, int d,
                    const float *probs, int k, const gf_eval_opts *opts,
                    gf_eval_result *out);

/* Sets the number of threads of the BLAS/LAPACK library that these
 * functions (and the rest of the process: it is process-wide) use; n <= 0
 * keeps the current one. Returns the number now in use. */
int gf_evalstats_threads(int n);

#ifdef __cplusplus
}
#endif
#endif
