/* Frechet inception distance between two feature Gaussians, with the matrix
 * square root through LAPACK's symmetric eigensolver. See
 * <ganflow/evalstats.h> and docs/eval.md.
 *
 * tr((S_a^1/2 S_b S_a^1/2)^1/2) is computed without forming S_a^1/2:
 * with S_a = E^T diag(l) E (rows of E the unit eigenvectors) and
 * F = diag(sqrt(l)) E, the matrix M = F S_b F^T = E (S_a^1/2 S_b S_a^1/2) E^T
 * is orthogonally similar to S_a^1/2 S_b S_a^1/2, so its eigenvalues are the
 * same and tr sqrt = sum sqrt(eig(M)). M is symmetric positive semi-definite
 * by construction, so a second symmetric eigensolve (values only) finishes.
 * That is one d^3 eigendecomposition with vectors, one without and two d^3
 * products, all in double.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include <ganflow/err.h>
#include <ganflow/evalstats.h>

#include "evalstats_int.h"

/* ---- symmetric eigensolver ---- */

int gf_eval_syev(double *a, int n, double *w, int vectors, const char *what)
{
	const char jobz = vectors ? 'V' : 'N', uplo = 'U';
	int lwork = -1, liwork = -1, info = 0, iwq = 0;
	double wq = 0;
	/* workspace query */
	dsyevd_(&jobz, &uplo, &n, a, &n, w, &wq, &lwork, &iwq, &liwork, &info, 1, 1);
	if (info != 0)
		return gf_seterr(GF_EFAIL, "%s: LAPACK dsyevd workspace query failed (info %d)",
		                 what, info);
	lwork = (int)wq + 1;
	liwork = iwq > 1 ? iwq : 1;
	double *work = malloc((size_t)lwork * sizeof(*work));
	int *iwork = malloc((size_t)liwork * sizeof(*iwork));
	if (!work || !iwork) {
		free(work);
		free(iwork);
		return gf_seterr(-ENOMEM, "%s: out of memory for the eigensolver (n=%d)", what, n);
	}
	dsyevd_(&jobz, &uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, &info, 1, 1);
	free(work);
	free(iwork);
	if (info != 0)
		return gf_seterr(GF_EFAIL, "%s: LAPACK dsyevd did not converge (info %d)", what, info);
	return 0;
}

/* ---- FID ---- */

static const char *set_name(const gf_feat_stats *s, const char *fallback, char *buf, size_t size)
{
	if (s->split[0] == '\0')
		return fallback;
	snprintf(buf, size, "%s (split '%s')", fallback, s->split);
	return buf;
}

static int check_finite(const double *v, size_t len, const char *what)
{
	for (size_t i = 0; i < len; i++)
		if (!isfinite(v[i]))
			return gf_seterr(GF_ENONFINITE, "FID: %s has a non-finite value at %zu", what, i);
	return 0;
}

int gf_fid(const gf_feat_stats *a, const gf_feat_stats *b, double *out)
{
	char na[96], nb[96];
	if (!a || !b || !out || !a->mu || !a->sigma || !b->mu || !b->sigma)
		return gf_seterr(GF_EPARAM, "FID: missing statistics (NULL argument, or freed)");
	if (a->d != b->d)
		return gf_seterr(GF_ESHAPE, "FID: feature dimensions differ (%d and %d):"
		                 " statistics of different classifiers?", a->d, b->d);
	const char *wa = set_name(a, "first set", na, sizeof(na));
	const char *wb = set_name(b, "second set", nb, sizeof(nb));
	int rc;
	if ((rc = gf_evalstats_check_n(a->n, a->d, wa)) || (rc = gf_evalstats_check_n(b->n, b->d, wb)))
		return rc;
	int d = a->d;
	size_t dd = (size_t)d * (size_t)d;
	if ((rc = check_finite(a->mu, d, wa)) || (rc = check_finite(a->sigma, dd, wa)) ||
	    (rc = check_finite(b->mu, d, wb)) || (rc = check_finite(b->sigma, dd, wb)))
		return rc;

	double *f = malloc(dd * sizeof(*f));    /* (d, d) S_a, then F = diag(sqrt l) E */
	double *c = malloc(dd * sizeof(*c));    /* (d, d) F S_b */
	double *m = malloc(dd * sizeof(*m));    /* (d, d) M = F S_b F^T */
	double *w = malloc((size_t)d * sizeof(*w));   /* (d) eigenvalues */
	if (!f || !c || !m || !w) {
		rc = gf_seterr(-ENOMEM, "FID: out of memory for d=%d", d);
		goto fail;
	}

	memcpy(f, a->sigma, dd * sizeof(*f));
	if ((rc = gf_eval_syev(f, d, w, 1, "FID: covariance of the first set")))
		goto fail;
	/* rounding leaves eigenvalues of a PSD matrix slightly below zero: count as 0 */
	for (int j = 0; j < d; j++) {
		double s = w[j] > 0 ? sqrt(w[j]) : 0.0;
		cblas_dscal(d, s, f + (size_t)j * d, 1);
	}
	cblas_dsymm(CblasRowMajor, CblasRight, CblasUpper, d, d, 1.0, b->sigma, d, f, d, 0.0, c, d);
	cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d, d, d, 1.0, c, d, f, d, 0.0, m, d);
	if ((rc = gf_eval_syev(m, d, w, 0, "FID: S_a^1/2 S_b S_a^1/2")))
		goto fail;
	double tr_sqrt = 0;
	for (int j = 0; j < d; j++)
		tr_sqrt += w[j] > 0 ? sqrt(w[j]) : 0.0;

	double dmu = 0, tr_a = 0, tr_b = 0;
	for (int j = 0; j < d; j++) {
		double t = a->mu[j] - b->mu[j];
		dmu += t * t;
		tr_a += a->sigma[(size_t)j * d + j];
		tr_b += b->sigma[(size_t)j * d + j];
	}
	*out = dmu + tr_a + tr_b - 2.0 * tr_sqrt;
	rc = 0;
fail:
	free(f);
	free(c);
	free(m);
	free(w);
	return rc;
}
