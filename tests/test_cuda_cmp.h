/* How the CUDA tests compare a backend with the CPU backend: copies
 * between a backend's memory and the host, random inputs, the tolerances
 * (fp32: relative; bf16/fp16: bounds derived from the format), gradient
 * blocks compared with a floor taken from each layer, and soft checks that
 * let a test run all its cases before it fails. Pure C, no CUDA header:
 * test_cuda_cmp.c (a CPU test) checks these comparisons themselves;
 * test_cuda_util.h adds the CUDA skip rule. Header-only. */
#ifndef GF_TEST_CUDA_CMP_H
#define GF_TEST_CUDA_CMP_H

#include <inttypes.h>

#include <ganflow/rng.h>

#include "test_nn_util.h"

/* ---- soft checks ---- */

/* CMocka ends a test at its first failed assertion, so one bad case hid
 * every later case of the same test (the GPU run of 2026-11-26 never ran
 * the fp16 GEMMs, nor the bf16/fp16 DC-GANs). CHECK(cond) counts a failed
 * condition, prints where (the comparison helpers print the case and by
 * how much) and lets the test go on; checks_done() at the end of the test
 * fails it once, saying how many checks failed. Register such tests with
 * CHECKED_TEST(f), which resets the counts first. Hard assertions
 * (assert_*, NN_OK) stay where going on makes no sense: a call that
 * failed, a missing op, memory that was not allocated. */
static int checks_run, checks_failed;

static inline int check_at(int ok, const char *expr, const char *file, int line)
{
	checks_run++;
	if (!ok) {
		checks_failed++;
		fprintf(stderr, "%s:%d: check failed: %s\n", file, line, expr);
	}
	return ok;
}

static inline int check_eq_at(intmax_t a, intmax_t b, const char *expr, const char *file, int line)
{
	if (a != b)
		fprintf(stderr, "%s:%d: %jd != %jd\n", file, line, a, b);
	return check_at(a == b, expr, file, line);
}

#define CHECK(cond) check_at((cond) ? 1 : 0, #cond, __FILE__, __LINE__)
#define CHECK_EQ(a, b) check_eq_at((intmax_t)(a), (intmax_t)(b), #a " == " #b, __FILE__, __LINE__)
#define CHECK_MEM(a, b, n) check_at(memcmp((a), (b), (n)) == 0, "memcmp(" #a ", " #b ", " #n ") == 0", __FILE__, __LINE__)

static inline int checks_reset(void **state)
{
	(void)state;
	checks_run = checks_failed = 0;
	return 0;
}

static inline void checks_done_at(const char *test)
{
	int failed = checks_failed, run = checks_run;
	checks_run = checks_failed = 0;
	if (failed) {
		print_error("%s: %d of %d checks failed\n", test, failed, run);
		fail();
	}
}

#define checks_done() checks_done_at(__func__)
#define CHECKED_TEST(f) cmocka_unit_test_setup(f, checks_reset)

/* ---- memory of a backend, random inputs ---- */

static inline gf_backend *cpu_open(void)
{
	gf_backend_opts o = { .threads = 2 };
	gf_backend *be = NULL;
	if (gf_backend_open("cpu", &o, &be))
		abort();
	return be;
}

static inline float *dev_alloc(gf_backend *be, size_t n)
{
	void *p = NULL;
	if (be->ops->alloc(be, &p, (n ? n : 1) * sizeof(float)))
		abort();
	return p;
}

static inline float *dev_from(gf_backend *be, const float *host, size_t n)
{
	float *d = dev_alloc(be, n);
	if (n && be->ops->copy(be, d, host, n * sizeof(float), GF_COPY_H2D))
		abort();
	return d;
}

/* A new host array with the device's contents. */
static inline float *host_from(gf_backend *be, const float *dev, size_t n)
{
	float *h = malloc((n ? n : 1) * sizeof(float));
	if (n && be->ops->copy(be, h, dev, n * sizeof(float), GF_COPY_D2H)) {
		fprintf(stderr, "D2H copy: %s\n", gf_errmsg());
		abort();
	}
	return h;
}

static inline float *host_rand(size_t n, uint64_t seed, float lo, float hi)
{
	float *h = malloc((n ? n : 1) * sizeof(float));
	gf_rng r;
	gf_rng_init(&r, seed, 77);
	gf_rng_uniform(&r, h, n, lo, hi);
	return h;
}

static inline const char *prec_name(gf_precision p)
{
	return p == GF_PREC_BF16 ? "bf16" : p == GF_PREC_FP16 ? "fp16" : "fp32";
}

