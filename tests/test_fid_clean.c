/* clean-fid's resize (gf_fid_resize_clean) against PIL 9's
 * Image.resize(BICUBIC) of float images, clipped to [0, 255]
 * (tests/ref/make_clean_resize_refs.py wrote the reference): enlarging
 * grey 32x32, colour 37x23, and shrinking 400x600 (antialiased), to
 * 299x299 through the [0, 255] -> [-1, 1] map; and the two resizers
 * differing where they should (bicubic overshoot clipped, the
 * antialiased shrink smoother than pytorch-fid's bilinear). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ganflow/evaluate.h>

#include "test_nn_util.h"

#define OUT 299
#define STRIDE 31

static const struct {
	int c, h, w;
} cases[] = { { 1, 32, 32 }, { 3, 37, 23 }, { 1, 400, 600 } };

static float *read_ref(size_t *n)
{
	const char *path = nn_src("tests/ref/clean_resize_ref.bin");
	FILE *f = fopen(path, "rb");
	if (!f) {
		print_error("%s: cannot open\n", path);
		return NULL;
	}
	fseek(f, 0, SEEK_END);
	long bytes = ftell(f);
	fseek(f, 0, SEEK_SET);
	float *v = malloc((size_t)bytes);
	*n = v && fread(v, 1, (size_t)bytes, f) == (size_t)bytes ? (size_t)bytes / sizeof(float) : 0;
	fclose(f);
	return v;
}

static void test_against_pil(void **state)
{
	(void)state;
	size_t nref, at = 0;
	float *ref = read_ref(&nref);
	assert_non_null(ref);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		size_t ns = (size_t)cases[k].c * cases[k].h * cases[k].w, nd = (size_t)3 * OUT * OUT;
		float *s = malloc(ns * sizeof(float)), *d = malloc(nd * sizeof(float));
		assert_non_null(s && d);
		nn_fill(s, ns, k, 127.5f, 127.5f);
		NN_OK(gf_fid_resize_clean(d, s, 1, cases[k].c, cases[k].h, cases[k].w, OUT, OUT, 2.0f / 255.0f, -1.0f));
		double worst = 0;
		size_t count = 0;
		for (size_t i = 0; i < nd; i += STRIDE, count++) {
			assert_true(at + count < nref);
			double want = ref[at + count] * (2.0 / 255.0) - 1.0, e = fabs(d[i] - want);
			if (!(e <= 2e-6)) {
				print_error("case %zu (%dx%dx%d): value %zu is %.8g, PIL gives %.8g\n", k, cases[k].c,
				            cases[k].h, cases[k].w, i, d[i], want);
				fail();
			}
			worst = e > worst ? e : worst;
		}
		at += count;
		printf("case %zu (%dx%dx%d -> 3x%dx%d): %zu values, worst difference %.2g\n", k, cases[k].c, cases[k].h,
		       cases[k].w, OUT, OUT, count, worst);
		free(s);
		free(d);
	}
	assert_int_equal(at, nref);
	free(ref);
}

/* A step edge: bicubic overshoots past 255 and below 0 (clipped to
 * [-1, 1]); bilinear never leaves the input's range. A fine checkerboard
 * shrunk 1000 -> 299: the antialiased resize averages it to grey, bilinear without
 * antialiasing samples it. */
static void test_behaviour(void **state)
{
	(void)state;
	float edge[8 * 8], big[3 * OUT * OUT], lin[3 * OUT * OUT];
	for (int i = 0; i < 64; i++)
		edge[i] = (i % 8) < 4 ? 0.0f : 255.0f;
	NN_OK(gf_fid_resize_clean(big, edge, 1, 1, 8, 8, OUT, OUT, 2.0f / 255.0f, -1.0f));
	float lo = 1, hi = -1;
	for (int i = 0; i < OUT * OUT; i++) {
		lo = big[i] < lo ? big[i] : lo;
		hi = big[i] > hi ? big[i] : hi;
	}
	assert_true(lo == -1.0f && hi == 1.0f);   /* reached and clipped */
	int clipped = 0;
	for (int x = 0; x < OUT; x++)
		clipped += big[x] == 1.0f || big[x] == -1.0f;
	assert_true(clipped > OUT / 2);
	/* the unclipped overshoot shows with another map: [0, 255] -> [0, 0.5] */
	NN_OK(gf_fid_resize_clean(big, edge, 1, 1, 8, 8, OUT, OUT, 0.5f / 255.0f, 0.0f));
	float top = 0;
	for (int x = 0; x < OUT; x++)
		top = big[x] > top ? big[x] : top;
	assert_true(top > 0.5f);

	static float board[1 * 1000 * 1000];
	for (int y = 0; y < 1000; y++)
		for (int x = 0; x < 1000; x++)
			board[y * 1000 + x] = ((x + y) & 1) ? 255.0f : 0.0f;
	NN_OK(gf_fid_resize_clean(big, board, 1, 1, 1000, 1000, OUT, OUT, 2.0f / 255.0f, -1.0f));
	NN_OK(gf_fid_resize(lin, board, 1, 1, 1000, 1000, OUT, OUT, 2.0f / 255.0f, -1.0f));
	double dev_clean = 0, dev_lin = 0;
	for (int i = OUT * 10; i < OUT * (OUT - 10); i++) {
		dev_clean += fabs(big[i]);
		dev_lin += fabs(lin[i]);
	}
	printf("checkerboard shrunk: mean |v| %.4f antialiased, %.4f bilinear\n", dev_clean / (OUT * (OUT - 20)), dev_lin / (OUT * (OUT - 20)));
	assert_true(dev_clean < 0.01 * dev_lin);
	float one = 0;
	assert_int_equal(gf_fid_resize_clean(big, &one, 1, 2, 1, 1, 2, 2, 1, 0), GF_EPARAM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_pil),
		cmocka_unit_test(test_behaviour),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
