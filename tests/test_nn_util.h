/* Helpers shared by the nn engine's tests (test_nn_*.c): building networks
 * from Lua table literals, the hash-formula parameters that
 * tests/ref/make_nn_refs.py mirrors, and tolerant comparisons.
 * Header-only; every function is static. */
#ifndef GF_TEST_NN_UTIL_H
#define GF_TEST_NN_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/backend.h>
#include <ganflow/err.h>
#include <ganflow/lua.h>
#include <ganflow/nn.h>
#include <ganflow/safetensors.h>

/* Fails the current CMocka test with the library's detail message. */
#define NN_OK(call)                                                                              \
	do {                                                                                     \
		int rc_ = (call);                                                                \
		if (rc_) {                                                                       \
			print_error("%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,          \
			            gf_strerror(rc_), gf_errmsg());                              \
			fail();                                                                  \
		}                                                                                \
	} while (0)

/* Evaluates Lua code returning a table. */
static inline gf_value nn_lua(const char *code)
{
	gf_value v;
	int rc = gf_lua_eval(code, &v);
	if (rc) {
		fprintf(stderr, "lua: %s\n", gf_errmsg());
		abort();
	}
	return v;
}

/* Builds a network from Lua code ("return {...}"). Returns the rc; *out set on success. */
static inline int nn_build(gf_net **out, gf_backend *be, const char *code, int max_batch, unsigned flags)
{
	gf_value t = nn_lua(code);
	gf_net_opts o = { .max_batch = max_batch, .flags = flags };
	int rc = gf_net_create(out, be, &t, &o);
	gf_value_free(&t);
	return rc;
}

/* ---- hash-formula values (tests/ref/make_nn_refs.py: hash24, param_fill) ---- */

static inline uint32_t nn_hash24(uint64_t i, uint64_t k)
{
	uint32_t x = (uint32_t)(i * 2654435761u + (k + 1) * 97531u);
	x ^= x >> 15;
	x *= 2246822519u;
	x ^= x >> 13;
	x *= 3266489917u;
	x ^= x >> 16;
	return x >> 8;
}

static inline void nn_fill(float *out, size_t n, uint64_t k, float scale, float offset)
{
	for (size_t i = 0; i < n; i++) {
		float u = (float)((double)nn_hash24(i, k) / 8388608.0 - 1.0);
		float v = scale * u;
		out[i] = offset != 0.0f ? v + offset : v;
	}
}

/* Fills every parameter of net like make_nn_refs.py's fill_module, tensor
 * counter from k0: conv/linear weight and bias U * 1/sqrt(fan_in) (fan_in
 * from the weight), batchnorm gamma 1 + 0.1 u and beta 0.1 u (1-d
 * weights), embedding weights scale 1 when emb_scale1. Returns the next
 * counter. */
static inline uint64_t nn_fill_params(gf_net *net, uint64_t k0, int emb_scale1)
{
	size_t np, nv;
	float *host;
	gf_net_block(net, GF_PARAMS, &np);
	const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
	host = calloc(np ? np : 1, sizeof(float));
	uint64_t k = k0;
	float scale = 1.0f;
	int bn = 0;
	for (size_t i = 0; i < nv; i++) {
		const char *what = strrchr(v[i].name, '.') + 1;
		if (strcmp(what, "weight") == 0 || strcmp(what, "weight_orig") == 0) {
			bn = v[i].ndim == 1;
			double fan_in = v[i].ndim >= 2 ? (double)v[i].shape[1] : 1;
			if (v[i].ndim == 4)
				fan_in *= (double)(v[i].shape[2] * v[i].shape[3]);
			scale = emb_scale1 && v[i].ndim == 2 ? 1.0f : (float)(1.0 / sqrt(fan_in));
			if (bn)
				nn_fill(host + v[i].offset, v[i].numel, k, 0.1f, 1.0f);
			else
				nn_fill(host + v[i].offset, v[i].numel, k, scale, 0.0f);
		} else {
			nn_fill(host + v[i].offset, v[i].numel, k, bn ? 0.1f : scale, 0.0f);
		}
		k++;
	}
	gf_net_write(net, GF_PARAMS, host);
	free(host);
	return k;
}

/* ---- comparisons ---- */

/* Largest |a - b| / (|b| + floor * max|b|): a relative error with a floor
 * relative to the tensor's scale, so that near-zero entries do not dominate. */
static inline double nn_relerr(const float *a, const float *b, size_t n, double floor, size_t *worst)
{
	double mx = 0, e = 0;
	for (size_t i = 0; i < n; i++)
		mx = fabs(b[i]) > mx ? fabs(b[i]) : mx;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]) / (fabs(b[i]) + floor * mx + 1e-30);
		if (d > e || isnan(d)) {
			e = isnan(d) ? INFINITY : d;
			if (worst)
				*worst = i;
		}
	}
	return e;
}

