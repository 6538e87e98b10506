/* Tests of the evaluation statistics (<ganflow/evalstats.h>).
 *
 * Two kinds of checks: properties with known answers (FID of a set with
 * itself, FID against closed forms computed here on the same statistics,
 * IS of uniform and of confident balanced predictions, KID of one
 * distribution), and values against references computed once with
 * numpy/scipy by tests/fixtures/eval/make_refs.py from the committed
 * feature files beside it. Then the cache file, the hash, and bad input.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <ganflow/err.h>
#include <ganflow/evalstats.h>

/* ---- helpers ---- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* standard normal by Box-Muller */
static double rng_normal(uint64_t *s)
{
	double u1 = ((rng_next(s) >> 11) + 1.0) * 0x1.0p-53;
	double u2 = (rng_next(s) >> 11) * 0x1.0p-53;
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* n rows of N(mu, L L^T): x = mu + L z, L (d, d) lower triangular or NULL (I) */
static float *gaussian(uint64_t *s, int64_t n, int d, const double *mu, const double *l)
{
	float *x = malloc((size_t)(n * d) * sizeof(*x));
	double *z = malloc((size_t)d * sizeof(*z));
	assert_non_null(x);
	assert_non_null(z);
	for (int64_t i = 0; i < n; i++) {
		for (int j = 0; j < d; j++)
			z[j] = rng_normal(s);
		for (int j = 0; j < d; j++) {
			double v = mu ? mu[j] : 0.0;
			if (l)
				for (int t = 0; t <= j; t++)
					v += l[j * d + t] * z[t];
			else
				v += z[j];
			x[i * d + j] = (float)v;
		}
	}
	free(z);
	return x;
}

static void assert_rel(double got, double want, double rel, const char *what)
{
	double err = fabs(got - want) / fmax(fabs(want), 1e-300);
	if (!(err <= rel))
		fail_msg("%s: got %.17g, want %.17g (relative error %.3g > %.3g)", what, got, want,
		         err, rel);
}

static void assert_msg_has(const char *needle)
{
	if (!strstr(gf_errmsg(), needle))
		fail_msg("error message \"%s\" lacks \"%s\"", gf_errmsg(), needle);
}

/* ---- fixtures ---- */

typedef struct {
	int rows, cols;
	void *data;   /* float or int32 (rows, cols) */
} gff;

static gff read_gff(const char *name, int want_dtype)
{
	const char *src = getenv("GF_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof(path), "%s/tests/fixtures/eval/%s", src ? src : ".", name);
	FILE *f = fopen(path, "rb");
	if (!f)
		fail_msg("cannot open fixture %s: %s", path, strerror(errno));
	char magic[4];
	int32_t hd[3];
	assert_int_equal(fread(magic, 1, 4, f), 4);
	assert_memory_equal(magic, "GFF1", 4);
	assert_int_equal(fread(hd, 4, 3, f), 3);
	assert_int_equal(hd[0], want_dtype);
	gff g = { .rows = hd[1], .cols = hd[2] };
	size_t len = (size_t)hd[1] * (size_t)hd[2];
	g.data = malloc(len * 4);
	assert_non_null(g.data);
	assert_int_equal(fread(g.data, 4, len, f), len);
	fclose(f);
	return g;
}

static double ref(const char *name)
{
	const char *src = getenv("GF_SOURCE_DIR");
	char path[4096], line[256], key[128];
	snprintf(path, sizeof(path), "%s/tests/fixtures/eval/refs.txt", src ? src : ".");
	FILE *f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s: %s", path, strerror(errno));
	double v;
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#')
			continue;
		if (sscanf(line, "%127s %lf", key, &v) == 2 && strcmp(key, name) == 0) {
			fclose(f);
			return v;
		}
	}
	fclose(f);
	fail_msg("no reference '%s' in %s", name, path);
	return NAN;
}

static uint64_t ref_u64(const char *name)
{
	const char *src = getenv("GF_SOURCE_DIR");
	char path[4096], line[256], key[128];
	unsigned long long v;
	snprintf(path, sizeof(path), "%s/tests/fixtures/eval/refs.txt", src ? src : ".");
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%127s %llu", key, &v) == 2 && strcmp(key, name) == 0) {
			fclose(f);
			return v;
		}
	fclose(f);
	fail_msg("no reference '%s'", name);
	return 0;
}

typedef struct {
	gff real, fake, real_labels, fake_labels, probs;
	int d;
} fixture;

static int fixture_setup(void **state)
{
	fixture *fx = calloc(1, sizeof(*fx));
	fx->real = read_gff("real.gff", 0);
	fx->fake = read_gff("fake.gff", 0);
	fx->real_labels = read_gff("real_labels.gff", 1);
	fx->fake_labels = read_gff("fake_labels.gff", 1);
	fx->probs = read_gff("probs.gff", 0);
	fx->d = fx->real.cols;
	assert_int_equal(fx->real.rows, (int)ref("n_real"));
	assert_int_equal(fx->fake.rows, (int)ref("n_fake"));
	assert_int_equal(fx->d, (int)ref("d"));
	*state = fx;
	return 0;
}

static int fixture_teardown(void **state)
{
	fixture *fx = *state;
	free(fx->real.data);
	free(fx->fake.data);
	free(fx->real_labels.data);
	free(fx->fake_labels.data);
	free(fx->probs.data);
	free(fx);
	return 0;
}

/* ---- FID: properties and closed forms ---- */

