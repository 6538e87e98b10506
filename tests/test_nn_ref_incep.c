/* The layer options of the FID Inception network against PyTorch:
 * rectangular convolution kernels and padding (kh/kw, ph/pw), average
 * pooling with count_include_pad = false and a stride, max pooling 3x3
 * stride 2, and Inception's BasicConv2d (conv without bias, batchnorm
 * eps = 0.001, ReLU) in training and eval mode. Forward, input gradient
 * and every parameter gradient are compared with
 * tests/ref/nn_ref_incep.safetensors, which tests/ref/make_nn_refs_incep.py
 * wrote with torch 1.13 from the same hash-formula parameters
 * (nn_fill_params). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_nn_util.h"

#define TOL 1e-4   /* relative, with a floor of 1e-2 of the tensor's largest value */

static gf_st_file *ref;
static gf_backend *be;

static int setup(void **state)
{
	(void)state;
	return nn_ref_open("tests/ref/nn_ref_incep.safetensors", &ref, &be);
}

static int teardown(void **state)
{
	(void)state;
	nn_ref_close(ref, be);
	return 0;
}

/* a[0..n) against reference `name` (nn_close's measure), printing the
 * largest absolute difference when asked. */
static int check(const char *name, const float *a, size_t n)
{
	size_t rn = 0;
	float *r = nn_ref(ref, name, &rn);
	if (!r)
		return 0;
	if (rn != n) {
		fprintf(stderr, "%s: %zu reference values, %zu computed\n", name, rn, n);
		free(r);
		return 0;
	}
	double md = 0;
	for (size_t i = 0; i < n; i++)
		md = fabs((double)a[i] - r[i]) > md ? fabs((double)a[i] - r[i]) : md;
	if (getenv("GF_VERBOSE"))
		fprintf(stderr, "  %-32s max |diff| %.3g\n", name, md);
	int ok = nn_close(name, a, r, n, TOL);
	free(r);
	return ok;
}

static const struct layer_case {
	const char *name, *table;
	int ndim;
	int shape[4];   /* input shape including the batch */
	int labels;     /* reads layer.<name>.labels */
} cases[] = {
	{ "conv_1x7", "{ {'conv', 4, 5, 1, kw = 7, pw = 3}, input_shape = {4, 6, 9} }", 4, { 2, 4, 6, 9 }, 0 },
	{ "conv_7x1", "{ {'conv', 3, 4, 7, kw = 1, pad = 3, pw = 0, bias = false}, input_shape = {3, 8, 5} }", 4,
	  { 2, 3, 8, 5 }, 0 },
	{ "conv_3x1_s2", "{ {'conv', 3, 4, 1, 2, kh = 3, ph = 1}, input_shape = {3, 9, 7} }", 4, { 2, 3, 9, 7 }, 0 },
	{ "avgpool_nopad", "{ {'avgpool', 3, 1, 1, count_include_pad = false}, input_shape = {3, 5, 6} }", 4,
	  { 2, 3, 5, 6 }, 0 },
	{ "avgpool_nopad_s2", "{ {'avgpool', 3, stride = 2, pad = 1, count_include_pad = false}, input_shape = {2, 7, 6} }",
	  4, { 2, 2, 7, 6 }, 0 },
	{ "maxpool_3s2", "{ {'maxpool', 3, 2}, input_shape = {2, 9, 8} }", 4, { 2, 2, 9, 8 }, 0 },
	{ "maxpool_3s1p1", "{ {'maxpool', 3, 1, 1}, input_shape = {2, 5, 6} }", 4, { 2, 2, 5, 6 }, 0 },
	{ "basicconv", "{ {'conv', 3, 4, 3, bias = false}, {'bn', 4, eps = 0.001}, {'relu'}, input_shape = {3, 6, 7} }", 4,
	  { 3, 3, 6, 7 }, 0 },
};