/* Checks a against b within tol (nn_relerr with floor 1e-2); prints the
 * worst element on failure. Returns 1 when within tolerance. */
static inline int nn_close(const char *what, const float *a, const float *b, size_t n, double tol)
{
	size_t w = 0;
	double e = nn_relerr(a, b, n, 1e-2, &w);
	if (e <= tol)
		return 1;
	fprintf(stderr, "%s: relative error %.3g > %.3g at %zu: got %.9g, want %.9g\n", what, e, tol, w, (double)a[w],
	        (double)b[w]);
	return 0;
}

/* Reads a tensor of any shape (f32) from a reference file into a new
 * buffer; *n gets its element count. NULL when absent. */
static inline float *nn_ref(const gf_st_file *f, const char *name, size_t *n)
{
	gf_tensor t;
	if (gf_st_get(f, name, &t) || t.dtype != GF_F32) {
		fprintf(stderr, "reference tensor %s missing: %s\n", name, gf_errmsg());
		return NULL;
	}
	size_t cnt = (size_t)gf_tensor_numel(&t);
	float *p = malloc((cnt ? cnt : 1) * sizeof(float));
	memcpy(p, t.data, cnt * sizeof(float));
	if (n)
		*n = cnt;
	return p;
}

/* Path of a file under the source tree (GF_SOURCE_DIR, set by CTest). */
static inline const char *nn_src(const char *rel)
{
	static char buf[4096];
	const char *src = getenv("GF_SOURCE_DIR");
	snprintf(buf, sizeof(buf), "%s/%s", src ? src : ".", rel);
	return buf;
}

/* A host f32 tensor descriptor; the sizes are ints. */
/* The fixture of the reference tests (test_nn_ref*.c): the committed
 * reference file rel (under the source tree) and a 2-thread CPU backend.
 * Returns 0, or -1 naming the file that cannot be read. */
static inline int nn_ref_open(const char *rel, gf_st_file **ref, gf_backend **be)
{
	gf_backend_opts o = { .threads = 2 };
	if (gf_st_open(ref, nn_src(rel))) {
		fprintf(stderr, "%s\n", gf_errmsg());
		return -1;
	}
	return gf_backend_open("cpu", &o, be);
}

static inline void nn_ref_close(gf_st_file *ref, gf_backend *be)
{
	gf_st_close(ref);
	gf_backend_close(be);
}

/* a against reference tensor `name` of ref: the largest relative error,
 * with a floor of 1e-2 of the largest of the reference's entries and
 * `scale` (the case's largest parameter gradient, so that a gradient that
 * is zero in exact arithmetic, a conv bias before a batchnorm, compares as
 * the rounding noise it is on both sides), into *worst when larger.
 * Returns 1 when within tol, 0 (saying where) otherwise or when the
 * reference is missing or of another size. GC_VERBOSE=1 prints each. */
