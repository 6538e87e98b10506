/* The CPU backend's "same" 3x3 convolutions (Winograd F(2x2, 3x3),
 * core/nn/cpu/winograd_cpu.c) against a direct convolution in double:
 * forward (with and without bias), input and weight gradients (each alone
 * and both, overwritten and accumulated), odd and even sizes, several
 * chunks of samples; and the same bits with 1 and 3
 * threads. The PyTorch references of SNGAN/BigGAN blocks and Inception
 * (test_nn_ref4, test_nn_ref_incep) exercise the same path through
 * networks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ganflow/backend.h>

#include "test_nn_util.h"

struct shape {
	int n, cin, cout, h, w;
};

/* every one takes the Winograd path (gf_cpu_winograd_ok) */
static const struct shape shapes[] = {
	{ 3, 8, 9, 13, 15 },    /* odd both ways: half tiles right and below */
	{ 2, 16, 8, 12, 12 },
	{ 1, 9, 8, 12, 17 },
	{ 2, 8, 16, 17, 13 },
	{ 2, 256, 256, 9, 8 },  /* small planes, many channels */
	{ 3, 8, 8, 128, 96 },   /* chunks of 2 + 1 samples forward, 1 backward */
};

/* y[n][co][i][j] = b[co] + sum x[n][c][i+ky-1][j+kx-1] w[co][c][ky][kx], in double */
static void ref_forward(double *y, const float *x, const float *w, const float *b, const struct shape *s)
{
	for (int n = 0; n < s->n; n++)
		for (int co = 0; co < s->cout; co++)
			for (int i = 0; i < s->h; i++)
				for (int j = 0; j < s->w; j++) {
					double acc = b ? b[co] : 0.0;
					for (int c = 0; c < s->cin; c++)
						for (int ky = 0; ky < 3; ky++)
							for (int kx = 0; kx < 3; kx++) {
								int iy = i + ky - 1, ix = j + kx - 1;
								if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
									continue;
								acc += (double)x[(((size_t)n * s->cin + c) * s->h + iy) * s->w + ix] *
								       w[(((size_t)co * s->cin + c) * 3 + ky) * 3 + kx];
							}
					y[(((size_t)n * s->cout + co) * s->h + i) * s->w + j] = acc;
				}
}

static void ref_backward(double *dx, double *dw, const float *dy, const float *x, const float *w,
                         const struct shape *s)
{
	memset(dx, 0, (size_t)s->n * s->cin * s->h * s->w * sizeof(double));
	memset(dw, 0, (size_t)s->cout * s->cin * 9 * sizeof(double));
	for (int n = 0; n < s->n; n++)
		for (int co = 0; co < s->cout; co++)
			for (int i = 0; i < s->h; i++)
				for (int j = 0; j < s->w; j++) {
					double g = dy[(((size_t)n * s->cout + co) * s->h + i) * s->w + j];
					for (int c = 0; c < s->cin; c++)
						for (int ky = 0; ky < 3; ky++)
							for (int kx = 0; kx < 3; kx++) {
								int iy = i + ky - 1, ix = j + kx - 1;
								if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
									continue;
								size_t xi = (((size_t)n * s->cin + c) * s->h + iy) * s->w + ix;
								size_t wi = (((size_t)co * s->cin + c) * 3 + ky) * 3 + kx;
								dx[xi] += g * w[wi];
								dw[wi] += g * x[xi];
							}
				}
}

/* max |got - want| <= tol * (1 + max |want|), with the worst index printed */
static void near(const char *what, const struct shape *s, const float *got, const double *want, size_t n,
                 double tol)
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
		print_error("%s (n %d, cin %d, cout %d, %dx%d): element %zu is %.7g, want %.7g (error %.3g, scale %.3g)\n",
		            what, s->n, s->cin, s->cout, s->h, s->w, at, got[at], want[at], worst, scale);
		fail();
	}
}

static gf_conv_desc desc_of(const struct shape *s)
{
	gf_conv_desc d = { s->n, s->cin, s->h, s->w, s->cout, s->h, s->w, 3, 3, 1, 1, 1, 1, 1, GF_F32, GF_NCHW };
	return d;
}

static gf_backend *cpu(int threads)
{
	gf_backend_opts o = { .threads = threads };
	gf_backend *be = NULL;
	NN_OK(gf_backend_cpu_create(&o, &be));
	return be;
}