static void run_case(const struct layer_case *c, uint64_t k)
{
	char code[512], name[128];
	gf_net *net;
	snprintf(code, sizeof(code), "return %s", c->table);
	NN_OK(nn_build(&net, be, code, c->shape[0], 0));
	nn_fill_params(net, k, 0);
	size_t nx = 0, ndy = 0;
	snprintf(name, sizeof(name), "layer.%s.x", c->name);
	float *x = nn_ref(ref, name, &nx);
	snprintf(name, sizeof(name), "layer.%s.dy", c->name);
	float *dy = nn_ref(ref, name, &ndy);
	assert_non_null(x);
	assert_non_null(dy);
	int64_t sh[4];
	for (int i = 0; i < c->ndim; i++)
		sh[i] = c->shape[i];
	int32_t lab[8] = { 0 };
	gf_tensor in = gf_tensor_make(x, GF_F32, c->ndim, sh), out, dx;
	gf_tensor lt = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ c->shape[0] });
	if (c->labels) {
		gf_tensor t;
		snprintf(name, sizeof(name), "layer.%s.labels", c->name);
		NN_OK(gf_st_get(ref, name, &t));
		memcpy(lab, t.data, (size_t)c->shape[0] * sizeof(int32_t));
	}
	NN_OK(gf_net_forward(net, &in, c->labels ? &lt : NULL, GF_TRAIN));
	NN_OK(gf_net_output(net, &out));
	snprintf(name, sizeof(name), "layer.%s.y", c->name);
	assert_true(check(name, out.data, (size_t)gf_tensor_numel(&out)));
	NN_OK(gf_net_backward(net, dy, GF_NEED_DX | GF_NEED_DW));
	NN_OK(gf_net_dx(net, &dx));
	snprintf(name, sizeof(name), "layer.%s.dx", c->name);
	assert_true(check(name, dx.data, nx));
	size_t nv;
	const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
	float *g = gf_net_block(net, GF_GRADS, NULL);
	for (size_t i = 0; i < nv; i++) {
		snprintf(name, sizeof(name), "layer.%s.grad%zu", c->name, i);
		assert_true(check(name, g + v[i].offset, v[i].numel));
	}
	/* eval mode: the same but for the batchnorm, which then uses the
	 * running statistics of that one training forward */
	NN_OK(gf_net_forward(net, &in, c->labels ? &lt : NULL, GF_EVAL));
	NN_OK(gf_net_output(net, &out));
	snprintf(name, sizeof(name), strcmp(c->name, "basicconv") ? "layer.%s.y" : "layer.%s.y_eval", c->name);
	assert_true(check(name, out.data, (size_t)gf_tensor_numel(&out)));
	free(x);
	free(dy);
	gf_net_destroy(net);
}

static void test_layers(void **state)
{
	(void)state;
	uint64_t k = 3000;   /* make_nn_refs_incep.py's tensor counter */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gf_net *probe;
		char code[512];
		snprintf(code, sizeof(code), "return %s", cases[i].table);
		if (nn_build(&probe, be, code, cases[i].shape[0], 0)) {
			fprintf(stderr, "%s: %s\n", cases[i].name, gf_errmsg());
			fail();
		}
		size_t nv;
		gf_net_views(probe, GF_PARAMS, &nv);
		gf_net_destroy(probe);
		run_case(&cases[i], k);
		k += nv + 1;
	}
}

/* Errors name the layer and what is wrong. */
static void test_errors(void **state)
{
	(void)state;
	static const struct {
		const char *code, *msg;
	} bad[] = {
		{ "return { {'conv', 3, 4, 1, kw = 9}, input_shape = {3, 4, 4} }",
		  "layer 1 (conv): kernel 1x9 does not fit the padded input" },
		{ "return { {'conv', 3, 4, 1, kw = 0}, input_shape = {3, 4, 4} }", "layer 1 (conv): kw = 0 is out of range" },
		{ "return { {'conv', 3, 4, 3, ph = -1}, input_shape = {3, 4, 4} }", "layer 1 (conv): ph = -1 is out of range" },
		{ "return { {'maxpool', 3, count_include_pad = false}, input_shape = {3, 6, 6} }",
		  "unknown key 'count_include_pad'" },
		{ "return { {'avgpool', 3, count_include_pad = 2}, input_shape = {3, 6, 6} }", "count_include_pad" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		gf_net *net = NULL;
		int rc = nn_build(&net, be, bad[i].code, 4, 0);
		if (rc == 0 || !strstr(gf_errmsg(), bad[i].msg)) {
			fprintf(stderr, "%s\n  gave rc %d: %s\n  want: %s\n", bad[i].code, rc, gf_errmsg(), bad[i].msg);
			gf_net_destroy(net);
			fail();
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layers),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
