/* The double backward against PyTorch 1.13: for each case of
 * tests/ref/make_nn_refs_dbwd.py (a small network per group of kinds,
 * written there with torch.nn.functional), the penalty P = 1/2 |g|^2 on
 * g = d<w, D(x)>/dx from torch.autograd.grad(..., create_graph=True), its
 * gradient with respect to every parameter and to x, against the engine's
 * gf_net_backward + gf_net_backward2 (tests/ref/nn_ref_dbwd.safetensors).
 * Also the mbstd layer's forward and backward alone. The parameters, sn's
 * starting u and v, the inputs and the labels come from the file; the
 * random layers draw from the network's generator at (5, 9, 0), which the
 * generator script reproduces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_nn_refcase.h"

#define TOL 1e-3

static gf_st_file *ref;
static gf_backend *be;
static double worst_seen;

static int setup(void **state)
{
	(void)state;
	return nn_ref_open("tests/ref/nn_ref_dbwd.safetensors", &ref, &be);
}

static int teardown(void **state)
{
	(void)state;
	fprintf(stderr, "largest relative error: %.3g (tolerance %.1g)\n", worst_seen, TOL);
	nn_ref_close(ref, be);
	return 0;
}

/* a against reference `name` (nn_ref_check: relative error, floor 1e-2 of
 * the larger of the reference's largest entry and `scale`). */
static void check(const char *name, const float *a, size_t n, double scale)
{
	if (!nn_ref_check(ref, name, a, n, scale, TOL, &worst_seen))
		fail();
}

/* The tables the script's cases are (its comments repeat them). */
static const struct dbwd_case {
	const char *name, *table;
	int classes;
	unsigned flags;
} cases[] = {
	{ "mlp", "{ {'linear', 6, 8}, {'lrelu', 0.2}, {'linear', 8, 8}, {'tanh'}, {'linear', 8, 5}, {'sigmoid'},"
	         " {'linear', 5, 3}, {'relu'}, {'linear', 3, 1}, input_shape = {6} }", 0, 0 },
	{ "conv", "{ {'conv', 3, 4, 3, 2, 1}, {'relu'}, {'conv', 4, 4, 1, kw = 3, pw = 1}, {'lrelu', 0.2},"
	          " {'conv', 4, 3, 5, 1, 2, bias = false}, {'tanh'}, {'flatten'}, {'linear', 48, 2}, input_shape = {3, 7, 7} }", 0, 0 },
	{ "winograd", "{ {'conv', 8, 8, 3, 1, 1}, {'tanh'}, {'conv', 8, 8, 3, 1, 1}, {'lrelu', 0.2}, {'gsp'},"
	              " {'linear', 8, 1}, input_shape = {8, 12, 12} }", 0, 0 },
	{ "tconv_up", "{ {'tconv', 3, 4, 4, 2, 1}, {'tanh'}, {'upsample', 2}, {'conv', 4, 3, 3, 1, 1}, {'sigmoid'},"
	              " {'upsample', 3}, {'avgpool', 3, 2, 1, count_include_pad = false}, {'conv', 3, 1, 3, 2, 1},"
	              " {'flatten'}, input_shape = {3, 3, 3} }", 0, 0 },
	{ "pool_res", "{ {'conv', 2, 4, 3, 1, 1}, {'tanh', name = 'a'}, {'maxpool', 2}, {'conv', 4, 4, 3, 1, 1, name = 'r'},"
	              " {'avgpool', 2, input = 'a'}, {'add', with = 'r'}, {'lrelu', 0.1}, {'reshape', 4, 9}, {'flatten'},"
	              " {'linear', 36, 2}, input_shape = {2, 6, 6} }", 0, 0 },
	{ "concat_split", "{ {'linear', 4, 8, name = 'z'}, {'split', 0, 3}, {'tanh', name = 'a'},"
	                  " {'slice', from = 3, to = 8, input = 'z'}, {'sigmoid'}, {'concat', with = 'a'}, {'linear', 8, 2},"
	                  " input_shape = {4} }", 0, 0 },
	{ "bn", "{ {'conv', 2, 4, 3, 2, 1}, {'bn', 4, eps = 0.8}, {'lrelu', 0.2}, {'conv', 4, 4, 3, 1, 1}, {'bn', 4},"
	        " {'tanh'}, {'flatten'}, {'linear', 36, 6}, {'bn', 6, affine = false}, {'sigmoid'}, {'linear', 6, 1},"
	        " input_shape = {2, 6, 6} }", 0, 0 },
	{ "instancenorm", "{ {'conv', 3, 4, 3, 1, 1}, {'instancenorm', 4, affine = true}, {'tanh'}, {'instancenorm', 4},"
	                  " {'lrelu', 0.2}, {'conv', 4, 1, 1}, {'flatten'}, input_shape = {3, 4, 4} }", 0, 0 },
	{ "sn", "{ {'conv', 2, 4, 3, 2, 1, sn = true}, {'lrelu', 0.2}, {'tconv', 4, 3, 3, 2, 1, output_padding = 1, sn = true},"
	        " {'tanh'}, {'flatten'}, {'linear', 48, 2, sn = true}, input_shape = {2, 4, 4} }", 0, 0 },
	{ "cond", "{ {'embedding', 3, 16, input = 'label', sn = true}, {'reshape', 1, 4, 4, name = 'plane'},"
	          " {'concat', input = 'x', with = 'plane'}, {'conv', 3, 4, 3, 1, 1, sn = true}, {'relu'}, {'gsp', name = 'h'},"
	          " {'linear', 4, 1, sn = true}, {'proj', 3, 4, with = 'h', sn = true}, input_shape = {2, 4, 4}, classes = 3 }",
	  3, 0 },
	{ "dropout", "{ {'linear', 5, 8}, {'dropout', 0.3}, {'tanh'}, {'reshape', 2, 2, 2}, {'conv', 2, 3, 1},"
	             " {'dropout2d', 0.5}, {'sigmoid'}, {'flatten'}, {'linear', 12, 1}, input_shape = {5} }", 0, 0 },
	{ "diffaugment", "{ {'diffaugment', 'color,translation,cutout'}, {'conv', 3, 4, 3, 2, 1}, {'tanh'}, {'gsp'},"
	                 " {'linear', 4, 1}, input_shape = {3, 8, 8} }", 0, 0 },
	{ "mbstd", "{ {'conv', 2, 4, 3, 1, 1}, {'lrelu', 0.2}, {'mbstd', 2, 2}, {'conv', 6, 3, 3, 1, 1}, {'tanh'}, {'flatten'},"
	           " {'linear', 27, 1}, input_shape = {2, 3, 3} }", 0, 0 },
};