static void test_fid_self_is_zero(void **state)
{
	fixture *fx = *state;
	gf_feat_stats a, b;
	double fid;
	assert_int_equal(gf_feat_stats_compute(fx->real.data, fx->real.rows, fx->d, &a), 0);
	assert_int_equal(gf_feat_stats_compute(fx->real.data, fx->real.rows, fx->d, &b), 0);
	assert_int_equal(gf_fid(&a, &a, &fid), 0);
	assert_true(fabs(fid) < 1e-6);
	assert_int_equal(gf_fid(&a, &b, &fid), 0);
	assert_true(fabs(fid) < 1e-6);
	/* also for d = 128 Gaussian features, closer to the evaluator's case */
	uint64_t s = 7;
	float *x = gaussian(&s, 2000, 128, NULL, NULL);
	gf_feat_stats c;
	assert_int_equal(gf_feat_stats_compute(x, 2000, 128, &c), 0);
	assert_int_equal(gf_fid(&c, &c, &fid), 0);
	assert_true(fabs(fid) < 1e-6);
	free(x);
	gf_feat_stats_free(&a);
	gf_feat_stats_free(&b);
	gf_feat_stats_free(&c);
}

/* d = 2: tr sqrt(S_a^1/2 S_b S_a^1/2) = sqrt(tr(S_a S_b) + 2 sqrt(det S_a det S_b))
 * (its two eigenvalues have sum tr(S_a S_b) and product sqrt(det S_a det S_b)),
 * a closed form on the sample statistics whatever they are. */
static void test_fid_closed_form_2d(void **state)
{
	(void)state;
	uint64_t s = 11;
	double mu1[2] = { 1.0, -2.0 }, mu2[2] = { 0.5, 0.25 };
	double l1[4] = { 2.0, 0, 0.7, 0.5 }, l2[4] = { 1.0, 0, -0.9, 1.5 };
	float *x = gaussian(&s, 5000, 2, mu1, l1);
	float *y = gaussian(&s, 4000, 2, mu2, l2);
	gf_feat_stats a, b;
	double fid;
	assert_int_equal(gf_feat_stats_compute(x, 5000, 2, &a), 0);
	assert_int_equal(gf_feat_stats_compute(y, 4000, 2, &b), 0);
	assert_int_equal(gf_fid(&a, &b, &fid), 0);

	const double *p = a.sigma, *q = b.sigma;
	double pq00 = p[0] * q[0] + p[1] * q[2], pq11 = p[2] * q[1] + p[3] * q[3];
	double det = (p[0] * p[3] - p[1] * p[2]) * (q[0] * q[3] - q[1] * q[2]);
	double trsqrt = sqrt(pq00 + pq11 + 2.0 * sqrt(det));
	double dm = (a.mu[0] - b.mu[0]) * (a.mu[0] - b.mu[0]) + (a.mu[1] - b.mu[1]) * (a.mu[1] - b.mu[1]);
	double want = dm + p[0] + p[3] + q[0] + q[3] - 2.0 * trsqrt;
	assert_rel(fid, want, 1e-6, "FID of two 2-d Gaussian samples vs closed form");
	/* and it estimates the population value (loose: sampling error) */
	double pa[4] = { 4.0, 1.4, 1.4, 0.74 }, pb[4] = { 1.0, -0.9, -0.9, 3.06 };
	double ppq = pa[0] * pb[0] + pa[1] * pb[2] + pa[2] * pb[1] + pa[3] * pb[3];
	double pdet = (pa[0] * pa[3] - pa[1] * pa[2]) * (pb[0] * pb[3] - pb[1] * pb[2]);
	double pop = 0.25 + 5.0625 + pa[0] + pa[3] + pb[0] + pb[3] - 2.0 * sqrt(ppq + 2.0 * sqrt(pdet));
	assert_rel(fid, pop, 0.05, "FID of samples vs population FID");
	free(x);
	free(y);
	gf_feat_stats_free(&a);
	gf_feat_stats_free(&b);
}

/* Dense d x d helpers for the independent square root below. */
static void matmul(double *c, const double *a, const double *b, int d)
{
	for (int i = 0; i < d; i++)
		for (int j = 0; j < d; j++) {
			double s = 0;
			for (int t = 0; t < d; t++)
				s += a[i * d + t] * b[t * d + j];
			c[i * d + j] = s;
		}
}

/* inverse by Gauss-Jordan with partial pivoting */
static void matinv(double *inv, const double *a, int d)
{
	double *m = malloc((size_t)d * d * sizeof(double));
	memcpy(m, a, (size_t)d * d * sizeof(double));
	for (int i = 0; i < d * d; i++)
		inv[i] = (i % (d + 1)) == 0;
	for (int c = 0; c < d; c++) {
		int p = c;
		for (int r = c + 1; r < d; r++)
			if (fabs(m[r * d + c]) > fabs(m[p * d + c]))
				p = r;
		for (int j = 0; j < d; j++) {
			double t = m[c * d + j]; m[c * d + j] = m[p * d + j]; m[p * d + j] = t;
			t = inv[c * d + j]; inv[c * d + j] = inv[p * d + j]; inv[p * d + j] = t;
		}
		double piv = m[c * d + c];
		for (int j = 0; j < d; j++) {
			m[c * d + j] /= piv;
			inv[c * d + j] /= piv;
		}
		for (int r = 0; r < d; r++) {
			if (r == c)
				continue;
			double f = m[r * d + c];
			for (int j = 0; j < d; j++) {
				m[r * d + j] -= f * m[c * d + j];
				inv[r * d + j] -= f * inv[c * d + j];
			}
		}
	}
	free(m);
}

/* tr sqrt(A) of A = S_a S_b (non-symmetric, positive eigenvalues) by the
 * Denman-Beavers iteration: no eigensolver, nothing shared with the code
 * under test. */
