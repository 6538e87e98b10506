/* StyleGAN2's layer kinds (eqlr linear and conv, fir, bias_act, noise,
 * const, modconv) against PyTorch 1.13: for each case of
 * tests/ref/make_nn_refs_sg2.py (StyleGAN2-ADA's formulas written with
 * torch.nn.functional), the output y, the gradients of L = <w, y> with
 * respect to x and every parameter, and the double backward of P = 1/2
 * |dL/dx|^2 (create_graph=True) through gf_net_backward2: R1's for the
 * discriminator's kinds, the path length's for the generator's, modconv
 * included (tests/ref/nn_ref_sg2.safetensors); two of the cases are built
 * with luaconf/backbones/stylegan2_layers.lua. Also: the modulated
 * convolution's two forms agree (the layer against a grouped convolution
 * run sample by sample here), random noise is the network generator's
 * normals and "auto" takes noise_const in eval forwards, and argument
 * errors. */
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
	return nn_ref_open("tests/ref/nn_ref_sg2.safetensors", &ref, &be);
}

static int teardown(void **state)
{
	(void)state;
	fprintf(stderr, "largest relative error: %.3g (tolerance %.1g)\n", worst_seen, TOL);
	nn_ref_close(ref, be);
	return 0;
}

/* The tables the script's cases are (its comments repeat them). */
static const struct sg2_case {
	const char *name, *table;
	int dbwd;
} cases[] = {
	{ "eq_mlp",
	  "{ {'linear', 6, 8, eqlr = true, lr_mul = 0.01}, {'bias_act', 8, bias = false},"
	  " {'linear', 8, 8, eqlr = true, lr_mul = 0.01, bias = false}, {'bias_act', 8, lr_mul = 0.01},"
	  " {'linear', 8, 5, eqlr = true, bias_init = 1}, {'bias_act', 5, act = 'relu', clamp = 0.8},"
	  " {'linear', 5, 2, eqlr = true}, {'bias_act', 2, act = 'linear', gain = 0.5}, input_shape = {6} }",
	  1 },
	{ "d_block",
	  "{ {'conv', 2, 4, 3, 1, 1, eqlr = true, bias = false}, {'bias_act', 4, clamp = 1},"
	  " {'fir', pad = 2}, {'conv', 4, 4, 3, 2, 0, eqlr = true, bias = false}, {'bias_act', 4, name = 'r'},"
	  " {'fir', down = 2, input = 'x'}, {'conv', 2, 4, 1, eqlr = true, bias = false, name = 'sk'},"
	  " {'add', with = 'r'}, {'flatten'}, {'linear', 36, 1, eqlr = true}, input_shape = {2, 6, 6} }",
	  1 },
	{ "fir_up",
	  "{ {'fir', up = 2}, {'conv', 2, 3, 3, 1, 1, eqlr = true}, {'bias_act', 3, act = 'linear', clamp = 0.7},"
	  " {'fir', pad = 1, gain = 4}, {'conv', 3, 2, 3, 1, 1, eqlr = true, lr_mul = 0.5}, {'bias_act', 2},"
	  " input_shape = {2, 3, 4} }",
	  1 },
	{ "synthesis",
	  "{ {'linear', 8, 4, eqlr = true, bias_init = 1, name = 's0'}, {'const', 4, 4, 4, input = 'x'},"
	  " {'modconv', 4, 3, 3, with = 's0'}, {'noise', 3, mode = 'const', name = 'n0'}, {'bias_act', 3, clamp = 2, name = 'h'},"
	  " {'linear', 8, 3, eqlr = true, bias_init = 1, input = 'x', name = 's1'},"
	  " {'modconv', 3, 2, 3, with = 's1', up = 2, input = 'h', name = 'up'}, {'fir', pad = 1, gain = 4},"
	  " {'noise', 2, mode = 'const', strength = 'channel', name = 'n1'}, {'bias_act', 2, name = 'h2'},"
	  " {'linear', 8, 2, eqlr = true, bias_init = 1, input = 'x', name = 's2'},"
	  " {'modconv', 2, 3, 1, demod = false, with = 's2', input = 'h2', name = 'rgb'},"
	  " {'bias_act', 3, act = 'linear', clamp = 1}, input_shape = {8} }",
	  1 },
	/* luaconf/backbones/stylegan2_layers.lua's blocks */
	{ "helpers_g",
	  "local L = require('backbones.stylegan2_layers'); local t = { input_shape = {8} }"
	  " L.fc(t, 'm', 'x', 8, 8, { lr_mul = 0.01, act = 'lrelu' }); t[#t + 1] = { 'const', 4, 4, 4, input = 'x', name = 'c' }"
	  " L.synthesis(t, 'b0', 'c', 'm', 4, 4, { w_dim = 8, noise = 'const', clamp = 2 })"
	  " L.synthesis(t, 'b1', 'b0', 'm', 4, 3, { w_dim = 8, up = 2, noise = 'const' })"
	  " L.torgb(t, 'rgb', 'b1', 'm', 3, 2, { w_dim = 8, clamp = 1 }) return t",
	  1 },
	{ "helpers_d",
	  "local L = require('backbones.stylegan2_layers'); local t = { input_shape = {2, 8, 8} }"
	  " L.conv(t, 'fromrgb', 'x', 2, 4, { k = 1, clamp = 1 }); L.conv(t, 'c0', 'fromrgb', 4, 4, { clamp = 1 })"
	  " L.conv(t, 'c1', 'c0', 4, 6, { down = 2, gain = math.sqrt(0.5), clamp = 1 })"
	  " L.conv(t, 'skip', 'fromrgb', 4, 6, { k = 1, down = 2, bias = false, act = 'linear', gain = math.sqrt(0.5) })"
	  " t[#t + 1] = { 'add', input = 'skip', with = 'c1' }; t[#t + 1] = { 'mbstd', 2, 1 }; t[#t + 1] = { 'flatten' }"
	  " L.fc(t, 'out', nil, 112, 1) return t",
	  1 },
};