/* Writes the views of block b whose reference "<case>.<what>.<view>" exists
 * (every parameter has one). */
static void load_block(gf_net *net, const char *c, gf_block b, const char *what)
{
	nn_refcase rc = { ref, be, TOL, 0 };
	nn_rc_load(&rc, net, c, b, what);
}

static void run_case(const struct dbwd_case *c)
{
	char code[1200], name[160];
	snprintf(code, sizeof(code), "return %s", c->table);
	gf_tensor xr, lr;
	snprintf(name, sizeof(name), "%s.x", c->name);
	NN_OK(gf_st_get(ref, name, &xr));
	int B = (int)xr.shape[0];
	gf_net *net;
	NN_OK(nn_build(&net, be, code, B, c->flags));
	NN_OK(gf_net_check_backward2(net));
	load_block(net, c->name, GF_PARAMS, "p");
	load_block(net, c->name, GF_BUFFERS, "b");
	gf_tensor x = xr, *labels = NULL;
	if (c->classes) {
		snprintf(name, sizeof(name), "%s.labels", c->name);
		NN_OK(gf_st_get(ref, name, &lr));
		labels = &lr;
	}
	gf_rng_init(gf_net_rng(net), 5, 9);
	NN_OK(gf_net_forward(net, &x, labels, GF_TRAIN));
	gf_tensor out;
	gf_net_output(net, &out);
	size_t nw;
	snprintf(name, sizeof(name), "%s.w", c->name);
	float *w = nn_ref(ref, name, &nw);
	assert_int_equal(nw, (size_t)gf_tensor_numel(&out));
	NN_OK(gf_net_backward(net, w, GF_NEED_DX));
	nn_refcase rc = { ref, be, TOL, worst_seen };
	nn_rc_dbwd(&rc, net, c->name, "g");   /* this file's g: the penalty's gradients */
	worst_seen = rc.worst;
	free(w);
	gf_net_destroy(net);
}

static void test_cases(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (getenv("GC_VERBOSE"))
			fprintf(stderr, "%s\n", cases[i].name);
		run_case(&cases[i]);
	}
}

/* The same cases unfused: the bn's own LeakyReLU and the upsample + conv
 * as two layers give the same numbers. */
static void test_cases_unfused(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct dbwd_case c = cases[i];
		c.flags = GF_NET_NOFUSE;
		run_case(&c);
	}
}

static void test_mbstd_layer(void **state)
{
	(void)state;
	gf_net *net;
	NN_OK(nn_build(&net, be, "return { {'mbstd', group = 2, channels = 2}, input_shape = {4, 3, 3} }", 4, 0));
	gf_tensor x, y, dx;
	NN_OK(gf_st_get(ref, "mbstd_fwd.x", &x));
	NN_OK(gf_net_forward(net, &x, NULL, GF_TRAIN));
	NN_OK(gf_net_output(net, &y));
	check("mbstd_fwd.y", y.data, (size_t)gf_tensor_numel(&y), 0);
	float *dy = nn_ref(ref, "mbstd_fwd.dy", NULL);
	NN_OK(gf_net_backward(net, dy, GF_NEED_DX));
	NN_OK(gf_net_dx(net, &dx));
	check("mbstd_fwd.dx", dx.data, (size_t)gf_tensor_numel(&dx), 0);
	free(dy);
	/* a batch that is not a multiple of the group is named */
	gf_tensor x3 = x;
	x3.shape[0] = 3;
	assert_int_equal(gf_net_forward(net, &x3, NULL, GF_TRAIN), GF_ESHAPE);
	assert_non_null(strstr(gf_errmsg(), "layer 1 (mbstd): batch 3 is not a multiple of the group size 2"));
	gf_net_destroy(net);
	assert_int_equal(nn_build(&net, be, "return { {'mbstd', 4, 3}, input_shape = {4, 3, 3} }", 4, 0), GF_ESHAPE);
	assert_non_null(strstr(gf_errmsg(), "layer 1 (mbstd): 4 input channels are not a multiple of channels = 3"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cases),
		cmocka_unit_test(test_cases_unfused),
		cmocka_unit_test(test_mbstd_layer),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
