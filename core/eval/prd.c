/* Improved precision and recall (Kynkaanniemi et al., NeurIPS 2019): each
 * set's manifold is the union of balls around its points with radius the
 * distance to the point's k-th nearest neighbour in the set. Precision =
 * share of fakes inside the real manifold, recall = share of reals inside
 * the fake manifold. See <ganflow/evalstats.h> and docs/eval.md.
 *
 * Distances are squared Euclidean, ||a||^2 + ||b||^2 - 2 a.b, the dot
 * products from sgemm over blocks of rows so the work memory stays near
 * BLOCK_FLOATS floats whatever the set sizes (10k x 10k distances would be
 * 400 MB). Three passes: real-real (real radii), fake-fake (fake radii),
 * then one real-fake pass that settles precision and recall together.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include <ganflow/err.h>
#include <ganflow/evalstats.h>

/* floats of dot products per block: 32 MB */
#define BLOCK_FLOATS ((int64_t)8 << 20)

static int64_t rows_per_block(int64_t ncols)
{
	int64_t b = BLOCK_FLOATS / ncols;
	return b < 1 ? 1 : b;
}

/* Squared norms of the rows of x (n, d), summed in double. */
static void row_norms(double *out, const float *x, int64_t n, int d)
{
	for (int64_t i = 0; i < n; i++) {
		const float *r = x + i * d;
		double s = 0;
		for (int j = 0; j < d; j++)
			s += (double)r[j] * r[j];
		out[i] = s;
	}
}

static inline double sqdist(double na, double nb, float g)
{
	double t = na + nb - 2.0 * (double)g;
	return t > 0 ? t : 0.0;
}

/* radius[i] = (k+1)-th smallest squared distance from row i of x (n, d) to
 * every row of x, itself included (distance ~0), i.e. the k-th nearest
 * other point, as the reference implementation's kthvalue(k + 1). */
static void knn_radii(double *radius, const float *x, const double *norm, int64_t n, int d,
                     int k, float *g, double *top)
{
	int64_t b = rows_per_block(n);
	for (int64_t i0 = 0; i0 < n; i0 += b) {
		int64_t rows = n - i0 < b ? n - i0 : b;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)n, d, 1.0f,
		            x + i0 * d, d, x, d, 0.0f, g, (int)n);
		for (int64_t r = 0; r < rows; r++) {
			const float *gr = g + r * n;
			double ni = norm[i0 + r];
			/* top (k+1): the smallest distances so far, ascending */
			for (int t = 0; t <= k; t++)
				top[t] = INFINITY;
			for (int64_t j = 0; j < n; j++) {
				double v = sqdist(ni, norm[j], gr[j]);
				if (v >= top[k])
					continue;
				int t = k;
				while (t > 0 && top[t - 1] > v) {
					top[t] = top[t - 1];
					t--;
				}
				top[t] = v;
			}
			radius[i0 + r] = top[k];
		}
	}
}

int gf_precision_recall(const float *real, int64_t nr, const float *fake, int64_t nf,
                        int d, int k, double *precision, double *recall)
{
	if (!real || !fake || !precision || !recall)
		return gf_seterr(GF_EPARAM, "precision/recall: NULL argument");
	if (d < 1 || k < 1)
		return gf_seterr(GF_EPARAM, "precision/recall: d=%d, k=%d: both must be >= 1", d, k);
	if (nr <= k || nf <= k)
		return gf_seterr(GF_EPARAM, "precision/recall: %" PRId64 " real and %" PRId64
		                 " generated feature vectors: each set needs more than k=%d",
		                 nr, nf, k);
	if (nr > INT32_MAX || nf > INT32_MAX)
		return gf_seterr(GF_EPARAM, "precision/recall: sets of more than 2^31 rows");

	int rc = 0;
	int64_t nmax = nr > nf ? nr : nf;
	/* every pass uses min(rows_per_block(n), n) * n <= min(max(BLOCK_FLOATS, n), n^2) */
	int64_t gsize = BLOCK_FLOATS > nmax ? BLOCK_FLOATS : nmax;
	if (gsize > nmax * nmax)
		gsize = nmax * nmax;
	double *nrm_r = malloc((size_t)nr * sizeof(double));   /* (nr) squared norms */
	double *nrm_f = malloc((size_t)nf * sizeof(double));   /* (nf) */
	double *rad_r = malloc((size_t)nr * sizeof(double));   /* (nr) squared radii */
	double *rad_f = malloc((size_t)nf * sizeof(double));   /* (nf) */
	unsigned char *in_r = calloc((size_t)nr, 1);           /* (nr) real inside fake manifold */
	unsigned char *in_f = calloc((size_t)nf, 1);           /* (nf) fake inside real manifold */
	double *top = malloc((size_t)(k + 1) * sizeof(double)); /* (k+1) */
	float *g = malloc((size_t)gsize * sizeof(float));      /* (block rows, ncols) dots */
	if (!nrm_r || !nrm_f || !rad_r || !rad_f || !in_r || !in_f || !top || !g) {
		rc = gf_seterr(-ENOMEM, "precision/recall: out of memory");
		goto fail;
	}

	row_norms(nrm_r, real, nr, d);
	row_norms(nrm_f, fake, nf, d);
	for (int64_t i = 0; i < nr; i++)
		if (!isfinite(nrm_r[i])) {
			rc = gf_seterr(GF_ENONFINITE, "precision/recall: real feature row %" PRId64
			               " is not finite", i);
			goto fail;
		}
	for (int64_t i = 0; i < nf; i++)
		if (!isfinite(nrm_f[i])) {
			rc = gf_seterr(GF_ENONFINITE, "precision/recall: generated feature row %" PRId64
			               " is not finite", i);
			goto fail;
		}
	knn_radii(rad_r, real, nrm_r, nr, d, k, g, top);
	knn_radii(rad_f, fake, nrm_f, nf, d, k, g, top);

	/* blocks of real rows against every fake */
	int64_t b = rows_per_block(nf);
	for (int64_t i0 = 0; i0 < nr; i0 += b) {
		int64_t rows = nr - i0 < b ? nr - i0 : b;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)nf, d, 1.0f,
		            real + i0 * d, d, fake, d, 0.0f, g, (int)nf);
		for (int64_t r = 0; r < rows; r++) {
			const float *gr = g + r * nf;
			double ni = nrm_r[i0 + r], ri = rad_r[i0 + r];
			unsigned char covered = 0;
			for (int64_t j = 0; j < nf; j++) {
				double v = sqdist(ni, nrm_f[j], gr[j]);
				in_f[j] |= v <= ri;
				covered |= v <= rad_f[j];
			}
			in_r[i0 + r] = covered;
		}
	}
	int64_t cf = 0, cr = 0;
	for (int64_t j = 0; j < nf; j++)
		cf += in_f[j];
	for (int64_t i = 0; i < nr; i++)
		cr += in_r[i];
	*precision = (double)cf / (double)nf;
	*recall = (double)cr / (double)nr;
fail:
	free(nrm_r);
	free(nrm_f);
	free(rad_r);
	free(rad_f);
	free(in_r);
	free(in_f);
	free(top);
	free(g);
	return rc;
}