static double trace_sqrt_db(const double *a, int d)
{
	size_t sz = (size_t)d * d * sizeof(double);
	double *y = malloc(sz), *z = malloc(sz), *yi = malloc(sz), *zi = malloc(sz);
	memcpy(y, a, sz);
	for (int i = 0; i < d * d; i++)
		z[i] = (i % (d + 1)) == 0;
	for (int it = 0; it < 100; it++) {
		matinv(yi, y, d);
		matinv(zi, z, d);
		double delta = 0, norm = 0;
		for (int i = 0; i < d * d; i++) {
			double ny = 0.5 * (y[i] + zi[i]);
			delta += (ny - y[i]) * (ny - y[i]);
			norm += ny * ny;
			y[i] = ny;
			z[i] = 0.5 * (z[i] + yi[i]);
		}
		if (delta <= 1e-30 * norm)
			break;
	}
	double tr = 0;
	for (int i = 0; i < d; i++)
		tr += y[i * d + i];
	free(y); free(z); free(yi); free(zi);
	return tr;
}

/* Correlated d = 24 Gaussian samples: sample covariances that do not
 * commute; the reference is the definition evaluated on the same sample
 * statistics with Denman-Beavers in place of the eigensolver. */
static void test_fid_gaussians_vs_definition(void **state)
{
	(void)state;
	enum { D = 24 };
	uint64_t s = 23;
	double mu1[D], mu2[D], l1[D * D] = { 0 }, l2[D * D] = { 0 };
	for (int i = 0; i < D; i++) {
		mu1[i] = rng_normal(&s);
		mu2[i] = mu1[i] + 0.3 * rng_normal(&s);
		for (int j = 0; j < i; j++) {
			l1[i * D + j] = 0.3 * rng_normal(&s);
			l2[i * D + j] = 0.3 * rng_normal(&s);
		}
		l1[i * D + i] = 1.0 + 0.5 * (i % 3);
		l2[i * D + i] = 0.8 + 0.4 * (i % 4);
	}
	float *x = gaussian(&s, 6000, D, mu1, l1);
	float *y = gaussian(&s, 5000, D, mu2, l2);
	gf_feat_stats a, b;
	double fid;
	assert_int_equal(gf_feat_stats_compute(x, 6000, D, &a), 0);
	assert_int_equal(gf_feat_stats_compute(y, 5000, D, &b), 0);
	assert_int_equal(gf_fid(&a, &b, &fid), 0);

	double *prod = malloc(D * D * sizeof(double));
	matmul(prod, a.sigma, b.sigma, D);
	double want = 0;
	for (int i = 0; i < D; i++)
		want += (a.mu[i] - b.mu[i]) * (a.mu[i] - b.mu[i]) + a.sigma[i * D + i] + b.sigma[i * D + i];
	want -= 2.0 * trace_sqrt_db(prod, D);
	assert_rel(fid, want, 1e-6, "FID of two 24-d Gaussian samples vs Denman-Beavers");
	/* symmetric in its arguments */
	double fid_ba;
	assert_int_equal(gf_fid(&b, &a, &fid_ba), 0);
	assert_rel(fid_ba, fid, 1e-9, "FID(b, a) vs FID(a, b)");
	free(prod);
	free(x);
	free(y);
	gf_feat_stats_free(&a);
	gf_feat_stats_free(&b);
}

/* Commuting covariances Q diag(a) Q^T and Q diag(b) Q^T (Q a random
 * Householder reflection): FID = ||mu_a - mu_b||^2 + sum (sqrt a - sqrt b)^2. */
static void test_fid_commuting_closed_form(void **state)
{
	(void)state;
	enum { D = 64 };
	uint64_t s = 5;
	double v[D], vv = 0, ea[D], eb[D];
	for (int i = 0; i < D; i++) {
		v[i] = rng_normal(&s);
		vv += v[i] * v[i];
		ea[i] = 0.1 + 3.0 * (rng_next(&s) >> 11) * 0x1.0p-53;
		eb[i] = 0.1 + 3.0 * (rng_next(&s) >> 11) * 0x1.0p-53;
	}
	gf_feat_stats a = { .d = D, .n = 10000 }, b = { .d = D, .n = 10000 };
	a.mu = calloc(D, sizeof(double));
	b.mu = calloc(D, sizeof(double));
	a.sigma = calloc(D * D, sizeof(double));
	b.sigma = calloc(D * D, sizeof(double));
	double want = 0;
	for (int i = 0; i < D; i++) {
		b.mu[i] = 0.01 * i;
		want += b.mu[i] * b.mu[i] + (sqrt(ea[i]) - sqrt(eb[i])) * (sqrt(ea[i]) - sqrt(eb[i]));
	}
	/* S = Q diag(e) Q, Q = I - 2 v v^T / v.v (symmetric, orthogonal) */
	for (int i = 0; i < D; i++)
		for (int j = 0; j < D; j++) {
			double sa = 0, sb = 0;
			for (int t = 0; t < D; t++) {
				double qit = (i == t) - 2.0 * v[i] * v[t] / vv;
				double qtj = (t == j) - 2.0 * v[t] * v[j] / vv;
				sa += qit * ea[t] * qtj;
				sb += qit * eb[t] * qtj;
			}
			a.sigma[i * D + j] = sa;
			b.sigma[i * D + j] = sb;
		}
	/* make them exactly symmetric, as computed statistics are */
	for (int i = 0; i < D; i++)
		for (int j = 0; j < i; j++) {
			a.sigma[i * D + j] = a.sigma[j * D + i];
			b.sigma[i * D + j] = b.sigma[j * D + i];
		}
	double fid;
	assert_int_equal(gf_fid(&a, &b, &fid), 0);
	assert_rel(fid, want, 1e-6, "FID of commuting covariances vs closed form");
	gf_feat_stats_free(&a);
	gf_feat_stats_free(&b);
}