static void run_case(const struct sg2_case *c, unsigned flags)
{
	char code[1600];
	snprintf(code, sizeof(code), strncmp(c->table, "local ", 6) ? "return %s" : "%s", c->table);   /* a table, or Lua code */
	nn_refcase rc = { ref, be, TOL, worst_seen };
	nn_rc_run(&rc, c->name, code, c->dbwd, flags);
	worst_seen = rc.worst;
}

static void test_cases(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (getenv("GC_VERBOSE"))
			fprintf(stderr, "%s\n", cases[i].name);
		run_case(&cases[i], 0);
		run_case(&cases[i], GF_NET_NOFUSE);
	}
}

/* ---- the modulated convolution's two forms ----
 * The layer (modulate x, one convolution of the batch, demodulate y)
 * against the grouped form: per sample n, the weight w[o, i] s[n, i] g
 * d[n, o] (d from those modulated weights, in double here) convolved with
 * x[n] alone, through the backend's conv ops at batch 1. */
static void forms(int cin, int cout, int k, int up, int demod, int hw)
{
	enum { B = 3 };
	char code[600];
	int nin = cin * hw * hw;
	snprintf(code, sizeof(code),
	         "return { {'split', 0, %d, name = 's'}, {'split', %d, %d, input = 'x'}, {'reshape', %d, %d, %d},"
	         " {'modconv', %d, %d, %d, with = 's', up = %d, demod = %s}, input_shape = {%d} }",
	         cin, cin, cin + nin, cin, hw, hw, cin, cout, k, up, demod ? "true" : "false", cin + nin);
	gf_net *net;
	NN_OK(nn_build(&net, be, code, B, 0));
	gf_rng init = { 7, 1, 0 };
	NN_OK(gf_net_init(net, &init));
	float *x = malloc((size_t)B * (cin + nin) * sizeof(float));
	gf_rng r = { 8, 2, 0 };
	gf_rng_normal(&r, x, (size_t)B * (cin + nin), 0.0f, 1.0f);
	gf_tensor xt = nn_tensor(x, 2, B, cin + nin), y;
	NN_OK(gf_net_forward(net, &xt, NULL, GF_TRAIN));
	NN_OK(gf_net_output(net, &y));
	size_t nv, kk = (size_t)k * k, nwt = (size_t)cin * cout * kk;
	assert_non_null(gf_net_views(net, GF_PARAMS, &nv));
	assert_int_equal(nv, 1);
	const float *w = gf_net_block(net, GF_PARAMS, NULL);
	float *wn = malloc(nwt * sizeof(float));
	int64_t per = gf_tensor_numel(&y) / B;
	double gain = demod ? 1.0 : 1.0 / sqrt((double)cin * kk), worst = 0;
	for (int n = 0; n < B; n++) {
		const float *s = x + (size_t)n * (cin + nin), *xn = s + cin;
		for (int o = 0; o < cout; o++) {
			double ss = 0;
			for (int i = 0; i < cin; i++)
				for (size_t t = 0; t < kk; t++) {
					size_t at = up == 1 ? ((size_t)o * cin + i) * kk + t : ((size_t)i * cout + o) * kk + t;
					double m = (double)w[at] * s[i] * gain;
					ss += m * m;
				}
			double dm = demod ? 1.0 / sqrt(ss + 1e-8) : 1.0;
			for (int i = 0; i < cin; i++)
				for (size_t t = 0; t < kk; t++) {
					size_t at = up == 1 ? ((size_t)o * cin + i) * kk + t : ((size_t)i * cout + o) * kk + t;
					wn[at] = (float)((double)w[at] * s[i] * gain * dm);
				}
		}
		float *yn = malloc((size_t)per * sizeof(float));
		int ho = up == 1 ? hw : 2 * hw + 1;
		gf_conv_desc d = { .n = 1, .kh = k, .kw = k, .up = 1, .dtype = GF_F32, .layout = GF_NCHW };
		if (up == 1) {
			d.cin = cin, d.h = d.w = hw, d.cout = cout, d.hout = d.wout = ho, d.sh = d.sw = 1, d.ph = d.pw = k / 2;
			NN_OK(be->ops->conv2d_forward(be, yn, xn, wn, NULL, &d));
		} else {   /* the transposed conv: the data gradient of the conv from y to x */
			d.cin = cout, d.h = d.w = ho, d.cout = cin, d.hout = d.wout = hw, d.sh = d.sw = 2;
			NN_OK(be->ops->conv2d_backward(be, yn, NULL, NULL, xn, NULL, wn, &d, 0));
		}
		size_t wi;
		double e = nn_relerr((const float *)y.data + (size_t)n * per, yn, (size_t)per, 1e-2, &wi);
		worst = fmax(worst, e);
		free(yn);
	}
	fprintf(stderr, "modconv %d->%d k%d up %d demod %d: the two forms agree to %.2g\n", cin, cout, k, up, demod, worst);
	assert_true(worst < 1e-4);   /* float rounding (Winograd: ~1e-5); a wrong form is off by O(1) */
	free(wn);
	free(x);
	gf_net_destroy(net);
}