static inline int nn_ref_check(const gf_st_file *ref, const char *name, const float *a, size_t n, double scale,
                               double tol, double *worst)
{
	size_t rn = 0, w = 0;
	float *r = nn_ref(ref, name, &rn);
	if (!r || rn != n) {
		fprintf(stderr, "%s: %zu reference values for %zu computed\n", name, r ? rn : 0, n);
		free(r);
		return 0;
	}
	double e = 0, mx = scale;
	for (size_t i = 0; i < n; i++)
		mx = fmax(mx, fabs(r[i]));
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - r[i]) / (fabs(r[i]) + 1e-2 * mx + 1e-30);
		if (!(d <= e)) {
			e = d;
			w = i;
		}
	}
	if (e > *worst)
		*worst = e;
	if (getenv("GC_VERBOSE"))
		fprintf(stderr, "  %s: %.3g\n", name, e);
	int ok = e <= tol;
	if (!ok)
		fprintf(stderr, "%s: relative error %.3g > %.1g at %zu: got %.9g, want %.9g\n", name, e, tol, w, (double)a[w],
		        (double)r[w]);
	free(r);
	return ok;
}

static inline gf_tensor nn_tensor(float *data, int ndim, ...)
{
	int64_t sh[GF_MAX_DIMS];
	va_list ap;
	va_start(ap, ndim);
	for (int i = 0; i < ndim; i++)
		sh[i] = va_arg(ap, int);
	va_end(ap);
	return gf_tensor_make(data, GF_F32, ndim, sh);
}

/* ---- convolutions (test_nn_winograd.c, test_nn_im2col.c) ---- */

/* A CPU backend of `threads` threads (fails the test when it cannot open). */
static inline gf_backend *nn_cpu(int threads)
{
	gf_backend_opts o = { .threads = threads };
	gf_backend *be = NULL;
	NN_OK(gf_backend_cpu_create(&o, &be));
	return be;
}

/* The elements of d's weight (cout, cin / groups, kh, kw). */
static inline size_t nn_conv_wsize(const gf_conv_desc *d)
{
	return (size_t)d->cout * (d->cin / gf_conv_groups(d)) * d->kh * d->kw;
}

/* The direct convolution of d in double (grouped when d->groups > 1): y =
 * conv(x, w) + b, or with dy its input and weight gradients dx and dw
 * instead. */
static inline void nn_conv_ref(const gf_conv_desc *d, const float *x, const float *w, const float *b,
                               const float *dy, double *y, double *dx, double *dw)
{
	size_t nx = (size_t)d->n * d->cin * d->h * d->w, nw = nn_conv_wsize(d);
	int cg = d->cin / gf_conv_groups(d), og = d->cout / gf_conv_groups(d);
	if (dy) {
		memset(dx, 0, nx * sizeof(double));
		memset(dw, 0, nw * sizeof(double));
	}
	for (int n = 0; n < d->n; n++)
		for (int co = 0; co < d->cout; co++)
			for (int i = 0; i < d->hout; i++)
				for (int j = 0; j < d->wout; j++) {
					size_t yi = (((size_t)n * d->cout + co) * d->hout + i) * d->wout + j;
					double acc = b ? b[co] : 0.0;
					for (int c = 0; c < cg; c++)
						for (int ky = 0; ky < d->kh; ky++)
							for (int kx = 0; kx < d->kw; kx++) {
								int iy = i * d->sh - d->ph + ky, ix = j * d->sw - d->pw + kx;
								if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w)
									continue;
								size_t xi = (((size_t)n * d->cin + co / og * cg + c) * d->h + iy) * d->w + ix;
								size_t wi = (((size_t)co * cg + c) * d->kh + ky) * d->kw + kx;
								if (dy) {
									dx[xi] += (double)dy[yi] * w[wi];
									dw[wi] += (double)dy[yi] * x[xi];
								} else {
									acc += (double)x[xi] * w[wi];
								}
							}
					if (!dy)
						y[yi] = acc;
				}
}