/* A rank-deficient covariance (a duplicated feature column) has a zero
 * eigenvalue that rounding may push below zero: clamped, FID stays finite. */
static void test_fid_singular_clamped(void **state)
{
	(void)state;
	enum { N = 3000, D = 16 };
	uint64_t s = 99;
	float *x = gaussian(&s, N, D, NULL, NULL);
	for (int i = 0; i < N; i++)
		x[i * D + 1] = x[i * D + 0];
	gf_feat_stats a;
	double fid;
	assert_int_equal(gf_feat_stats_compute(x, N, D, &a), 0);
	assert_int_equal(gf_fid(&a, &a, &fid), 0);
	assert_true(isfinite(fid));
	assert_true(fabs(fid) < 1e-6);
	free(x);
	gf_feat_stats_free(&a);
}

/* ---- values against numpy/scipy ---- */

static void test_stats_refs(void **state)
{
	fixture *fx = *state;
	gf_feat_stats a;
	assert_int_equal(gf_feat_stats_compute(fx->real.data, fx->real.rows, fx->d, &a), 0);
	assert_int_equal(a.n, fx->real.rows);
	assert_int_equal(a.d, fx->d);
	assert_null(a.feats);
	assert_rel(a.mu[5], ref("real_mu_5"), 1e-12, "mu[5]");
	assert_rel(a.sigma[1 * fx->d + 2], ref("real_sigma_1_2"), 1e-10, "sigma[1][2]");
	assert_true(a.sigma[1 * fx->d + 2] == a.sigma[2 * fx->d + 1]);
	double tr = 0;
	for (int i = 0; i < fx->d; i++)
		tr += a.sigma[i * fx->d + i];
	assert_rel(tr, ref("real_sigma_trace"), 1e-12, "trace of sigma");
	gf_feat_stats_free(&a);
	gf_feat_stats_free(&a);   /* twice is harmless */
}

static void test_fid_refs(void **state)
{
	fixture *fx = *state;
	int d = fx->d;
	gf_feat_stats a, b, h1, h2;
	double fid;
	assert_int_equal(gf_feat_stats_compute(fx->real.data, fx->real.rows, d, &a), 0);
	assert_int_equal(gf_feat_stats_compute(fx->fake.data, fx->fake.rows, d, &b), 0);
	assert_int_equal(gf_fid(&a, &b, &fid), 0);
	assert_rel(fid, ref("fid"), 1e-6, "FID vs scipy");

	const float *r = fx->real.data;
	assert_int_equal(gf_feat_stats_compute(r, 500, d, &h1), 0);
	assert_int_equal(gf_feat_stats_compute(r + 500 * d, 500, d, &h2), 0);
	assert_int_equal(gf_fid(&h1, &h2, &fid), 0);
	assert_rel(fid, ref("fid_real_half"), 1e-6, "FID of the two halves vs scipy");

	/* per-class FID: per-class statistics on both sides */
	for (int c = 0; c < 4; c++) {
		gf_feat_stats ca, cb;
		char name[32];
		assert_int_equal(gf_feat_stats_compute_label(fx->real.data, fx->real_labels.data,
		                                             fx->real.rows, d, c, &ca), 0);
		assert_int_equal(gf_feat_stats_compute_label(fx->fake.data, fx->fake_labels.data,
		                                             fx->fake.rows, d, c, &cb), 0);
		assert_int_equal(ca.n, fx->real.rows / 4);
		assert_int_equal(gf_fid(&ca, &cb, &fid), 0);
		snprintf(name, sizeof(name), "fid_class_%d", c);
		assert_rel(fid, ref(name), 1e-6, name);
		gf_feat_stats_free(&ca);
		gf_feat_stats_free(&cb);
	}
	gf_feat_stats_free(&a);
	gf_feat_stats_free(&b);
	gf_feat_stats_free(&h1);
	gf_feat_stats_free(&h2);
}

static void test_is_refs(void **state)
{
	fixture *fx = *state;
	double m, s;
	assert_int_equal(fx->probs.cols, (int)ref("k"));
	assert_int_equal(gf_inception_score(fx->probs.data, fx->probs.rows, fx->probs.cols,
	                                    (int)ref("is_splits"), &m, &s), 0);
	assert_rel(m, ref("is_mean"), 1e-9, "IS mean vs numpy");
	assert_rel(s, ref("is_std"), 1e-7, "IS std vs numpy");
}

static void test_kid_refs(void **state)
{
	fixture *fx = *state;
	double m, s, m2, s2;
	int subsets = (int)ref("kid_subsets"), size = (int)ref("kid_subset_size");
	uint64_t seed = ref_u64("kid_seed");
	assert_int_equal(gf_kid(fx->real.data, fx->real.rows, fx->fake.data, fx->fake.rows, fx->d,
	                        subsets, size, seed, &m, &s), 0);
	/* float32 dot products against float64 numpy */
	assert_rel(m, ref("kid_mean"), 1e-6, "KID mean vs numpy");
	assert_rel(s, ref("kid_std"), 1e-6, "KID std vs numpy");
	/* same seed, same bits */
	assert_int_equal(gf_kid(fx->real.data, fx->real.rows, fx->fake.data, fx->fake.rows, fx->d,
	                        subsets, size, seed, &m2, &s2), 0);
	assert_memory_equal(&m, &m2, sizeof(m));
	assert_memory_equal(&s, &s2, sizeof(s));
	/* another seed, other subsets */
	assert_int_equal(gf_kid(fx->real.data, fx->real.rows, fx->fake.data, fx->fake.rows, fx->d,
	                        subsets, size, seed + 1, &m2, &s2), 0);
	assert_true(m2 != m);
}