/* ---- fp32: relative tolerances ---- */

/* fp32 against the CPU backend: relative error with a floor of 1e-2 of the
 * tensor's largest value (nn_close): 1e-4 per op (conv and GEMM sums in
 * other orders). Whole networks: net_tol in test_cuda_nets.h. */
#define TOL_FP32 1e-4

/* Compares a device tensor of a backend with a host (CPU backend) one. */
static inline int dev_close(const char *what, gf_backend *gpu, const float *dev, const float *want, size_t n,
                            double tol)
{
	float *got = host_from(gpu, dev, n);
	int ok = nn_close(what, got, want, n, tol);
	free(got);
	return ok;
}

static inline int dev_equal(const char *what, gf_backend *gpu, const float *dev, const float *want, size_t n)
{
	float *got = host_from(gpu, dev, n);
	int ok = memcmp(got, want, n * sizeof(float)) == 0;
	if (!ok) {
		for (size_t i = 0; i < n; i++)
			if (memcmp(&got[i], &want[i], sizeof(float))) {
				fprintf(stderr, "%s: element %zu differs: got %.9g, want %.9g\n", what, i, (double)got[i],
				        (double)want[i]);
				break;
			}
	}
	free(got);
	return ok;
}

/* ---- bf16 / fp16: bounds derived from the format ----
 *
 * In bf16 and fp16 the CUDA backend rounds the two operands of every GEMM
 * and convolution to the format (round to nearest even), multiplies and
 * accumulates in f32 (cuBLAS/cuDNN, CUBLAS_COMPUTE_32F, CUDNN_DATA_FLOAT),
 * and a convolution stores its result in the format before it comes back
 * to f32 (the bias is added in f32 afterwards; a GEMM writes f32 C). The
 * CPU backend sums the same products of the unrounded operands in f32.
 *
 * Take one output s = sum_i a_i b_i over a reduction of length k (GEMM: k;
 * convolution forward: Cin kh kw, backward-data: Cout kh kw up^2,
 * backward-filter: N Hout Wout). With u the unit roundoff of the format
 * (bf16 2^-8: 8 significant bits; fp16 2^-11) and t its smallest normal
 * (bf16 2^-126, fp16 2^-14), rounding gives fl(a) = a + e with
 * |e| <= u (|a| + t) (the t covers subnormals, whose error is absolute,
 * at most u t). Then per product
 *   |fl(a) fl(b) - a b| <= ((1 + u)^2 - 1) (|a| + t)(|b| + t),
 * the products of two roundings are exact in f32, and rounding the sum
 * to the format once more multiplies by (1 + u) again: with r roundings
 * (2: a and b; 3: and the result)
 *   |gpu - cpu| <= ((1 + u)^r - 1) M + 2 gamma(k + 2) M' + [r = 3] u t,
 *   M  = sum_i (|a_i| + t)(|b_i| + t),   M' = M + |other f32 terms|
 * (bias, beta C, the accumulated old gradient), gamma(n) = n v / (1 - n v)
 * with v = 2^-23 the f32 unit of a truncating adder: the f32 sums on
 * either side in any order, tensor cores (which align and truncate)
 * included. The format part is 2u (GEMM) or 3u (convolution) relative to
 * the sum of |products|, whatever k: the operands' rounding errors do not
 * pile up with k the way an accumulation's do (u k), because the sum runs
 * in f32. k enters through the f32 part, and through M itself: M grows like
 * k while a sum of random-signed products grows like sqrt(k), so relative
 * to the result's size the bound grows like sqrt(k). It is a worst case,
 * elementwise: it cannot fail a correct backend whatever the inputs, and
 * at small k it is within a factor 2 of what random data reaches
 * (test_cuda_cmp). M is computed by the CPU backend's own op on |a| + t
 * and |b| + t, so it knows the op's structure (padding, strides, the fused
 * upsample) without restating it. It assumes the convolution is computed
 * as a sum of products (cuDNN's implicit-GEMM algorithms); an FFT or
 * Winograd algorithm with transforms in the format would need a bound of
 * its own, and a comparison against this one would say so. */

/* Unit roundoff of a precision's operand format (0: fp32, not rounded). */
static inline double prec_unit(gf_precision p)
{
	return p == GF_PREC_BF16 ? 0x1p-8 : p == GF_PREC_FP16 ? 0x1p-11 : 0.0;
}

/* Smallest normal number of the format (0 for fp32). */
static inline double prec_tiny(gf_precision p)
{
	return p == GF_PREC_BF16 ? 0x1p-126 : p == GF_PREC_FP16 ? 0x1p-14 : 0.0;
}

