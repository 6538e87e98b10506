/* Inception score of class probabilities, as in Salimans et al. 2016's
 * implementation: consecutive splits, exp(mean KL(p(y|x) || p(y))) per
 * split, mean and population std. See <ganflow/evalstats.h> and
 * docs/eval.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include <ganflow/err.h>
#include <ganflow/evalstats.h>

/* Rows must be probabilities: a row that does not sum to 1 is most often
 * logits or log-probabilities passed by mistake. */
#define ROW_SUM_TOL 1e-3

int gf_inception_score(const float *probs, int64_t n, int k, int splits,
                       double *mean, double *std)
{
	if (!probs || !mean || !std)
		return gf_seterr(GF_EPARAM, "IS: NULL argument");
	if (k < 1 || splits < 1 || n < splits)
		return gf_seterr(GF_EPARAM, "IS: n=%" PRId64 " rows of %d classes in %d splits:"
		                 " need k >= 1, splits >= 1 and n >= splits", n, k, splits);

	for (int64_t i = 0; i < n; i++) {
		const float *row = probs + i * (int64_t)k;
		double s = 0;
		for (int c = 0; c < k; c++) {
			if (!(row[c] >= 0.0f) || !isfinite(row[c]))
				return gf_seterr(GF_EPARAM, "IS: probability row %" PRId64 " class %d is %g:"
				                 " pass softmax probabilities, not logits", i, c, (double)row[c]);
			s += row[c];
		}
		if (fabs(s - 1.0) > ROW_SUM_TOL)
			return gf_seterr(GF_EPARAM, "IS: probability row %" PRId64 " sums to %g, not 1:"
			                 " pass softmax probabilities, not logits", i, s);
	}

	double *py = malloc((size_t)k * sizeof(*py));      /* (k) marginal of a split */
	double *lpy = malloc((size_t)k * sizeof(*lpy));    /* (k) its log */
	double *score = malloc((size_t)splits * sizeof(*score));
	int rc = 0;
	if (!py || !lpy || !score) {
		rc = gf_seterr(-ENOMEM, "IS: out of memory for k=%d", k);
		goto fail;
	}
	for (int s = 0; s < splits; s++) {
		int64_t lo = s * n / splits, hi = (s + 1) * n / splits;
		for (int c = 0; c < k; c++)
			py[c] = 0;
		for (int64_t i = lo; i < hi; i++)
			for (int c = 0; c < k; c++)
				py[c] += probs[i * k + c];
		for (int c = 0; c < k; c++) {
			py[c] /= (double)(hi - lo);
			lpy[c] = py[c] > 0 ? log(py[c]) : 0.0;
		}
		/* KL(p || py) with 0 log 0 = 0; p > 0 implies py > 0 */
		double kl = 0;
		for (int64_t i = lo; i < hi; i++) {
			const float *row = probs + i * (int64_t)k;
			double r = 0;
			for (int c = 0; c < k; c++)
				if (row[c] > 0)
					r += row[c] * (log((double)row[c]) - lpy[c]);
			kl += r;
		}
		score[s] = exp(kl / (double)(hi - lo));
	}
	double mu = 0, var = 0;
	for (int s = 0; s < splits; s++)
		mu += score[s];
	mu /= splits;
	for (int s = 0; s < splits; s++)
		var += (score[s] - mu) * (score[s] - mu);
	*mean = mu;
	*std = sqrt(var / splits);
fail:
	free(py);
	free(lpy);
	free(score);
	return rc;
}