static void test_pr_refs(void **state)
{
	fixture *fx = *state;
	double p, r;
	assert_int_equal(gf_precision_recall(fx->real.data, fx->real.rows, fx->fake.data,
	                                     fx->fake.rows, fx->d, (int)ref("pr_k"), &p, &r), 0);
	/* within the bounds of ball tests near flipping (see make_refs.py) */
	double eps = 1e-12;
	if (p < ref("precision_lo") - eps || p > ref("precision_hi") + eps)
		fail_msg("precision %.6f outside numpy's [%.6f, %.6f] (exact %.6f)", p,
		         ref("precision_lo"), ref("precision_hi"), ref("precision"));
	if (r < ref("recall_lo") - eps || r > ref("recall_hi") + eps)
		fail_msg("recall %.6f outside numpy's [%.6f, %.6f] (exact %.6f)", r,
		         ref("recall_lo"), ref("recall_hi"), ref("recall"));
	/* a set against itself is entirely inside its own manifold */
	assert_int_equal(gf_precision_recall(fx->real.data, fx->real.rows, fx->real.data,
	                                     fx->real.rows, fx->d, 3, &p, &r), 0);
	assert_true(p == 1.0 && r == 1.0);
}

/* Brute force in double: radii (k+1)-th smallest exact squared distance,
 * counted with every radius scaled by (1 + tol). */
static void pr_brute(const float *r, int nr, const float *f, int nf, int d, int k, double tol,
                     double *prec, double *rec)
{
	double *rr = malloc(nr * sizeof(double)), *rf = malloc(nf * sizeof(double));
	double *top = malloc((k + 1) * sizeof(double));
	for (int set = 0; set < 2; set++) {
		const float *x = set ? f : r;
		int n = set ? nf : nr;
		double *rad = set ? rf : rr;
		for (int i = 0; i < n; i++) {
			for (int t = 0; t <= k; t++)
				top[t] = INFINITY;
			for (int j = 0; j < n; j++) {
				double v = 0;
				for (int c = 0; c < d; c++)
					v += ((double)x[i * d + c] - x[j * d + c]) * ((double)x[i * d + c] - x[j * d + c]);
				int t = k;
				if (v >= top[k])
					continue;
				while (t > 0 && top[t - 1] > v) {
					top[t] = top[t - 1];
					t--;
				}
				top[t] = v;
			}
			rad[i] = top[k] * (1 + tol);
		}
	}
	int cf = 0, cr = 0;
	unsigned char *inf = calloc(nf, 1);
	for (int i = 0; i < nr; i++) {
		int cov = 0;
		for (int j = 0; j < nf; j++) {
			double v = 0;
			for (int c = 0; c < d; c++)
				v += ((double)r[i * d + c] - f[j * d + c]) * ((double)r[i * d + c] - f[j * d + c]);
			inf[j] |= v <= rr[i];
			cov |= v <= rf[j];
		}
		cr += cov;
	}
	for (int j = 0; j < nf; j++)
		cf += inf[j];
	*prec = (double)cf / nf;
	*rec = (double)cr / nr;
	free(rr); free(rf); free(top); free(inf);
}

/* Sets large enough for several row blocks of different heights in the
 * three passes, against brute force in double. */
static void test_pr_blocks_vs_brute_force(void **state)
{
	(void)state;
	enum { NR = 5000, NF = 3000, D = 4 };
	uint64_t s = 77;
	double shift[D] = { 0.3, 0, 0, 0 };
	float *r = gaussian(&s, NR, D, NULL, NULL);
	float *f = gaussian(&s, NF, D, shift, NULL);
	double p, rc, plo, rlo, phi, rhi;
	assert_int_equal(gf_precision_recall(r, NR, f, NF, D, 3, &p, &rc), 0);
	pr_brute(r, NR, f, NF, D, 3, -1e-4, &plo, &rlo);
	pr_brute(r, NR, f, NF, D, 3, 1e-4, &phi, &rhi);
	if (p < plo || p > phi || rc < rlo || rc > rhi)
		fail_msg("precision %.6f recall %.6f; brute force [%.6f, %.6f] [%.6f, %.6f]",
		         p, rc, plo, phi, rlo, rhi);
	assert_true(p > 0.3 && p < 1.0 && rc > 0.3 && rc < 1.0);
	free(r);
	free(f);
}