static void test_against_direct(void **state)
{
	(void)state;
	gf_backend *be = cpu(2);
	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		const struct shape *s = &shapes[k];
		gf_conv_desc d = desc_of(s);
		size_t nx = (size_t)s->n * s->cin * s->h * s->w, ny = (size_t)s->n * s->cout * s->h * s->w,
		       nw = (size_t)s->cout * s->cin * 9;
		float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)), *b = malloc(s->cout * sizeof(float));
		float *y = malloc(ny * sizeof(float)), *dy = malloc(ny * sizeof(float));
		float *dx = malloc(nx * sizeof(float)), *dw = malloc(nw * sizeof(float)), *db = malloc(s->cout * sizeof(float));
		double *ry = malloc(ny * sizeof(double)), *rdx = malloc(nx * sizeof(double)), *rdw = malloc(nw * sizeof(double));
		assert_non_null(x && w && b && y && dy && dx && dw && db && ry && rdx && rdw);
		nn_fill(x, nx, 10 + k, 1.0f, 0.0f);
		nn_fill(w, nw, 20 + k, 1.0f / sqrtf(9.0f * s->cin), 0.0f);
		nn_fill(b, s->cout, 30 + k, 0.5f, 0.0f);
		nn_fill(dy, ny, 40 + k, 1.0f, 0.0f);

		ref_forward(ry, x, w, b, s);
		NN_OK(be->ops->conv2d_forward(be, y, x, w, b, &d));
		near("forward", s, y, ry, ny, 1e-5);
		ref_forward(ry, x, w, NULL, s);
		NN_OK(be->ops->conv2d_forward(be, y, x, w, NULL, &d));
		near("forward without bias", s, y, ry, ny, 1e-5);

		ref_backward(rdx, rdw, dy, x, w, s);
		memset(dx, 0xff, nx * sizeof(float));   /* NaN: dx must be overwritten */
		NN_OK(be->ops->conv2d_backward(be, dx, dw, db, dy, x, w, &d, 0));
		near("input gradient", s, dx, rdx, nx, 1e-5);
		near("weight gradient", s, dw, rdw, nw, 1e-5);
		NN_OK(be->ops->conv2d_backward(be, dx, NULL, NULL, dy, x, w, &d, 0));
		near("input gradient alone", s, dx, rdx, nx, 1e-5);
		/* accumulate: dw += the gradient (dw holds it once already) */
		NN_OK(be->ops->conv2d_backward(be, NULL, dw, NULL, dy, x, w, &d, 1));
		for (size_t i = 0; i < nw; i++)
			rdw[i] *= 2;
		near("weight gradient accumulated", s, dw, rdw, nw, 1e-5);

		free(x), free(w), free(b), free(y), free(dy), free(dx), free(dw), free(db);
		free(ry), free(rdx), free(rdw);
	}
	gf_backend_close(be);
}

/* One thread and three: the same bits (every transform item and GEMM is
 * one thread's, the chunking is independent of the thread count). */
static void test_threads(void **state)
{
	(void)state;
	const struct shape s = { 5, 24, 16, 13, 12 };
	gf_conv_desc d = desc_of(&s);
	size_t nx = (size_t)s.n * s.cin * s.h * s.w, ny = (size_t)s.n * s.cout * s.h * s.w, nw = (size_t)s.cout * s.cin * 9;
	float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)), *dy = malloc(ny * sizeof(float));
	float *y[2], *dx[2], *dw[2];
	assert_non_null(x && w && dy);
	nn_fill(x, nx, 1, 1.0f, 0.0f);
	nn_fill(w, nw, 2, 0.1f, 0.0f);
	nn_fill(dy, ny, 3, 1.0f, 0.0f);
	for (int t = 0; t < 2; t++) {
		gf_backend *be = cpu(t ? 3 : 1);
		y[t] = malloc(ny * sizeof(float));
		dx[t] = malloc(nx * sizeof(float));
		dw[t] = malloc(nw * sizeof(float));
		assert_non_null(y[t] && dx[t] && dw[t]);
		NN_OK(be->ops->conv2d_forward(be, y[t], x, w, NULL, &d));
		NN_OK(be->ops->conv2d_backward(be, dx[t], dw[t], NULL, dy, x, w, &d, 0));
		gf_backend_close(be);
	}
	assert_memory_equal(y[0], y[1], ny * sizeof(float));
	assert_memory_equal(dx[0], dx[1], nx * sizeof(float));
	assert_memory_equal(dw[0], dw[1], nw * sizeof(float));
	for (int t = 0; t < 2; t++)
		free(y[t]), free(dx[t]), free(dw[t]);
	free(x), free(w), free(dy);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_direct),
		cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
