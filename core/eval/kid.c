/* Kernel inception distance (Binkowski et al. 2018): the unbiased MMD^2
 * estimate with the cubic polynomial kernel k(a, b) = (a.b / d + 1)^3,
 * averaged over random subsets, as torch-fidelity computes it. See
 * <ganflow/evalstats.h> and docs/eval.md.
 *
 * Per subset pair (X, Y) of m rows each:
 *   MMD^2 = (sum_{i!=j} k(x_i,x_j) + sum_{i!=j} k(y_i,y_j)) / (m (m-1))
 *           - 2 sum_{i,j} k(x_i,y_j) / m^2
 * The Gram matrices come from ssyrk (X X^T, Y Y^T: upper triangle only)
 * and sgemm (X Y^T); cubes and sums are in double in a fixed order.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include <ganflow/err.h>
#include <ganflow/evalstats.h>

#include "evalstats_int.h"

/* ---- subset sampling ---- */

/* Draws m of n row indices without replacement into sel (m): a partial
 * Fisher-Yates shuffle of idx (n), reset to the identity first so the draw
 * depends only on the generator's state (make_refs.py does the same). */
static void draw_subset(uint64_t *state, int64_t *idx, int64_t n, int64_t *sel, int64_t m)
{
	for (int64_t i = 0; i < n; i++)
		idx[i] = i;
	for (int64_t i = 0; i < m; i++) {
		int64_t j = i + (int64_t)gf_eval_uniform(state, (uint64_t)(n - i));
		int64_t t = idx[i];
		idx[i] = idx[j];
		idx[j] = t;
		sel[i] = idx[i];
	}
}

static void gather(float *dst, const float *src, const int64_t *sel, int64_t m, int d)
{
	for (int64_t i = 0; i < m; i++)
		memcpy(dst + i * d, src + sel[i] * d, (size_t)d * sizeof(float));
}

/* ---- kernel sums ---- */

static inline double cube1(float g)
{
	double t = (double)g + 1.0;
	return t * t * t;
}

/* Sum of k over a run of Gram entries g (len), already scaled by 1/d.
 * Four interleaved partial sums, combined in a fixed order: same result
 * every time, and the compiler can keep four additions in flight. */
static double kernel_sum(const float *g, int64_t len)
{
	double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	int64_t i = 0;
	for (; i + 4 <= len; i += 4) {
		s0 += cube1(g[i]);
		s1 += cube1(g[i + 1]);
		s2 += cube1(g[i + 2]);
		s3 += cube1(g[i + 3]);
	}
	for (; i < len; i++)
		s0 += cube1(g[i]);
	return (s0 + s1) + (s2 + s3);
}

/* Sum of k over the strict upper triangle of the (m, m) Gram matrix g. */
static double kernel_sum_offdiag(const float *g, int64_t m)
{
	double s = 0;
	for (int64_t i = 0; i + 1 < m; i++)
		s += kernel_sum(g + i * m + i + 1, m - i - 1);
	return s;
}

/* ---- KID ---- */

int gf_kid(const float *x, int64_t nx, const float *y, int64_t ny, int d,
           int subsets, int subset_size, uint64_t seed, double *mean, double *std)
{
	if (!x || !y || !mean || !std)
		return gf_seterr(GF_EPARAM, "KID: NULL argument");
	if (d < 1 || subsets < 1)
		return gf_seterr(GF_EPARAM, "KID: d=%d, subsets=%d: both must be >= 1", d, subsets);
	if (subset_size < 2)
		return gf_seterr(GF_EPARAM, "KID: subset size %d: must be at least 2", subset_size);
	if (subset_size > nx || subset_size > ny)
		return gf_seterr(GF_EPARAM, "KID: subset size %d is more than the %" PRId64
		                 " %s feature vectors: use kid_subset_size <= %" PRId64
		                 " or a larger n", subset_size, nx < ny ? nx : ny,
		                 nx < ny ? "first set's" : "second set's", nx < ny ? nx : ny);

	int64_t m = subset_size;
	int64_t nmax = nx > ny ? nx : ny;
	int rc = 0;
	int64_t *idx = malloc((size_t)nmax * sizeof(*idx));      /* (nmax) */
	int64_t *sel = malloc((size_t)m * sizeof(*sel));         /* (m) */
	float *xs = malloc((size_t)(m * d) * sizeof(*xs));       /* (m, d) */
	float *ys = malloc((size_t)(m * d) * sizeof(*ys));       /* (m, d) */
	float *g = malloc((size_t)(m * m) * sizeof(*g));         /* (m, m) Gram / d */
	double *mmd = malloc((size_t)subsets * sizeof(*mmd));    /* (subsets) */
	if (!idx || !sel || !xs || !ys || !g || !mmd) {
		rc = gf_seterr(-ENOMEM, "KID: out of memory for subsets of %d x %d", subset_size, d);
		goto fail;
	}

	uint64_t state = seed;
	float alpha = 1.0f / (float)d;
	double mm1 = (double)m * (double)(m - 1), m2 = (double)m * (double)m;
	for (int s = 0; s < subsets; s++) {
		draw_subset(&state, idx, nx, sel, m);
		gather(xs, x, sel, m, d);
		draw_subset(&state, idx, ny, sel, m);
		gather(ys, y, sel, m, d);

		cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)m, d, alpha,
		            xs, d, 0.0f, g, (int)m);
		double kxx = 2.0 * kernel_sum_offdiag(g, m);
		cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)m, d, alpha,
		            ys, d, 0.0f, g, (int)m);
		double kyy = 2.0 * kernel_sum_offdiag(g, m);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)m, d, alpha,
		            xs, d, ys, d, 0.0f, g, (int)m);
		double kxy = kernel_sum(g, m * m);
		mmd[s] = (kxx + kyy) / mm1 - 2.0 * kxy / m2;
		if (!isfinite(mmd[s])) {
			rc = gf_seterr(GF_ENONFINITE, "KID: subset %d gives a non-finite MMD^2:"
			               " NaN or Inf in the features", s);
			goto fail;
		}
	}
	double mu = 0, var = 0;
	for (int s = 0; s < subsets; s++)
		mu += mmd[s];
	mu /= subsets;
	for (int s = 0; s < subsets; s++)
		var += (mmd[s] - mu) * (mmd[s] - mu);
	*mean = mu;
	*std = sqrt(var / subsets);
fail:
	free(idx);
	free(sel);
	free(xs);
	free(ys);
	free(g);
	free(mmd);
	return rc;
}