static void test_eval_metrics(void **state)
{
	fixture *fx = *state;
	gf_feat_stats real;
	gf_eval_result res;
	assert_int_equal(gf_feat_stats_compute(fx->real.data, fx->real.rows, fx->d, &real), 0);
	gf_eval_opts o = gf_eval_opts_default();
	o.kid_subsets = (int)ref("kid_subsets");
	o.kid_subset_size = (int)ref("kid_subset_size");
	o.kid_seed = ref_u64("kid_seed");
	o.pr_k = (int)ref("pr_k");

	/* KID and PR need the real features */
	assert_int_equal(gf_eval_metrics(&real, fx->fake.data, fx->fake.rows, fx->d,
	                                 fx->probs.data, fx->probs.cols, &o, &res), GF_EPARAM);
	assert_msg_has("real features");

	size_t bytes = (size_t)fx->real.rows * fx->d * sizeof(float);
	real.feats = malloc(bytes);
	memcpy(real.feats, fx->real.data, bytes);
	assert_int_equal(gf_eval_metrics(&real, fx->fake.data, fx->fake.rows, fx->d,
	                                 fx->probs.data, fx->probs.cols, &o, &res), 0);
	assert_int_equal(res.n, fx->fake.rows);
	assert_int_equal(res.n_real, fx->real.rows);
	assert_rel(res.fid, ref("fid"), 1e-6, "metrics: FID");
	assert_rel(res.is_mean, ref("is_mean"), 1e-9, "metrics: IS");
	assert_rel(res.kid_mean, ref("kid_mean"), 1e-6, "metrics: KID");
	assert_true(res.precision >= ref("precision_lo") - 1e-12 &&
	            res.precision <= ref("precision_hi") + 1e-12);
	assert_true(res.recall >= ref("recall_lo") - 1e-12 && res.recall <= ref("recall_hi") + 1e-12);
	assert_true(res.sec_stats >= 0 && res.sec_fid >= 0 && res.sec_kid > 0 && res.sec_pr > 0);

	/* FID only: no probabilities, no KID, no PR */
	o.kid_subsets = 0;
	o.pr_k = 0;
	assert_int_equal(gf_eval_metrics(&real, fx->fake.data, fx->fake.rows, fx->d,
	                                 NULL, 0, &o, &res), 0);
	assert_true(isnan(res.is_mean) && isnan(res.kid_mean) && isnan(res.precision));
	assert_rel(res.fid, ref("fid"), 1e-6, "metrics: FID only");
	/* n <= d fails before any work, suggesting a larger n */
	assert_int_equal(gf_eval_metrics(&real, fx->fake.data, 20, fx->d, NULL, 0, &o, &res),
	                 GF_EPARAM);
	assert_msg_has("n >= 33");
	gf_feat_stats_free(&real);
}

/* ---- IS and KID: properties ---- */

static void test_is_uniform_and_confident(void **state)
{
	(void)state;
	enum { N = 1000, K = 10 };
	float *p = malloc(N * K * sizeof(float));
	double m, s;
	for (int i = 0; i < N * K; i++)
		p[i] = 1.0f / K;
	assert_int_equal(gf_inception_score(p, N, K, 10, &m, &s), 0);
	assert_true(fabs(m - 1.0) < 1e-6);
	assert_true(s < 1e-6);
	/* confident (one-hot) and balanced in every split: IS = k */
	memset(p, 0, N * K * sizeof(float));
	for (int i = 0; i < N; i++)
		p[i * K + i % K] = 1.0f;
	assert_int_equal(gf_inception_score(p, N, K, 10, &m, &s), 0);
	assert_true(fabs(m - K) < 1e-9);
	assert_true(s < 1e-9);
	/* confident but all one class: IS = 1 */
	memset(p, 0, N * K * sizeof(float));
	for (int i = 0; i < N; i++)
		p[i * K + 3] = 1.0f;
	assert_int_equal(gf_inception_score(p, N, K, 10, &m, &s), 0);
	assert_true(fabs(m - 1.0) < 1e-9);
	free(p);
}

static void test_kid_same_distribution(void **state)
{
	(void)state;
	enum { N = 2000, D = 16 };
	uint64_t s = 31;
	float *x = gaussian(&s, N, D, NULL, NULL);
	float *y = gaussian(&s, N, D, NULL, NULL);
	double shift[D];
	for (int j = 0; j < D; j++)
		shift[j] = 0.5;
	float *z = gaussian(&s, N, D, shift, NULL);
	double m, sd;
	assert_int_equal(gf_kid(x, N, y, N, D, 50, 500, 1, &m, &sd), 0);
	if (!(fabs(m) <= sd))
		fail_msg("KID of one distribution %g, std %g: not within one std of 0", m, sd);
	assert_true(sd > 0);
	/* a shifted distribution is far from 0 */
	double m2, sd2;
	assert_int_equal(gf_kid(x, N, z, N, D, 50, 500, 1, &m2, &sd2), 0);
	assert_true(m2 > 10 * sd2);
	free(x);
	free(y);
	free(z);
}

/* ---- the cache file and the hash ---- */

