/* DiffAugment: the backend ops against PyTorch 1.13 autograd on given
 * uniforms (tests/ref/aug_ref.safetensors, written by
 * tests/ref/make_aug_refs.py), and the `diffaugment` layer: the identity
 * in eval mode, fresh parameters every training forward from the
 * network's generator (replayed exactly from the same generator state),
 * policies and bad tables. Finite differences: test_nn_gradcheck. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_nn_util.h"

static gf_st_file *ref;
static gf_backend *be;

static int setup(void **state)
{
	(void)state;
	return nn_ref_open("tests/ref/aug_ref.safetensors", &ref, &be);
}

static int teardown(void **state)
{
	(void)state;
	nn_ref_close(ref, be);
	return 0;
}

static void ops_case(const char *name)
{
	char k[64];
	gf_tensor tx, tw;
	snprintf(k, sizeof(k), "%s.x", name);
	assert_int_equal(gf_st_get(ref, k, &tx), 0);
	snprintf(k, sizeof(k), "%s.what", name);
	assert_int_equal(gf_st_get(ref, k, &tw), 0);
	int n = (int)tx.shape[0], c = (int)tx.shape[1], h = (int)tx.shape[2], w = (int)tx.shape[3];
	unsigned what = (unsigned)((const int32_t *)tw.data)[0];
	size_t cnt = 0;
	float *x, *u, *dy, *y, *dx, *got;
	snprintf(k, sizeof(k), "%s.x", name), x = nn_ref(ref, k, &cnt);
	snprintf(k, sizeof(k), "%s.u", name), u = nn_ref(ref, k, NULL);
	snprintf(k, sizeof(k), "%s.dy", name), dy = nn_ref(ref, k, NULL);
	snprintf(k, sizeof(k), "%s.y", name), y = nn_ref(ref, k, NULL);
	snprintf(k, sizeof(k), "%s.dx", name), dx = nn_ref(ref, k, NULL);
	got = malloc(cnt * sizeof(float));
	assert_int_equal(be->ops->augment_forward(be, got, x, u, n, c, h, w, what), 0);
	snprintf(k, sizeof(k), "%s forward", name);
	assert_true(nn_close(k, got, y, cnt, 1e-5));
	assert_int_equal(be->ops->augment_backward(be, got, dy, u, n, c, h, w, what), 0);
	snprintf(k, sizeof(k), "%s backward", name);
	assert_true(nn_close(k, got, dx, cnt, 1e-5));
	free(x), free(u), free(dy), free(y), free(dx), free(got);
}

static void test_ops(void **state)
{
	(void)state;
	static const char *const cases[] = { "all_rgb", "all_grey", "color", "translation", "cutout", "trans_cut" };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ops_case(cases[i]);
	/* empty shapes are refused */
	float one = 0;
	assert_int_equal(be->ops->augment_forward(be, &one, &one, &one, 0, 1, 1, 1, 7), GF_EPARAM);
}

/* The layer: eval is the identity; each training forward draws new
 * parameters; the same generator state gives the same images. */
static void test_layer(void **state)
{
	(void)state;
	gf_net *n;
	assert_int_equal(nn_build(&n, be, "return { input_shape = {3, 8, 8}, {'diffaugment', 'color,translation,cutout'} }",
	                          4, 0), 0);
	float x[4 * 192], a[4 * 192], b[4 * 192], c[4 * 192];
	gf_rng r = { 1, 2, 0 };
	gf_rng_normal(&r, x, 4 * 192, 0, 1);
	gf_tensor tx = nn_tensor(x, 4, 4, 3, 8, 8), out;
	gf_rng_init(gf_net_rng(n), 5, 0);
	assert_int_equal(gf_net_forward(n, &tx, NULL, GF_EVAL), 0);
	gf_net_output(n, &out);
	assert_memory_equal(out.data, x, sizeof(x));
	assert_int_equal(gf_net_rng(n)->offset, 0); /* eval draws nothing */
	gf_rng start = *gf_net_rng(n);
	assert_int_equal(gf_net_forward(n, &tx, NULL, GF_TRAIN), 0);
	gf_net_output(n, &out);
	memcpy(a, out.data, sizeof(a));
	assert_true(memcmp(a, x, sizeof(x)) != 0);
	assert_true(gf_net_rng(n)->offset > 0);
	assert_int_equal(gf_net_forward(n, &tx, NULL, GF_TRAIN), 0);
	gf_net_output(n, &out);
	memcpy(b, out.data, sizeof(b));
	assert_true(memcmp(a, b, sizeof(a)) != 0);
	*gf_net_rng(n) = start;
	assert_int_equal(gf_net_forward(n, &tx, NULL, GF_TRAIN), 0);
	gf_net_output(n, &out);
	memcpy(c, out.data, sizeof(c));
	assert_memory_equal(a, c, sizeof(a));
	/* a cutout zeroes a quarter of each image (a 4x4 box, maybe clipped): every sample has zeros */
	for (int i = 0; i < 4; i++) {
		int zeros = 0;
		for (int e = 0; e < 192; e++)
			zeros += a[i * 192 + e] == 0.0f;
		assert_true(zeros >= 3 * 4);
	}
	gf_net_destroy(n);
	/* translation alone moves pixels without changing them */
	assert_int_equal(nn_build(&n, be, "return { input_shape = {1, 8, 8}, {'augment', policy = 'translation'} }", 4, 0),
	                 0);
	gf_tensor t1 = nn_tensor(x, 4, 4, 1, 8, 8);
	assert_int_equal(gf_net_forward(n, &t1, NULL, GF_TRAIN), 0);
	gf_net_output(n, &out);
	const float *o = out.data;
	for (int e = 0; e < 4 * 64; e++) {
		int found = o[e] == 0.0f;
		for (int s = 0; s < 64 && !found; s++)
			found = o[e] == x[(e / 64) * 64 + s];
		assert_true(found);
	}
	gf_net_destroy(n);
}

static void test_bad(void **state)
{
	(void)state;
	gf_net *n;
	assert_int_equal(nn_build(&n, be, "return { input_shape = {3, 8, 8}, {'diffaugment', 'color,flip'} }", 2, 0),
	                 GF_EPARAM);
	assert_non_null(strstr(gf_errmsg(), "layer 1 (diffaugment): unknown augmentation 'flip'"));
	assert_int_equal(nn_build(&n, be, "return { input_shape = {3, 8, 8}, {'diffaugment', ''} }", 2, 0), GF_EPARAM);
	assert_int_equal(nn_build(&n, be, "return { input_shape = {12}, {'diffaugment'} }", 2, 0), GF_ESHAPE);
	assert_non_null(strstr(gf_errmsg(), "diffaugment"));
	assert_int_equal(
	    nn_build(&n, be, "return { input_shape = {3, 8, 8}, {'diffaugment', 'color', policy = 'cutout'} }", 2, 0),
	    GF_EPARAM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ops),
		cmocka_unit_test(test_layer),
		cmocka_unit_test(test_bad),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
