/* The CPU backend's im2col convolutions (core/nn/cpu/conv_cpu.c, the
 * generic path: every conv that is not Winograd, sub-pixel or direct)
 * against a direct convolution in double: forward with and without bias,
 * input and weight gradients (alone and together, overwritten and
 * accumulated), for strides 1 to 3, square and rectangular kernels,
 * paddings 0 to 2 (also wider than the kernel's reach), odd and even sizes,
 * and planes small enough for the phase-split padded copy as well as
 * larger ones that take the row-by-row fallback; then the same bits with 1
 * and 3 threads. The DC-GAN discriminator's stride-2 3x3 and 4x4
 * convolutions are among the shapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ganflow/backend.h>

#include "test_nn_util.h"

struct shape {
	int n, cin, cout, h, w, kh, kw, sh, sw, ph, pw;
};

/* cout > 4 and not a "same" 3x3 stride-1 conv: none is direct or Winograd */
static const struct shape shapes[] = {
	{ 3, 1, 16, 32, 32, 3, 3, 2, 2, 1, 1 },    /* the DC-GAN D's blocks */
	{ 2, 16, 32, 16, 16, 3, 3, 2, 2, 1, 1 },
	{ 2, 64, 128, 4, 4, 3, 3, 2, 2, 1, 1 },
	{ 2, 3, 8, 16, 16, 4, 4, 2, 2, 1, 1 },     /* DC-GAN 4x4 stride 2 */
	{ 3, 2, 5, 7, 9, 3, 3, 2, 2, 1, 1 },       /* odd sizes */
	{ 2, 3, 6, 8, 7, 5, 5, 2, 2, 2, 2 },
	{ 2, 2, 7, 11, 10, 3, 2, 3, 2, 1, 0 },     /* stride 3 by 2, rectangular */
	{ 2, 3, 5, 9, 8, 1, 3, 1, 3, 0, 1 },
	{ 2, 2, 6, 6, 5, 3, 3, 2, 2, 0, 0 },       /* no padding */
	{ 2, 2, 6, 5, 6, 2, 3, 2, 1, 2, 2 },       /* padding past the kernel */
	{ 2, 3, 6, 9, 9, 5, 5, 1, 1, 2, 2 },       /* stride 1 */
	{ 1, 2, 8, 100, 98, 3, 3, 2, 2, 1, 1 },    /* phases too big: the fallback */
	{ 2, 2, 5, 100, 90, 3, 3, 1, 1, 1, 1 },    /* the same at stride 1 (5 out: not Winograd) */
};

static gf_conv_desc desc_of(const struct shape *s)
{
	gf_conv_desc d = { s->n, s->cin, s->h, s->w, s->cout, (s->h + 2 * s->ph - s->kh) / s->sh + 1,
		           (s->w + 2 * s->pw - s->kw) / s->sw + 1, s->kh, s->kw, s->sh, s->sw, s->ph, s->pw, 1,
		           GF_F32, GF_NCHW };
	return d;
}

static void test_against_direct(void **state)
{
	(void)state;
	gf_backend *be = nn_cpu(2);
	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		const struct shape *s = &shapes[k];
		gf_conv_desc d = desc_of(s);
		size_t nx = (size_t)d.n * d.cin * d.h * d.w, ny = (size_t)d.n * d.cout * d.hout * d.wout,
		       nw = (size_t)d.cout * d.cin * d.kh * d.kw;
		float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)), *b = malloc(d.cout * sizeof(float));
		float *y = malloc(ny * sizeof(float)), *dy = malloc(ny * sizeof(float));
		float *dx = malloc(nx * sizeof(float)), *dw = malloc(nw * sizeof(float));
		double *ry = malloc(ny * sizeof(double)), *rdx = malloc(nx * sizeof(double)), *rdw = malloc(nw * sizeof(double));
		assert_non_null(x && w && b && y && dy && dx && dw && ry && rdx && rdw);
		nn_fill(x, nx, 10 + k, 1.0f, 0.0f);
		nn_fill(w, nw, 20 + k, 1.0f / sqrtf((float)(d.cin * d.kh * d.kw)), 0.0f);
		nn_fill(b, d.cout, 30 + k, 0.5f, 0.0f);
		nn_fill(dy, ny, 40 + k, 1.0f, 0.0f);

		nn_conv_ref(&d, x, w, b, NULL, ry, NULL, NULL);
		NN_OK(be->ops->conv2d_forward(be, y, x, w, b, &d));
		nn_conv_near("forward", &d, y, ry, ny, 1e-5);
		nn_conv_ref(&d, x, w, NULL, NULL, ry, NULL, NULL);
		NN_OK(be->ops->conv2d_forward(be, y, x, w, NULL, &d));
		nn_conv_near("forward without bias", &d, y, ry, ny, 1e-5);

		nn_conv_ref(&d, x, w, NULL, dy, NULL, rdx, rdw);
		memset(dx, 0xff, nx * sizeof(float));   /* NaN: dx must be overwritten */
		NN_OK(be->ops->conv2d_backward(be, dx, dw, NULL, dy, x, w, &d, 0));
		nn_conv_near("input gradient", &d, dx, rdx, nx, 1e-5);
		nn_conv_near("weight gradient", &d, dw, rdw, nw, 1e-5);
		memset(dx, 0xff, nx * sizeof(float));
		NN_OK(be->ops->conv2d_backward(be, dx, NULL, NULL, dy, x, w, &d, 0));
		nn_conv_near("input gradient alone", &d, dx, rdx, nx, 1e-5);
		memset(dw, 0xff, nw * sizeof(float));
		NN_OK(be->ops->conv2d_backward(be, NULL, dw, NULL, dy, x, w, &d, 0));
		nn_conv_near("weight gradient alone", &d, dw, rdw, nw, 1e-5);
		/* accumulate: dw += the gradient (dw holds it once already) */
		NN_OK(be->ops->conv2d_backward(be, NULL, dw, NULL, dy, x, w, &d, 1));
		for (size_t i = 0; i < nw; i++)
			rdw[i] *= 2;
		nn_conv_near("weight gradient accumulated", &d, dw, rdw, nw, 1e-5);

		free(x), free(w), free(b), free(y), free(dy), free(dx), free(dw);
		free(ry), free(rdx), free(rdw);
	}
	gf_backend_close(be);
}

/* One thread and three: the same bits (each plane and GEMM part is one
 * thread's; the chunking does not depend on the thread count). */
static void test_threads(void **state)
{
	(void)state;
	const struct shape s = { 5, 24, 16, 13, 12, 3, 3, 2, 2, 1, 1 };
	gf_conv_desc d = desc_of(&s);
	nn_conv_threads_same(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_direct),
		cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