static void test_hash(void **state)
{
	(void)state;
	assert_true(gf_hash64("ganflow", 7, GF_HASH64_INIT) == ref_u64("hash_ganflow"));
	/* chaining = hashing the concatenation */
	uint64_t h = gf_hash64("gan", 3, GF_HASH64_INIT);
	assert_true(gf_hash64("flow", 4, h) == ref_u64("hash_ganflow"));
	const char *src = getenv("GF_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof(path), "%s/tests/fixtures/eval/real.gff", src ? src : ".");
	assert_int_equal(gf_hash64_file(path, GF_HASH64_INIT, &h), 0);
	assert_true(h == ref_u64("hash_real_gff"));
	assert_int_equal(gf_hash64_file("/nonexistent/ganflow/file", GF_HASH64_INIT, &h), -ENOENT);
	assert_msg_has("/nonexistent/ganflow/file");
}

static void flip_byte(const char *path, long off)
{
	FILE *f = fopen(path, "r+b");
	assert_non_null(f);
	fseek(f, off, SEEK_SET);
	int c = fgetc(f);
	fseek(f, off, SEEK_SET);
	fputc(c ^ 0x40, f);
	fclose(f);
}

static void test_cache_file(void **state)
{
	fixture *fx = *state;
	char dir[] = "/tmp/gf_evalstats_XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[256], bad[256];
	snprintf(path, sizeof(path), "%s/test.gfstats", dir);
	snprintf(bad, sizeof(bad), "%s/bad.gfstats", dir);

	gf_feat_stats a, b;
	assert_int_equal(gf_feat_stats_compute(fx->real.data, fx->real.rows, fx->d, &a), 0);
	a.key = 0x1234abcd5678ef90ULL;
	snprintf(a.split, sizeof(a.split), "test");
	assert_int_equal(gf_feat_stats_save(path, &a, fx->real.data), 0);
	assert_int_equal(gf_feat_stats_load(path, a.key, "test", &b), 0);
	assert_int_equal(b.d, a.d);
	assert_int_equal(b.n, a.n);
	assert_true(b.key == a.key);
	assert_string_equal(b.split, "test");
	assert_memory_equal(b.mu, a.mu, a.d * sizeof(double));
	assert_memory_equal(b.sigma, a.sigma, (size_t)a.d * a.d * sizeof(double));
	assert_non_null(b.feats);
	assert_memory_equal(b.feats, fx->real.data, (size_t)a.n * a.d * sizeof(float));
	gf_feat_stats_free(&b);
	/* key 0 and split NULL: no check */
	assert_int_equal(gf_feat_stats_load(path, 0, NULL, &b), 0);
	gf_feat_stats_free(&b);

	/* stale: other key, other split */
	assert_int_equal(gf_feat_stats_load(path, a.key + 1, "test", &b), GF_ENOTFOUND);
	assert_msg_has("stale");
	assert_null(b.mu);
	assert_int_equal(gf_feat_stats_load(path, a.key, "train", &b), GF_ENOTFOUND);
	assert_msg_has("'test'");
	/* missing */
	assert_int_equal(gf_feat_stats_load(bad, 0, NULL, &b), -ENOENT);

	/* without features; then damaged copies */
	assert_int_equal(gf_feat_stats_save(bad, &a, NULL), 0);
	assert_int_equal(gf_feat_stats_load(bad, a.key, "test", &b), 0);
	assert_null(b.feats);
	gf_feat_stats_free(&b);
	flip_byte(bad, 104 + 8 * 40);
	assert_int_equal(gf_feat_stats_load(bad, a.key, "test", &b), GF_ECORRUPT);
	assert_msg_has("checksum");
	assert_int_equal(truncate(bad, 2000), 0);
	assert_int_equal(gf_feat_stats_load(bad, a.key, "test", &b), GF_ECORRUPT);
	assert_msg_has("truncated");
	assert_int_equal(gf_feat_stats_save(bad, &a, NULL), 0);
	flip_byte(bad, 0);
	assert_int_equal(gf_feat_stats_load(bad, 0, NULL, &b), GF_ECORRUPT);
	assert_msg_has("GFSTATS1");

	/* unwritable place */
	assert_true(gf_feat_stats_save("/nonexistent/dir/x.gfstats", &a, NULL) < 0);
	assert_msg_has("/nonexistent/dir/x.gfstats");

	gf_feat_stats_free(&a);
	unlink(path);
	unlink(bad);
	rmdir(dir);
}

/* ---- bad input ---- */

static void test_bad_input(void **state)
{
	fixture *fx = *state;
	int d = fx->d;
	gf_feat_stats a, small, other;
	double v, w;

	/* n not more than d: clear error suggesting a larger n */
	assert_int_equal(gf_feat_stats_compute(fx->real.data, fx->real.rows, d, &a), 0);
	assert_int_equal(gf_feat_stats_compute(fx->fake.data, 20, d, &small), 0);
	assert_int_equal(gf_fid(&a, &small, &v), GF_EPARAM);
	assert_msg_has("n=20");
	assert_msg_has("feature dimension 32");
	assert_msg_has("n >= 33");
	snprintf(small.split, sizeof(small.split), "tiny");
	assert_int_equal(gf_fid(&small, &a, &v), GF_EPARAM);
	assert_msg_has("tiny");
	assert_int_equal(gf_feat_stats_compute(fx->fake.data, 32, d, &other), 0);
	assert_int_equal(gf_fid(&a, &other, &v), GF_EPARAM);   /* n == d */
	gf_feat_stats_free(&other);
	assert_int_equal(gf_evalstats_check_n(500, 512, "generated images"), GF_EPARAM);
	assert_msg_has("generated images: n=500 is not more than the feature dimension 512");
	assert_msg_has("n >= 513");
	assert_int_equal(gf_evalstats_check_n(513, 512, "x"), 0);

	/* mismatched d */
	assert_int_equal(gf_feat_stats_compute(fx->fake.data, fx->fake.rows * d / 16, 16, &other), 0);
	assert_int_equal(gf_fid(&a, &other, &v), GF_ESHAPE);
	assert_msg_has("32 and 16");
	gf_feat_stats_free(&other);

	/* NULL and sizes */
	assert_int_equal(gf_feat_stats_compute(NULL, 100, d, &other), GF_EPARAM);
	assert_null(other.mu);
	assert_int_equal(gf_feat_stats_compute(fx->real.data, 1, d, &other), GF_EPARAM);
	assert_int_equal(gf_feat_stats_compute(fx->real.data, 0, d, &other), GF_EPARAM);
	assert_int_equal(gf_feat_stats_compute(fx->real.data, 100, 0, &other), GF_EPARAM);
	assert_int_equal(gf_feat_stats_compute(fx->real.data, 100, d, NULL), GF_EPARAM);
	assert_int_equal(gf_feat_stats_compute_label(fx->real.data, fx->real_labels.data,
	                                             fx->real.rows, d, 7, &other), GF_EPARAM);
	assert_msg_has("label 7");
	assert_int_equal(gf_fid(&a, NULL, &v), GF_EPARAM);
	assert_int_equal(gf_fid(&a, &a, NULL), GF_EPARAM);
	gf_feat_stats freed = { 0 };
	assert_int_equal(gf_fid(&a, &freed, &v), GF_EPARAM);

	/* NaN in the features */
	float *x = malloc((size_t)fx->real.rows * d * sizeof(float));
	memcpy(x, fx->real.data, (size_t)fx->real.rows * d * sizeof(float));
	x[17 * d + 3] = NAN;
	assert_int_equal(gf_feat_stats_compute(x, fx->real.rows, d, &other), GF_ENONFINITE);
	assert_msg_has("row 17 column 3");
	assert_int_equal(gf_kid(x, fx->real.rows, x, fx->real.rows, d, 2, fx->real.rows, 1, &v, &w),
	                 GF_ENONFINITE);
	assert_int_equal(gf_precision_recall(x, fx->real.rows, fx->fake.data, fx->fake.rows, d, 3,
	                                     &v, &w), GF_ENONFINITE);
	free(x);

	/* IS: logits, sizes */
	float logits[4 * 3] = { 1, 2, 3, 0.5f, -1, 2, 0, 0, 1, 1, 1, 1 };
	assert_int_equal(gf_inception_score(logits, 4, 3, 1, &v, &w), GF_EPARAM);
	assert_msg_has("logits");
	assert_int_equal(gf_inception_score(fx->probs.data, 5, fx->probs.cols, 10, &v, &w), GF_EPARAM);
	assert_int_equal(gf_inception_score(NULL, 5, 3, 1, &v, &w), GF_EPARAM);
	assert_int_equal(gf_inception_score(fx->probs.data, fx->probs.rows, 0, 1, &v, &w), GF_EPARAM);

	/* KID: subsets larger than a set, tiny subsets, NULL */
	assert_int_equal(gf_kid(fx->real.data, fx->real.rows, fx->fake.data, fx->fake.rows, d,
	                        10, 1000, 1, &v, &w), GF_EPARAM);
	assert_msg_has("kid_subset_size <= 900");
	assert_int_equal(gf_kid(fx->real.data, fx->real.rows, fx->fake.data, fx->fake.rows, d,
	                        10, 1, 1, &v, &w), GF_EPARAM);
	assert_int_equal(gf_kid(fx->real.data, fx->real.rows, fx->fake.data, fx->fake.rows, d,
	                        0, 100, 1, &v, &w), GF_EPARAM);
	assert_int_equal(gf_kid(NULL, 10, fx->fake.data, fx->fake.rows, d, 1, 5, 1, &v, &w), GF_EPARAM);

	/* PR: k too large for the sets, NULL */
	assert_int_equal(gf_precision_recall(fx->real.data, 3, fx->fake.data, fx->fake.rows, d, 3,
	                                     &v, &w), GF_EPARAM);
	assert_msg_has("k=3");
	assert_int_equal(gf_precision_recall(fx->real.data, 10, fx->fake.data, 10, d, 0, &v, &w),
	                 GF_EPARAM);
	assert_int_equal(gf_precision_recall(fx->real.data, 10, NULL, 10, d, 3, &v, &w), GF_EPARAM);

	/* metrics: dimension mismatch */
	gf_eval_result res;
	assert_int_equal(gf_eval_metrics(&a, fx->fake.data, fx->fake.rows, 16, NULL, 0, NULL, &res),
	                 GF_ESHAPE);

	gf_feat_stats_free(&a);
	gf_feat_stats_free(&small);
}

/* Same inputs, same bits: the reductions run in a fixed order. */
static void test_deterministic(void **state)
{
	fixture *fx = *state;
	gf_feat_stats a1, a2, b;
	double f1, f2;
	assert_int_equal(gf_feat_stats_compute(fx->real.data, fx->real.rows, fx->d, &a1), 0);
	assert_int_equal(gf_feat_stats_compute(fx->real.data, fx->real.rows, fx->d, &a2), 0);
	assert_int_equal(gf_feat_stats_compute(fx->fake.data, fx->fake.rows, fx->d, &b), 0);
	assert_memory_equal(a1.sigma, a2.sigma, (size_t)fx->d * fx->d * sizeof(double));
	assert_int_equal(gf_fid(&a1, &b, &f1), 0);
	assert_int_equal(gf_fid(&a2, &b, &f2), 0);
	assert_memory_equal(&f1, &f2, sizeof(f1));
	gf_feat_stats_free(&a1);
	gf_feat_stats_free(&a2);
	gf_feat_stats_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fid_self_is_zero),
		cmocka_unit_test(test_fid_closed_form_2d),
		cmocka_unit_test(test_fid_gaussians_vs_definition),
		cmocka_unit_test(test_fid_commuting_closed_form),
		cmocka_unit_test(test_fid_singular_clamped),
		cmocka_unit_test(test_stats_refs),
		cmocka_unit_test(test_fid_refs),
		cmocka_unit_test(test_is_refs),
		cmocka_unit_test(test_kid_refs),
		cmocka_unit_test(test_pr_refs),
		cmocka_unit_test(test_pr_blocks_vs_brute_force),
		cmocka_unit_test(test_eval_metrics),
		cmocka_unit_test(test_is_uniform_and_confident),
		cmocka_unit_test(test_kid_same_distribution),
		cmocka_unit_test(test_hash),
		cmocka_unit_test(test_cache_file),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_deterministic),
	};
	return cmocka_run_group_tests_name("evalstats", tests, fixture_setup, fixture_teardown);
}