/* Fails unless max |got - want| <= tol (1 + max |want|), printing the
 * worst element and the convolution's shape. */
static inline void nn_conv_near(const char *what, const gf_conv_desc *d, const float *got, const double *want,
                                size_t n, double tol)
{
	double scale = 0, worst = 0;
	size_t at = 0;
	for (size_t i = 0; i < n; i++)
		scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)got[i] - want[i]);
		if (!(e <= worst)) {
			worst = e;
			at = i;
		}
	}
	if (!(worst <= tol * (1 + scale))) {
		print_error("%s (n %d, cin %d, cout %d, %dx%d, kernel %dx%d, stride %dx%d, pad %dx%d): element %zu is "
		            "%.7g, want %.7g (error %.3g, scale %.3g)\n",
		            what, d->n, d->cin, d->cout, d->h, d->w, d->kh, d->kw, d->sh, d->sw, d->ph, d->pw, at,
		            got[at], want[at], worst, scale);
		fail();
	}
}

/* Convolution d forward and backward with one thread and with three: the
 * same bits. */
static inline void nn_conv_threads_same(const gf_conv_desc *d)
{
	size_t nx = (size_t)d->n * d->cin * d->h * d->w, ny = (size_t)d->n * d->cout * d->hout * d->wout,
	       nw = nn_conv_wsize(d);
	float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)), *dy = malloc(ny * sizeof(float));
	float *y[2], *dx[2], *dw[2];
	assert_non_null(x && w && dy);
	nn_fill(x, nx, 1, 1.0f, 0.0f);
	nn_fill(w, nw, 2, 0.1f, 0.0f);
	nn_fill(dy, ny, 3, 1.0f, 0.0f);
	for (int t = 0; t < 2; t++) {
		gf_backend *be = nn_cpu(t ? 3 : 1);
		y[t] = malloc(ny * sizeof(float));
		dx[t] = malloc(nx * sizeof(float));
		dw[t] = malloc(nw * sizeof(float));
		assert_non_null(y[t] && dx[t] && dw[t]);
		NN_OK(be->ops->conv2d_forward(be, y[t], x, w, NULL, d));
		NN_OK(be->ops->conv2d_backward(be, dx[t], dw[t], NULL, dy, x, w, d, 0));
		gf_backend_close(be);
	}
	assert_memory_equal(y[0], y[1], ny * sizeof(float));
	assert_memory_equal(dx[0], dx[1], nx * sizeof(float));
	assert_memory_equal(dw[0], dw[1], nw * sizeof(float));
	for (int t = 0; t < 2; t++)
		free(y[t]), free(dx[t]), free(dw[t]);
	free(x), free(w), free(dy);
}

/* ---- the CPU backend as a checked device (test_nn_devcheck.c, test_nn_coll.c) ---- */

/* A CPU backend of `threads` threads, a checked device (docs/cuda.md)
 * when check: GANFLOW_CPU_DEVICE_CHECK=1 while it opens. */
static inline gf_backend *nn_cpu_dev(int threads, int check)
{
	gf_backend *be;
	gf_backend_opts o = { .threads = threads };
	if (check)
		setenv("GANFLOW_CPU_DEVICE_CHECK", "1", 1);
	int rc = gf_backend_open("cpu", &o, &be);
	unsetenv("GANFLOW_CPU_DEVICE_CHECK");
	if (rc)
		fail_msg("cpu backend: %s", gf_errmsg());
	return be;
}

/* Fails unless rc is want and (text not NULL) the message holds text. */
static inline void nn_expect_err(int rc, int want, const char *text)
{
	if (rc != want)
		fail_msg("got %d (%s), want %d; %s", rc, gf_strerror(rc), want, gf_errmsg());
	if (text && !strstr(gf_errmsg(), text))
		fail_msg("error \"%s\" lacks \"%s\"", gf_errmsg(), text);
}

#endif