static void test_modconv_forms(void **state)
{
	(void)state;
	forms(3, 4, 3, 1, 1, 5);
	forms(3, 2, 3, 2, 1, 4);
	forms(4, 3, 1, 1, 0, 5);
	forms(8, 8, 3, 1, 1, 12);   /* a "same" 3x3 of 8 channels at 12x12: the CPU's Winograd path */
}

/* ---- noise: the generator's normals in training, noise_const in eval ----
 * One strength for the layer (StyleGAN2-ADA's SynthesisLayer, the default)
 * or, strength = "channel", one per channel. */
static void noise_modes(const char *code, int per_channel)
{
	enum { B = 2, C = 2, H = 3, W = 4 };
	gf_net *net, *twin;
	NN_OK(nn_build(&net, be, code, B, 0));
	NN_OK(nn_build(&twin, be, code, B, 0));
	gf_rng a = { 11, 0, 0 }, b = { 11, 0, 0 };
	NN_OK(gf_net_init(net, &a));
	NN_OK(gf_net_init(twin, &b));
	size_t nb, np;
	const float *nc = gf_net_block(net, GF_BUFFERS, &nb), *nc2 = gf_net_block(twin, GF_BUFFERS, NULL);
	assert_int_equal(nb, H * W);
	float want[H * W];
	gf_rng c = { 11, 0, 0 };
	gf_rng_normal(&c, want, H * W, 0.0f, 1.0f);   /* the strength draws nothing: noise_const is the first draw */
	assert_memory_equal(nc, want, sizeof(want));
	assert_memory_equal(nc, nc2, sizeof(want));
	assert_true(a.offset == c.offset);
	float *p = gf_net_block(net, GF_PARAMS, &np);
	assert_int_equal(np, per_channel ? C : 1);
	for (size_t i = 0; i < np; i++)
		assert_true(p[i] == 0.0f);   /* strength starts at 0 */
	p[0] = 0.5f;
	if (per_channel)
		p[1] = -2.0f;
	float x[B * C * H * W];
	for (int i = 0; i < B * C * H * W; i++)
		x[i] = 0.1f * (float)i;
	gf_tensor xt = nn_tensor(x, 4, B, C, H, W), y;
	gf_rng_init(gf_net_rng(net), 5, 9);
	NN_OK(gf_net_forward(net, &xt, NULL, GF_TRAIN));
	NN_OK(gf_net_output(net, &y));
	float z[B * H * W];
	gf_rng zr = { 5, 9, 0 };
	gf_rng_normal(&zr, z, B * H * W, 0.0f, 1.0f);
	assert_true(gf_net_rng(net)->offset == gf_rng_blocks(B * H * W));
	const float *yv = y.data;
	for (int n = 0; n < B; n++)
		for (int ch = 0; ch < C; ch++)
			for (int i = 0; i < H * W; i++) {
				size_t at = ((size_t)n * C + ch) * H * W + i;
				assert_float_equal(yv[at], x[at] + p[per_channel ? ch : 0] * z[n * H * W + i], 1e-6);
			}
	NN_OK(gf_net_forward(net, &xt, NULL, 0));   /* eval: noise_const */
	NN_OK(gf_net_output(net, &y));
	yv = y.data;
	for (int n = 0; n < B; n++)
		for (int ch = 0; ch < C; ch++)
			for (int i = 0; i < H * W; i++) {
				size_t at = ((size_t)n * C + ch) * H * W + i;
				assert_float_equal(yv[at], x[at] + p[per_channel ? ch : 0] * want[i], 1e-6);
			}
	gf_net_destroy(net);
	gf_net_destroy(twin);
}

