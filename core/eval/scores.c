/* core/eval, the quality of a generator: features of images through a
 * network (features.c, generate.c, folder.c), their statistics and the
 * scores: FID, IS, KID, precision/recall (stats.c, fid.c, is.c, kid.c,
 * prd.c, this file). It uses core/base, core/data, core/nn, core/out and
 * core/train (checkpoints); the evaluator stage and `ganflow eval` use it.
 *
 * Every evaluation score of one set of generated features in one call,
 * with the time each part took: what the evaluator stage, `ganflow eval`
 * and the benchmarks (tests/bench/bench_evalstats.c, tests/bench/eval)
 * run. See <ganflow/evalstats.h>.
 */
#include <math.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/evalstats.h>
#include <ganflow/log.h>

gf_eval_opts gf_eval_opts_default(void)
{
	gf_eval_opts o = {
		.is_splits = GF_IS_SPLITS,
		.kid_subsets = GF_KID_SUBSETS,
		.kid_subset_size = GF_KID_SUBSET_SIZE,
		.kid_seed = GF_KID_SEED,
		.pr_k = GF_PR_K,
	};
	return o;
}

int gf_eval_metrics(const gf_feat_stats *real, const float *fake, int64_t n, int d,
                    const float *probs, int k, const gf_eval_opts *opts,
                    gf_eval_result *out)
{
	if (!out)
		return gf_seterr(GF_EPARAM, "evaluation: out is NULL");
	memset(out, 0, sizeof(*out));
	out->is_mean = out->is_std = NAN;
	out->kid_mean = out->kid_std = NAN;
	out->precision = out->recall = NAN;
	out->fid = NAN;
	if (!real || !fake)
		return gf_seterr(GF_EPARAM, "evaluation: %s is NULL",
		                 real ? "generated features" : "real statistics");
	if (real->d != d)
		return gf_seterr(GF_ESHAPE, "evaluation: real statistics have feature dimension %d,"
		                 " generated features %d: statistics of another classifier?", real->d, d);
	gf_eval_opts o = opts ? *opts : gf_eval_opts_default();
	if ((o.kid_subsets > 0 || o.pr_k > 0) && !real->feats)
		return gf_seterr(GF_EPARAM, "evaluation: KID and precision/recall need the real"
		                 " features, and the real statistics carry none (save them with"
		                 " the features, or set kid_subsets = 0 and pr_k = 0)");
	int rc;
	out->n = n;
	out->n_real = real->n;
	/* fail before any work when n cannot give a full-rank covariance */
	if ((rc = gf_evalstats_check_n(n, d, "generated images")))
		return rc;

	gf_feat_stats fs;
	double t = gf_now();
	if ((rc = gf_feat_stats_compute(fake, n, d, &fs)))
		return rc;
	out->sec_stats = gf_now() - t;
	t = gf_now();
	rc = gf_fid(real, &fs, &out->fid);
	gf_feat_stats_free(&fs);
	if (rc)
		return rc;
	out->sec_fid = gf_now() - t;

	if (probs) {
		t = gf_now();
		if ((rc = gf_inception_score(probs, n, k, o.is_splits, &out->is_mean, &out->is_std)))
			return rc;
		out->sec_is = gf_now() - t;
	}
	if (o.kid_subsets > 0) {
		t = gf_now();
		if ((rc = gf_kid(real->feats, real->n, fake, n, d, o.kid_subsets, o.kid_subset_size,
		                 o.kid_seed, &out->kid_mean, &out->kid_std)))
			return rc;
		out->sec_kid = gf_now() - t;
	}
	if (o.pr_k > 0) {
		t = gf_now();
		if ((rc = gf_precision_recall(real->feats, real->n, fake, n, d, o.pr_k,
		                              &out->precision, &out->recall)))
			return rc;
		out->sec_pr = gf_now() - t;
	}
	return 0;
}
