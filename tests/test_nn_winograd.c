/* The CPU backend's "same" 3x3 convolutions (Winograd F(2x2, 3x3),
 * core/nn/cpu/winograd_cpu.c) against a direct convolution in double:
 * forward (with and without bias), input and weight gradients (each alone
 * and both, overwritten and accumulated), odd and even sizes, several
 * chunks of samples, grouped convolutions (8 or more channels a group); and
 * the same bits with 1 and 3 threads. The PyTorch references of SNGAN/BigGAN blocks and Inception
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
	int groups;   /* 0: dense */
};

/* every one takes the Winograd path (gf_cpu_winograd_ok) */
static const struct shape shapes[] = {
	{ 3, 8, 9, 13, 15, 0 },    /* odd both ways: half tiles right and below */
	{ 2, 16, 8, 12, 12, 0 },
	{ 1, 9, 8, 12, 17, 0 },
	{ 2, 8, 16, 17, 13, 0 },
	{ 2, 256, 256, 9, 8, 0 },  /* small planes, many channels */
	{ 3, 8, 8, 128, 96, 0 },   /* chunks of 2 + 1 samples forward, 1 backward */
	{ 2, 32, 16, 12, 13, 2 },   /* 16 -> 8 a group */
	{ 2, 64, 64, 16, 16, 4 },   /* R3GAN's grouped 3x3: 16 channels a group */
	{ 3, 24, 24, 64, 48, 3 },   /* several chunks, grouped */
};

static gf_conv_desc desc_of(const struct shape *s)
{
	gf_conv_desc d = { s->n, s->cin, s->h, s->w, s->cout, s->h, s->w, 3, 3, 1, 1, 1, 1, 1, GF_F32, GF_NCHW, s->groups };
	return d;
}

static void test_against_direct(void **state)
{
	(void)state;
	gf_backend *be = nn_cpu(2);
	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		const struct shape *s = &shapes[k];
		gf_conv_desc d = desc_of(s);
		size_t nx = (size_t)s->n * s->cin * s->h * s->w, ny = (size_t)s->n * s->cout * s->h * s->w,
		       nw = nn_conv_wsize(&d);
		float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)), *b = malloc(s->cout * sizeof(float));
		float *y = malloc(ny * sizeof(float)), *dy = malloc(ny * sizeof(float));
		float *dx = malloc(nx * sizeof(float)), *dw = malloc(nw * sizeof(float)), *db = malloc(s->cout * sizeof(float));
		double *ry = malloc(ny * sizeof(double)), *rdx = malloc(nx * sizeof(double)), *rdw = malloc(nw * sizeof(double));
		assert_non_null(x && w && b && y && dy && dx && dw && db && ry && rdx && rdw);
		nn_fill(x, nx, 10 + k, 1.0f, 0.0f);
		nn_fill(w, nw, 20 + k, 1.0f / sqrtf(9.0f * (s->cin / gf_conv_groups(&d))), 0.0f);
		nn_fill(b, s->cout, 30 + k, 0.5f, 0.0f);
		nn_fill(dy, ny, 40 + k, 1.0f, 0.0f);

		nn_conv_ref(&d, x, w, b, NULL, ry, NULL, NULL);
		NN_OK(be->ops->conv2d_forward(be, y, x, w, b, &d));
		nn_conv_near("forward", &d, y, ry, ny, 1e-5);
		nn_conv_ref(&d, x, w, NULL, NULL, ry, NULL, NULL);
		NN_OK(be->ops->conv2d_forward(be, y, x, w, NULL, &d));
		nn_conv_near("forward without bias", &d, y, ry, ny, 1e-5);

		nn_conv_ref(&d, x, w, NULL, dy, NULL, rdx, rdw);
		memset(dx, 0xff, nx * sizeof(float));   /* NaN: dx must be overwritten */
		NN_OK(be->ops->conv2d_backward(be, dx, dw, db, dy, x, w, &d, 0));
		nn_conv_near("input gradient", &d, dx, rdx, nx, 1e-5);
		nn_conv_near("weight gradient", &d, dw, rdw, nw, 1e-5);
		NN_OK(be->ops->conv2d_backward(be, dx, NULL, NULL, dy, x, w, &d, 0));
		nn_conv_near("input gradient alone", &d, dx, rdx, nx, 1e-5);
		/* accumulate: dw += the gradient (dw holds it once already) */
		NN_OK(be->ops->conv2d_backward(be, NULL, dw, NULL, dy, x, w, &d, 1));
		for (size_t i = 0; i < nw; i++)
			rdw[i] *= 2;
		nn_conv_near("weight gradient accumulated", &d, dw, rdw, nw, 1e-5);

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
	const struct shape s = { 5, 24, 16, 13, 12, 0 };
	gf_conv_desc d = desc_of(&s);
	nn_conv_threads_same(&d);
	const struct shape sg = { 5, 32, 16, 13, 12, 2 };
	d = desc_of(&sg);
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