static void test_noise_modes(void **state)
{
	(void)state;
	noise_modes("return { {'noise', 2}, input_shape = {2, 3, 4} }", 0);
	noise_modes("return { {'noise', 2, strength = 'scalar'}, input_shape = {2, 3, 4} }", 0);
	noise_modes("return { {'noise', 2, strength = 'channel'}, input_shape = {2, 3, 4} }", 1);
}

/* ---- refusals and argument errors ---- */
static void expect_error(const char *code, int rc, const char *msg)
{
	gf_net *net = NULL;
	assert_int_equal(nn_build(&net, be, code, 2, 0), rc);
	if (!strstr(gf_errmsg(), msg)) {
		fprintf(stderr, "expected '%s' in '%s'\n", msg, gf_errmsg());
		fail();
	}
}

static void test_errors(void **state)
{
	(void)state;
	/* every StyleGAN2 kind has a double backward: the path length takes a G of them */
	gf_net *net;
	NN_OK(nn_build(&net, be,
	               "return { {'linear', 4, 2, eqlr = true, bias_init = 1, name = 's'}, {'const', 2, 4, 4, input = 'x'},"
	               " {'modconv', 2, 3, 3, with = 's'}, {'noise', 3}, {'bias_act', 3}, {'fir', up = 2}, input_shape = {4} }",
	               2, 0));
	NN_OK(gf_net_check_backward2(net));
	gf_net_destroy(net);
	expect_error("return { {'fir'}, input_shape = {1, 4, 4} }", GF_EPARAM, "layer 1 (fir): needs pad");
	expect_error("return { {'fir', up = 3}, input_shape = {1, 4, 4} }", GF_EPARAM, "layer 1 (fir): up = 3, down = 1: each 1 or 2");
	expect_error("return { {'fir', pad = {1, -1}}, input_shape = {1, 4, 4} }", GF_EPARAM, "layer 1 (fir): pad must be");
	expect_error("return { {'fir', pad = 0}, input_shape = {1, 2, 2} }", GF_ESHAPE, "the 4x4 filter does not fit");
	expect_error("return { {'linear', 3, 2, eqlr = true, sn = true}, input_shape = {3} }", GF_EPARAM,
	             "layer 1 (linear): eqlr and sn exclude each other");
	expect_error("return { {'conv', 3, 2, 3, lr_mul = 0.1}, input_shape = {3, 4, 4} }", GF_EPARAM,
	             "layer 1 (conv): lr_mul and bias_init need eqlr = true");
	expect_error("return { {'bias_act', 3, act = 'tanh'}, input_shape = {3} }", GF_EPARAM,
	             "layer 1 (bias_act): act = \"tanh\": expected \"linear\", \"relu\" or \"lrelu\"");
	expect_error("return { {'bias_act', 4}, input_shape = {3, 2, 2} }", GF_ESHAPE, "layer 1 (bias_act): expects 4 channels first");
	expect_error("return { {'noise', 3, mode = 'fresh'}, input_shape = {3, 2, 2} }", GF_EPARAM, "layer 1 (noise): mode must be");
	expect_error("return { {'noise', 3, strength = 'pixel'}, input_shape = {3, 2, 2} }", GF_EPARAM,
	             "layer 1 (noise): strength must be \"scalar\" (one per layer, StyleGAN2) or \"channel\"");
	expect_error("return { {'linear', 4, 3, name = 's'}, {'reshape', 3, 1, 1}, {'modconv', 3, 3, 1} , input_shape = {4} }",
	             GF_EPARAM, "layer 3 (modconv): needs with = <the styles");
	expect_error("return { {'linear', 4, 2, name = 's'}, {'reshape', 2, 1, 1}, {'modconv', 2, 3, 1, with = 'x'},"
	             " input_shape = {4} }",
	             GF_ESHAPE, "layer 3 (modconv): expects with = styles (2), got (4)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cases),
		cmocka_unit_test(test_modconv_forms),
		cmocka_unit_test(test_noise_modes),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
