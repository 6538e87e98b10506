/* The CPU backend's im2col convolutions (core/nn/cpu/conv_cpu.c, the
 * generic path: every conv that is not Winograd, sub-pixel or direct)
 * against a direct convolution in double: forward with and without bias,
 * input and weight gradients (alone and together, overwritten and
 * accumulated), for strides 1 to 3, square and rectangular kernels,
 * paddings 0 to 2 (also wider than the kernel's reach), odd and even sizes,
 * and planes small enough for the phase-split padded copy as well as
 * larger ones that take the row-by-row fallback; then the same bits with 1
 * and 3 threads. The DC-GAN discriminator's stride-2 3x3 and 4x4
 * convolutions are among the shapes. Grouped convolutions likewise, on
 * the generic path (per-group GEMMs over one im2col matrix) and the direct
 * one (depthwise and other groups of at most 4 channels). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ganflow/backend.h>

#include "test_nn_util.h"

struct shape {
	int n, cin, cout, h, w, kh, kw, sh, sw, ph, pw;
	int groups;   /* 0: dense */
};

/* cout > 4 and not a "same" 3x3 stride-1 conv: none is direct or Winograd */
static const struct shape shapes[] = {
	{ 3, 1, 16, 32, 32, 3, 3, 2, 2, 1, 1, 0 },    /* the DC-GAN D's blocks */
	{ 2, 16, 32, 16, 16, 3, 3, 2, 2, 1, 1, 0 },
	{ 2, 64, 128, 4, 4, 3, 3, 2, 2, 1, 1, 0 },
	{ 2, 3, 8, 16, 16, 4, 4, 2, 2, 1, 1, 0 },     /* DC-GAN 4x4 stride 2 */
	{ 3, 2, 5, 7, 9, 3, 3, 2, 2, 1, 1, 0 },       /* odd sizes */
	{ 2, 3, 6, 8, 7, 5, 5, 2, 2, 2, 2, 0 },
	{ 2, 2, 7, 11, 10, 3, 2, 3, 2, 1, 0, 0 },     /* stride 3 by 2, rectangular */
	{ 2, 3, 5, 9, 8, 1, 3, 1, 3, 0, 1, 0 },
	{ 2, 2, 6, 6, 5, 3, 3, 2, 2, 0, 0, 0 },       /* no padding */
	{ 2, 2, 6, 5, 6, 2, 3, 2, 1, 2, 2, 0 },       /* padding past the kernel */
	{ 2, 3, 6, 9, 9, 5, 5, 1, 1, 2, 2, 0 },       /* stride 1 */
	{ 1, 2, 8, 100, 98, 3, 3, 2, 2, 1, 1, 0 },    /* phases too big: the fallback */
	{ 2, 2, 5, 100, 90, 3, 3, 1, 1, 1, 1, 0 },    /* the same at stride 1 (5 out: not Winograd) */
};

/* grouped: the generic path unless a group has at most 4 channels in and
 * out (direct); none is Winograd (fewer than 8 channels a group, or not a
 * "same" 3x3) */
static const struct shape grouped[] = {
	{ 2, 8, 12, 9, 9, 3, 3, 2, 2, 1, 1, 2 },       /* stride 2, chunk of 2 samples */
	{ 2, 12, 24, 8, 8, 3, 3, 1, 1, 1, 1, 3 },      /* "same" 3x3, 4 inputs a group */
	{ 2, 20, 40, 5, 5, 1, 1, 1, 1, 0, 0, 4 },      /* 1x1 (not the dense pointwise shortcut) */
	{ 1, 8, 10, 100, 98, 3, 3, 1, 1, 1, 1, 2 },    /* one sample a chunk: the GEMMs write NCHW */
	{ 2, 6, 6, 9, 9, 3, 3, 2, 2, 1, 1, 6 },        /* depthwise, stride 2: generic, one row a group */
	{ 3, 6, 6, 7, 7, 3, 3, 1, 1, 1, 1, 6 },        /* depthwise 3x3 "same": direct */
	{ 2, 5, 5, 4, 4, 4, 4, 1, 1, 0, 0, 5 },        /* R3GAN's discriminative basis: depthwise 4x4 -> 1x1 */
	{ 2, 8, 4, 6, 6, 3, 3, 1, 1, 1, 1, 2 },        /* direct, 4 -> 2 a group */
	{ 2, 8, 8, 6, 5, 2, 3, 1, 1, 1, 0, 4 },        /* direct, rectangular */
	{ 2, 4, 8, 5, 5, 3, 3, 1, 1, 1, 1, 2 },        /* 2 -> 4 a group: direct; depthwise multiplier 2 */
};

static gf_conv_desc desc_of(const struct shape *s)
{
	gf_conv_desc d = { s->n, s->cin, s->h, s->w, s->cout, (s->h + 2 * s->ph - s->kh) / s->sh + 1,
		           (s->w + 2 * s->pw - s->kw) / s->sw + 1, s->kh, s->kw, s->sh, s->sw, s->ph, s->pw, 1,
		           GF_F32, GF_NCHW, s->groups };
	return d;
}

/* Forward, input and weight gradients of shapes[0..n) against the direct
 * convolution in double. */
static void against_direct(const struct shape *shapes_, size_t count)
{
	gf_backend *be = nn_cpu(2);
	for (size_t k = 0; k < count; k++) {
		const struct shape *s = &shapes_[k];
		gf_conv_desc d = desc_of(s);
		size_t nx = (size_t)d.n * d.cin * d.h * d.w, ny = (size_t)d.n * d.cout * d.hout * d.wout,
		       nw = nn_conv_wsize(&d);
		float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)), *b = malloc(d.cout * sizeof(float));
		float *y = malloc(ny * sizeof(float)), *dy = malloc(ny * sizeof(float));
		float *dx = malloc(nx * sizeof(float)), *dw = malloc(nw * sizeof(float));
		double *ry = malloc(ny * sizeof(double)), *rdx = malloc(nx * sizeof(double)), *rdw = malloc(nw * sizeof(double));
		assert_non_null(x && w && b && y && dy && dx && dw && ry && rdx && rdw);
		nn_fill(x, nx, 10 + k, 1.0f, 0.0f);
		nn_fill(w, nw, 20 + k, 1.0f / sqrtf((float)(d.cin / gf_conv_groups(&d) * d.kh * d.kw)), 0.0f);
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

static void test_against_direct(void **state)
{
	(void)state;
	against_direct(shapes, sizeof(shapes) / sizeof(shapes[0]));
}

static void test_groups(void **state)
{
	(void)state;
	against_direct(grouped, sizeof(grouped) / sizeof(grouped[0]));
}

/* One thread and three: the same bits (each plane and GEMM part is one
 * thread's; the chunking does not depend on the thread count). */
static void test_threads(void **state)
{
	(void)state;
	const struct shape s = { 5, 24, 16, 13, 12, 3, 3, 2, 2, 1, 1, 0 };
	gf_conv_desc d = desc_of(&s);
	nn_conv_threads_same(&d);
	const struct shape sg = { 5, 24, 16, 13, 12, 3, 3, 2, 2, 1, 1, 4 };   /* grouped */
	d = desc_of(&sg);
	nn_conv_threads_same(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_direct),
		cmocka_unit_test(test_groups),
		cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