/* The format's part of the bound, per sum of |products|: (1 + u)^r - 1. */
static inline double lowp_rel(gf_precision p, int roundings)
{
	return pow(1.0 + prec_unit(p), roundings) - 1.0;
}

/* The f32 part, both sides, over a reduction of length k: 2 gamma(k + 2). */
static inline double acc32_rel(long k)
{
	double n = (double)(k + 2), v = 0x1p-23;
	return 2.0 * n * v / (1.0 - n * v);
}

/* dst_i = |src_i| + t: the magnitudes M is computed from. */
static inline float *abs_plus(const float *src, size_t n, double t)
{
	float *d = malloc((n ? n : 1) * sizeof(float));
	for (size_t i = 0; i < n; i++)
		d[i] = (float)(fabs((double)src[i]) + t);
	return d;
}

/* The bound of each of n outputs: mag = M (the op on |a| + t, |b| + t),
 * all = M' (M plus the |f32 terms|, or NULL when there are none). A new
 * array. */
static inline double *lowp_bounds(const float *mag, const float *all, size_t n, gf_precision p, int roundings, long k)
{
	double f = lowp_rel(p, roundings), a = acc32_rel(k);
	double abs = roundings >= 3 ? prec_unit(p) * prec_tiny(p) : 0.0;
	double *b = malloc((n ? n : 1) * sizeof(double));
	for (size_t i = 0; i < n; i++)
		b[i] = f * mag[i] + a * (all ? all[i] : mag[i]) + abs;
	return b;
}

/* Checks |got_i - want_i| <= bound_i for every i. On failure prints how
 * many elements are outside and the worst (its ratio to its bound).
 * GF_CMP_VERBOSE=1 prints the worst ratio of passing comparisons too, so
 * a GPU run shows its margins. Returns 1 when all are inside. */
static inline int bound_close(const char *what, const float *got, const float *want, const double *bound, size_t n)
{
	size_t bad = 0, w = 0;
	double worst = -1;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - (double)want[i]);
		int out = !(d <= bound[i]);   /* NaN is outside */
		double r = out ? (bound[i] > 0 && !isnan(d) ? d / bound[i] : INFINITY) : bound[i] > 0 ? d / bound[i] : 0;
		bad += (size_t)out;
		if (r > worst) {
			worst = r;
			w = i;
		}
	}
	if (bad || getenv("GF_CMP_VERBOSE"))
		fprintf(stderr, "%s: %zu of %zu outside the bound; worst %.3g x its bound at %zu: got %.9g, want %.9g, "
		                "bound %.3g\n",
		        what, bad, n, worst, w, n ? (double)got[w] : 0.0, n ? (double)want[w] : 0.0, n ? bound[w] : 0.0);
	return bad == 0;
}

static inline int dev_bound_close(const char *what, gf_backend *gpu, const float *dev, const float *want,
                                  const double *bound, size_t n)
{
	float *got = host_from(gpu, dev, n);
	int ok = bound_close(what, got, want, bound, n);
	free(got);
	return ok;
}

/* The bounds of one GEMM's or convolution's results, M computed by the CPU
 * backend (cpu) on the host copies of the operands. Each returns a new
 * array of the result's size. */

/* C (m, ldc) = alpha op(A) op(B) + beta C0: two roundings (C is f32). */
static inline double *gemm_bounds(gf_backend *cpu, gf_precision p, int ta, int tb, int m, int n, int k, float alpha,
                                  const float *a, int lda, const float *b, int ldb, float beta, const float *c0, int ldc)
{
	size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb, nc = (size_t)m * ldc;
	double t = prec_tiny(p);
	float *aa = abs_plus(a, na, t), *ba = abs_plus(b, nb, t), *mag = calloc(nc ? nc : 1, 4), *all = abs_plus(c0, nc, 0);
	float al = fabsf(alpha), be = fabsf(beta);
	NN_OK(cpu->ops->gemm(cpu, ta, tb, m, n, k, al, aa, lda, ba, ldb, 0.0f, mag, ldc));
	NN_OK(cpu->ops->gemm(cpu, ta, tb, m, n, k, al, aa, lda, ba, ldb, be, all, ldc));
	double *bd = lowp_bounds(mag, all, nc, p, 2, k);
	free(aa);
	free(ba);
	free(mag);
	free(all);
	return bd;
}

/* y = conv(x, w) (+ bias): three roundings (x, w, y in the format), the
 * bias added in f32. */
