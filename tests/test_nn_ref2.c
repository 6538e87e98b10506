/* The layer kinds of issue 14 against PyTorch: add (residual sums), gsp
 * (global sum pooling), split, instancenorm and proj (the projection
 * discriminator's head), forward, input gradient and every parameter
 * gradient, compared with tests/ref/nn_ref2.safetensors, which
 * tests/ref/make_nn_refs2.py wrote with torch 1.13 from the same
 * hash-formula parameters (nn_fill_params). The largest difference of each
 * tensor is printed (GF_VERBOSE=1). */
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
	return nn_ref_open("tests/ref/nn_ref2.safetensors", &ref, &be);
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
	{ "add", "{ {'conv', 3, 3, 3, 1, 1}, {'add', with = 'x'}, input_shape = {3, 5, 5} }", 4, { 2, 3, 5, 5 }, 0 },
	{ "add_self", "{ {'tanh', name = 't'}, {'add', with = 't'}, input_shape = {4, 3} }", 3, { 2, 4, 3 }, 0 },
	{ "gsp", "{ {'gsp'}, input_shape = {3, 4, 5} }", 4, { 2, 3, 4, 5 }, 0 },
	{ "split", "{ {'split', 2, 7}, input_shape = {10} }", 2, { 3, 10 }, 0 },
	{ "split_keys", "{ {'slice', from = 0, to = 4}, input_shape = {6} }", 2, { 3, 6 }, 0 },
	{ "instancenorm", "{ {'instancenorm', 4, affine = true}, input_shape = {4, 5, 5} }", 4, { 3, 4, 5, 5 }, 0 },
	{ "instancenorm_plain", "{ {'instancenorm', 3}, input_shape = {3, 4, 6} }", 4, { 2, 3, 4, 6 }, 0 },
	{ "proj", "{ {'linear', 6, 1}, {'proj', 5, 6, with = 'x'}, input_shape = {6} }", 2, { 4, 6 }, 1 },
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
	/* eval mode is the same for all of these (instancenorm keeps no
	 * running statistics, as PyTorch's default) */
	NN_OK(gf_net_forward(net, &in, c->labels ? &lt : NULL, GF_EVAL));
	NN_OK(gf_net_output(net, &out));
	snprintf(name, sizeof(name), "layer.%s.y", c->name);
	assert_true(check(name, out.data, (size_t)gf_tensor_numel(&out)));
	free(x);
	free(dy);
	gf_net_destroy(net);
}

static void test_layers(void **state)
{
	(void)state;
	uint64_t k = 1000;   /* make_nn_refs2.py's tensor counter */
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
		{ "return { {'conv', 3, 8, 3, 1, 1}, {'add', with = 'x'}, input_shape = {3, 4, 4} }",
		  "layer 2 (add): shapes (4, 8, 4, 4) and (4, 3, 4, 4) differ" },
		{ "return { {'add'}, input_shape = {3} }", "layer 1 (add): needs with" },
		{ "return { {'gsp'}, input_shape = {3} }", "layer 1 (gsp): expects" },
		{ "return { {'linear', 4, 1024}, {'reshape', 64, 4, 4, name = 'in'}, {'bn', 64}, {'relu'}, {'upsample', 2}, {'conv', 64, 64, 3, 1, 1}, {'bn', 64}, {'relu'}, {'conv', 64, 64, 3, 1, 1, name = 'res'}, {'upsample', 2, input = 'in'}, {'conv', 64, 64, 1, name = 'short'}, {'add', input = 'res', with = 'short'}, {'add', with = 'in'}, input_shape = {4} }",
		  "layer 13 (add): shapes (4, 64, 8, 8) and (4, 64, 4, 4) differ" },
		{ "return { {'split', 2, 9}, input_shape = {6} }", "layer 1 (split): range 2..9 does not fit" },
		{ "return { {'split', 4, 4}, input_shape = {6} }", "layer 1 (split): to = 4 must be greater" },
		{ "return { {'slice', 2}, input_shape = {6} }", "layer 1 (split): needs from and to" },
		{ "return { {'split', 0, 2}, input_shape = {2, 3, 3} }", "layer 1 (split): expects a flat input" },
		{ "return { {'instancenorm', 4}, input_shape = {3, 4, 4} }", "layer 1 (instancenorm): expects 4 input channels" },
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