static inline double *conv_bounds_y(gf_backend *cpu, gf_precision p, const gf_conv_desc *d, const float *x,
                                    const float *w, const float *bias)
{
	size_t nx = (size_t)d->n * d->cin * d->h * d->w, nw = (size_t)d->cout * (d->cin / gf_conv_groups(d)) * d->kh * d->kw;
	size_t hw = (size_t)d->hout * d->wout, ny = (size_t)d->n * d->cout * hw;
	double t = prec_tiny(p);
	float *xa = abs_plus(x, nx, t), *wa = abs_plus(w, nw, t), *mag = malloc(ny * 4 + 4), *all = NULL;
	NN_OK(cpu->ops->conv2d_forward(cpu, mag, xa, wa, NULL, d));
	if (bias) {
		float *ba = abs_plus(bias, (size_t)d->cout, 0);
		all = malloc(ny * 4 + 4);
		memcpy(all, mag, ny * 4);
		NN_OK(cpu->ops->bias_add(cpu, all, ba, d->n, d->cout, (int)hw));
		free(ba);
	}
	double *bd = lowp_bounds(mag, all, ny, p, 3, (long)(d->cin / gf_conv_groups(d)) * d->kh * d->kw);
	free(xa);
	free(wa);
	free(mag);
	free(all);
	return bd;
}

/* dx of conv(x, w) for the output gradient dy (dx is overwritten). */
static inline double *conv_bounds_dx(gf_backend *cpu, gf_precision p, const gf_conv_desc *d, const float *dy,
                                     const float *w)
{
	size_t nx = (size_t)d->n * d->cin * d->h * d->w, nw = (size_t)d->cout * (d->cin / gf_conv_groups(d)) * d->kh * d->kw;
	size_t ny = (size_t)d->n * d->cout * d->hout * d->wout;
	double t = prec_tiny(p);
	float *dya = abs_plus(dy, ny, t), *wa = abs_plus(w, nw, t), *mag = malloc(nx * 4 + 4);
	NN_OK(cpu->ops->conv2d_backward(cpu, mag, NULL, NULL, dya, NULL, wa, d, 0));
	double *bd = lowp_bounds(mag, NULL, nx, p, 3, (long)(d->cout / gf_conv_groups(d)) * d->kh * d->kw * d->up * d->up);
	free(dya);
	free(wa);
	free(mag);
	return bd;
}

/* dw of conv(x, w) for dy; with dw_old (accumulating) the bound covers
 * the f32 addition to it, not dw_old's own difference (add its bound). */
static inline double *conv_bounds_dw(gf_backend *cpu, gf_precision p, const gf_conv_desc *d, const float *dy,
                                     const float *x, const float *w, const float *dw_old)
{
	size_t nx = (size_t)d->n * d->cin * d->h * d->w, nw = (size_t)d->cout * (d->cin / gf_conv_groups(d)) * d->kh * d->kw;
	size_t ny = (size_t)d->n * d->cout * d->hout * d->wout;
	double t = prec_tiny(p);
	float *dya = abs_plus(dy, ny, t), *xa = abs_plus(x, nx, t), *mag = malloc(nw * 4 + 4), *all = NULL;
	NN_OK(cpu->ops->conv2d_backward(cpu, NULL, mag, NULL, dya, xa, w, d, 0));
	if (dw_old) {
		all = malloc(nw * 4 + 4);
		for (size_t i = 0; i < nw; i++)
			all[i] = mag[i] + fabsf(dw_old[i]);
	}
	double *bd = lowp_bounds(mag, all, nw, p, 3, (long)d->n * d->hout * d->wout);
	free(dya);
	free(xa);
	free(mag);
	free(all);
	return bd;
}

/* ---- gradient blocks: a floor from the layer ---- */

/* Length of the layer part of a view name: "4" of "4.bias", "z" of
 * "z.weight", "4" of "4.gain.weight_orig". */
static inline size_t layer_part(const char *name)
{
	return strcspn(name, ".");
}

/* The gradients of a network, tensor by tensor, as nn_relerr does:
 * |got - want| / (|want| + 1e-2 L) <= tol, but with L the largest |want|
 * among all the gradient tensors of the tensor's layer (the views whose
 * names share the part before the first '.': "4.weight" and "4.bias")
 * instead of the tensor's own.
 *
 * Why: the bias of a layer that a batchnorm follows has a gradient of
 * exactly zero (the normalisation removes any constant), and both
 * backends return rounding noise for it (1e-13..1e-6 in the GPU run of
 * 2026-11-26). A floor from the tensor's own largest value compares noise
 * with noise. The layer's weight gradient sums the same output gradients,
 * times the layer's input, over the same positions: it sets the scale at
 * which the bias's rounding noise lives. The whole block's largest value
 * would do that too but would blunt the check of a layer whose gradients
 * are small next to the others'; the layer's keeps each layer checked at
 * its own scale. A bias gradient that should not be zero, or one that is
 * wrong by more than tol of its layer's scale, still fails (test_cuda_cmp). */
static inline int grads_close(const char *what, const float *got, const float *want, const gf_view *v, size_t nv,
                              double tol)
{
	int ok = 1;
	for (size_t i = 0; i < nv; i++) {
		size_t len = layer_part(v[i].name);
		double lmax = 0;
		for (size_t j = 0; j < nv; j++) {
			if (layer_part(v[j].name) != len || strncmp(v[i].name, v[j].name, len))
				continue;
			for (size_t e = 0; e < v[j].numel; e++)
				lmax = fmax(lmax, fabs((double)want[v[j].offset + e]));
		}
		const float *g = got + v[i].offset, *w = want + v[i].offset;
		double worst = 0;
		size_t at = 0;
		for (size_t e = 0; e < v[i].numel; e++) {
			double d = fabs((double)g[e] - w[e]) / (fabs((double)w[e]) + 1e-2 * lmax + 1e-30);
			if (!(d <= worst)) {
				worst = isnan(d) ? INFINITY : d;
				at = e;
			}
		}
		if (worst > tol) {
			fprintf(stderr, "%s %s: relative error %.3g > %.3g at %zu: got %.9g, want %.9g (floor: 1e-2 x %.3g, "
			                "the layer's largest gradient)\n",
			        what, v[i].name, worst, tol, at, (double)g[at], (double)w[at], lmax);
			ok = 0;
		}
	}
	return ok;
}


/* ---- normwise: whole networks in bf16 / fp16 ---- */

/* ||got - want||_2 <= tol ||want||_2 (an empty or all-zero want needs got
 * equal). Elementwise criteria with a floor fail here by construction: a
 * layer's rounding moves even its near-zero outputs by about u times the
 * size of the terms it sums, and the floor (1e-2 of the largest value)
 * times any useful tol is below u. GF_CMP_VERBOSE=1 prints every ratio. */
static inline int norm_close(const char *what, const float *got, const float *want, size_t n, double tol)
{
	double d2 = 0, w2 = 0;
	for (size_t i = 0; i < n; i++) {
		double d = (double)got[i] - (double)want[i];
		d2 += d * d;
		w2 += (double)want[i] * want[i];
	}
	double e = w2 > 0 ? sqrt(d2 / w2) : d2 > 0 || isnan(d2) ? INFINITY : 0;
	if (isnan(e))
		e = INFINITY;
	int ok = e <= tol;
	if (!ok || getenv("GF_CMP_VERBOSE"))
		fprintf(stderr, "%s: normwise relative error %.3g %s %.3g\n", what, e, ok ? "<=" : ">", tol);
	return ok;
}

/* Gradients normwise, each tensor's difference against its layer's norm
 * (all the layer's gradient tensors, as grads_close's floor): a zero
 * gradient holding rounding noise passes, a layer checked at its scale. */
static inline int grads_norm_close(const char *what, const float *got, const float *want, const gf_view *v,
                                   size_t nv, double tol)
{
	int ok = 1;
	for (size_t i = 0; i < nv; i++) {
		size_t len = layer_part(v[i].name);
		double l2 = 0, d2 = 0;
		for (size_t j = 0; j < nv; j++) {
			if (layer_part(v[j].name) != len || strncmp(v[i].name, v[j].name, len))
				continue;
			for (size_t e = 0; e < v[j].numel; e++)
				l2 += (double)want[v[j].offset + e] * want[v[j].offset + e];
		}
		for (size_t e = 0; e < v[i].numel; e++) {
			double d = (double)got[v[i].offset + e] - (double)want[v[i].offset + e];
			d2 += d * d;
		}
		double r = l2 > 0 ? sqrt(d2 / l2) : d2 > 0 || isnan(d2) ? INFINITY : 0;
		if (isnan(r))
			r = INFINITY;
		if (!(r <= tol) || getenv("GF_CMP_VERBOSE"))
			fprintf(stderr, "%s %s: normwise error %.3g of the layer's gradient norm %s %.3g\n", what, v[i].name, r,
			        r <= tol ? "<=" : ">", tol);
		ok &= r <= tol;
	}
	return ok;
}

#endif
