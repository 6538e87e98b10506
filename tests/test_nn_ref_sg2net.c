/* StyleGAN2's networks (luaconf/backbones/stylegan2.lua) against PyTorch
 * 1.13: a tiny conditional G and D (8x8, 4 channels, 2 image channels,
 * 3 classes, conv_clamp 1) built by tests/bench/torch_backbones.py's
 * SG2_G / SG2_D (StyleGAN2-ADA's networks written with torch.nn.functional,
 * independently of the Lua tables), weights copied by name
 * (tests/ref/make_nn_refs_sg2net.py -> tests/ref/nn_ref_sg2net.safetensors):
 * the output, the gradients of L = <w, y> with respect to the input and to
 * every parameter, G's w_avg after a training forward, and D's double
 * backward of P = 1/2 |dL/dx|^2 (R1 through the cmap head), fused and
 * unfused. Also: w_avg's truncation in an eval forward; style
 * mixing (mixing = 1) against tests/ref/nn_ref_mix.safetensors
 * (tests/ref/make_nn_refs_mix.py); the path length on the ws against
 * tests/ref/nn_ref_pl.safetensors (tests/ref/make_nn_refs_pl.py); and an
 * unconditional G against StyleGAN2-ADA's own networks.py
 * (tests/ref/make_nn_refs_sg2ada.py -> tests/ref/nn_ref_sg2ada.safetensors). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ganflow/train.h>

#include "test_nn_refcase.h"

#define TOL 2e-3

static gf_st_file *ref;
static gf_backend *be;
static double worst_seen;

static const char *const G_CODE = "return require('backbones.stylegan2').G{ size = 8, ch = 4, z = 6, w = 5, mapping = 2,"
                                  " channels = 2, classes = 3, clamp = 1, noise = 'const' }";
static const char *const D_CODE = "return require('backbones.stylegan2').D{ size = 8, ch = 4, channels = 2, classes = 3,"
                                  " mbstd = 2, d_mapping = 2, clamp = 1 }";

static int setup(void **state)
{
	(void)state;
	return nn_ref_open("tests/ref/nn_ref_sg2net.safetensors", &ref, &be);
}

static int teardown(void **state)
{
	(void)state;
	fprintf(stderr, "largest relative error: %.3g (tolerance %.1g)\n", worst_seen, TOL);
	nn_ref_close(ref, be);
	return 0;
}

/* The checks of test_nn_refcase.h on the current reference file (ref: the
 * tests below switch files), the worst error kept across them. */
static nn_refcase at_ref(void)
{
	nn_refcase rc = { ref, be, TOL, worst_seen };
	return rc;
}

static void check(const char *name, const float *a, size_t n, double scale)
{
	nn_refcase rc = at_ref();
	nn_rc_check(&rc, name, a, n, scale);
	worst_seen = rc.worst;
}

/* every parameter from "<case>.p.<view>" (the two networks have the same
 * parameters), the buffers that have a reference (the FIR filters are the
 * layers' own) */
static void load_block(gf_net *net, const char *c, gf_block b, const char *what)
{
	nn_refcase rc = at_ref();
	nn_rc_load(&rc, net, c, b, what);
}

static void check_grads(gf_net *net, const char *c, const char *what)
{
	nn_refcase rc = at_ref();
	nn_rc_check_grads(&rc, net, c, what);
	worst_seen = rc.worst;
}

static const float *buffer(gf_net *net, const char *view)
{
	size_t nv;
	const gf_view *v = gf_net_views(net, GF_BUFFERS, &nv);
	for (size_t i = 0; i < nv; i++)
		if (!strcmp(v[i].name, view))
			return gf_net_block(net, GF_BUFFERS, NULL) + v[i].offset;
	fail_msg("no buffer %s", view);
	return NULL;
}

/* A training forward of case c's network (its output against reference
 * y, with w_avg G's tracked mean after it), then the backward of
 * L = <c.w, y>: the gradients of the input and of every parameter. */
static void train_check(gf_net *net, const char *c, const char *y, const gf_tensor *x, const gf_tensor *labels,
                        int w_avg)
{
	char name[160];
	gf_tensor out, dx;
	NN_OK(gf_net_forward(net, x, labels, GF_TRAIN));
	gf_net_output(net, &out);
	check(y, out.data, (size_t)gf_tensor_numel(&out), 0);
	if (w_avg) {
		snprintf(name, sizeof(name), "%s.w_avg", c);
		check(name, buffer(net, "w.w_avg"), 5, 0);
	}
	size_t nw;
	snprintf(name, sizeof(name), "%s.w", c);
	float *w = nn_ref(ref, name, &nw);
	assert_int_equal(nw, (size_t)gf_tensor_numel(&out));
	NN_OK(gf_net_backward(net, w, GF_NEED_DX | GF_NEED_DW));
	NN_OK(gf_net_dx(net, &dx));
	snprintf(name, sizeof(name), "%s.dx", c);
	check(name, dx.data, (size_t)gf_tensor_numel(&dx), 0);
	check_grads(net, c, "g");
	free(w);
}

static void run_case(const char *c, const char *code, int dbwd, unsigned flags)
{
	nn_refcase rc = at_ref();
	int32_t lab[64];
	gf_net *net = nn_rc_forward(&rc, c, code, flags, lab);
	if (!strcmp(c, "g")) {
		char name[160];
		snprintf(name, sizeof(name), "%s.w_avg", c);
		nn_rc_check(&rc, name, buffer(net, "w.w_avg"), 5, 0);
	}
	nn_rc_backward(&rc, net, c, dbwd);
	worst_seen = rc.worst;
	if (!dbwd) {
		/* the mapping's norm2 has no double backward: without the ws
		 * as penalty points (pl = true) the penalty is refused by name */
		assert_int_equal(gf_net_penalty_points(net), 0);
		assert_int_not_equal(gf_net_check_backward2(net), 0);
		assert_non_null(strstr(gf_errmsg(), "norm2"));
	}
	gf_net_destroy(net);
}

static void test_g(void **state)
{
	(void)state;
	run_case("g", G_CODE, 0, 0);
	run_case("g", G_CODE, 0, GF_NET_NOFUSE);
}

static void test_d(void **state)
{
	(void)state;
	run_case("d", D_CODE, 1, 0);
	run_case("d", D_CODE, 1, GF_NET_NOFUSE);
}

/* w_avg: training forwards move the buffer towards the batch mean and pass
 * w through; eval forwards give w_avg + psi (w - w_avg); GF_FREEZE_STATS
 * leaves the buffer alone */
static void test_w_avg(void **state)
{
	(void)state;
	gf_net *net;
	NN_OK(nn_build(&net, be, "return { {'w_avg', 2, beta = 0.5, psi = 0.25}, input_shape = {2} }", 2, 0));
	float xs[4] = { 1, 2, 3, -6 };
	gf_tensor x = nn_tensor(xs, 2, 2, 2), out;
	NN_OK(gf_net_forward(net, &x, NULL, GF_TRAIN));
	const float *avg = buffer(net, "0.w_avg");
	/* 0.5 * 0 + 0.5 * mean = 0.5 (2, -2) */
	assert_float_equal(avg[0], 1.0f, 1e-6);
	assert_float_equal(avg[1], -1.0f, 1e-6);
	gf_net_output(net, &out);
	assert_float_equal(((const float *)out.data)[3], -6.0f, 1e-6);
	NN_OK(gf_net_forward(net, &x, NULL, GF_TRAIN | GF_FREEZE_STATS));
	assert_float_equal(avg[0], 1.0f, 1e-6);
	NN_OK(gf_net_forward(net, &x, NULL, GF_EVAL));
	gf_net_output(net, &out);
	/* 1 + 0.25 (3 - 1) = 1.5; -1 + 0.25 (-6 + 1) = -2.25 */
	assert_float_equal(((const float *)out.data)[2], 1.5f, 1e-6);
	assert_float_equal(((const float *)out.data)[3], -2.25f, 1e-6);
	gf_net_destroy(net);
}

/* Style mixing (mixing = 1, so the batch mixes) against
 * tests/ref/nn_ref_mix.safetensors (tests/ref/make_nn_refs_mix.py: the
 * mapping called on z and z2 with the same modules, the layers from the
 * cutoff 2 on reading w2): the network's generator set to the state the
 * reference drew z2 and the cutoff from; the output, w_avg (moved by w
 * only), the gradients of every parameter (the mapping's from both rows)
 * and z's; then an eval forward gives the unmixed output and draws
 * nothing. */
static const char *const G_MIX = "return require('backbones.stylegan2').G{ size = 8, ch = 4, z = 6, w = 5, mapping = 2,"
                                 " channels = 2, classes = 3, clamp = 1, noise = 'const', mixing = 1 }";

static void mix_case(unsigned flags)
{
	gf_tensor x, lf, out;
	NN_OK(gf_st_get(ref, "mix.x", &x));
	NN_OK(gf_st_get(ref, "mix.labels", &lf));
	int B = (int)x.shape[0];
	int32_t lab[16];
	for (int i = 0; i < B; i++)
		lab[i] = (int32_t)((const float *)lf.data)[i];
	gf_tensor labels = nn_tensor(NULL, 1, B);
	labels.dtype = GF_I32;
	labels.data = lab;
	gf_net *net;
	NN_OK(nn_build(&net, be, G_MIX, B, flags));
	load_block(net, "mix", GF_PARAMS, "p");
	load_block(net, "mix", GF_BUFFERS, "b");
	float *st = nn_ref(ref, "mix.rng", NULL);
	gf_rng *rng = gf_net_rng(net);
	*rng = (gf_rng){ (uint64_t)st[0], (uint64_t)st[1], (uint64_t)st[2] };
	/* the draw the reference made: z2 (B x 6 normals), then the uniforms */
	gf_rng copy = *rng;
	float z2[4 * 6];
	gf_rng_normal(&copy, z2, (size_t)B * 6, 0.0f, 1.0f);
	check("mix.z2", z2, (size_t)B * 6, 0);
	train_check(net, "mix", "mix.y", &x, &labels, 1);
	/* eval: nothing drawn, every layer reads w */
	uint64_t off = rng->offset;
	NN_OK(gf_net_forward(net, &x, &labels, GF_EVAL));
	assert_true(rng->offset == off);
	gf_net_output(net, &out);
	check("mix.y_nomix", out.data, (size_t)gf_tensor_numel(&out), 0);
	free(st);
	gf_net_destroy(net);
}

/* The path length (g_step's pl) against tests/ref/nn_ref_pl.safetensors
 * (tests/ref/make_nn_refs_pl.py, StyleGAN2-ADA's loss.py in w-space): the
 * gradients at the ws (penalty_at), lengths = their RMS over the ws, the
 * mean moved from a0 as g_step moves it, P = weight mean (L - a)^2 and
 * dP/d(every parameter): the synthesis's through the double backward, the
 * mapping's through the ws. */
static const char *const G_PL = "return require('backbones.stylegan2').G{ size = 8, ch = 4, z = 6, w = 5, mapping = 2,"
                                " channels = 2, classes = 3, clamp = 1, noise = 'const', pl = true }";

static void pl_case(unsigned flags)
{
	gf_tensor x, lf;
	NN_OK(gf_st_get(ref, "pl.x", &x));
	NN_OK(gf_st_get(ref, "pl.labels", &lf));
	int B = (int)x.shape[0];
	int32_t lab[16];
	for (int i = 0; i < B; i++)
		lab[i] = (int32_t)((const float *)lf.data)[i];
	gf_tensor labels = nn_tensor(NULL, 1, B);
	labels.dtype = GF_I32;
	labels.data = lab;
	gf_net *net;
	NN_OK(nn_build(&net, be, G_PL, B, flags));
	assert_int_equal(gf_net_penalty_points(net), 4);
	load_block(net, "pl", GF_PARAMS, "p");
	load_block(net, "pl", GF_BUFFERS, "b");
	gf_penalty *pen;
	NN_OK(gf_penalty_create(&pen, net, B));
	float *y = nn_ref(ref, "pl.y", NULL), *a0 = nn_ref(ref, "pl.a0", NULL);
	NN_OK(gf_net_forward(net, &x, &labels, GF_TRAIN));
	/* the moving mean and the results in device doubles (the CPU's: host memory) */
	double *dev;
	NN_OK(be->ops->alloc(be, (void **)&dev, 3 * sizeof(double)));
	dev[0] = a0[0];
	gf_penalty_desc d = { .distance = GF_PENALTY_DISTANCE, .weight = 2.0, .decay = 0.01, .scale = 1.0 };
	NN_OK(gf_penalty_lengths(pen, y));
	NN_OK(gf_penalty_apply(pen, &d, dev, dev + 1, NULL, GF_NEED_DW));
	float af = (float)dev[0], pf = (float)dev[1];
	assert_true(dev[0] == a0[0] + 0.01 * (dev[2] - a0[0])); /* the mean moved first, by the batch's mean length */
	check("pl.a", &af, 1, 0);
	check("pl.P", &pf, 1, 0);
	be->ops->free(be, dev);
	check_grads(net, "pl", "g");
	free(y);
	free(a0);
	gf_penalty_destroy(pen);
	gf_net_destroy(net);
}

/* A case fused and unfused against its own reference file, in place of
 * the group's for the time. */
static void against(const char *rel, void (*one_case)(unsigned flags))
{
	gf_st_file *g_ref = ref;
	if (gf_st_open(&ref, nn_src(rel)))
		fail_msg("%s", gf_errmsg());
	one_case(0);
	one_case(GF_NET_NOFUSE);
	gf_st_close(ref);
	ref = g_ref;
}

static void test_pl(void **state)
{
	(void)state;
	against("tests/ref/nn_ref_pl.safetensors", pl_case);
}

static void test_mix(void **state)
{
	(void)state;
	against("tests/ref/nn_ref_mix.safetensors", mix_case);
}

/* StyleGAN2-ADA's own Generator (training/networks.py, run by
 * tests/ref/make_nn_refs_sg2ada.py from a copy outside the repository ->
 * tests/ref/nn_ref_sg2ada.safetensors): the parameter count (one noise
 * strength per synthesis layer: theirs at this size and at
 * stylegan2_fashion's CPU width, with and without classes), then with its
 * weights the eval output with the constant noise (and truncated, psi
 * 0.7), the training output, w_avg after it, and the gradients of
 * L = <w, y> with respect to z and every parameter. */
static const char *const G_ADA = "return require('backbones.stylegan2').G{ size = 8, ch = 4, z = 6, w = 5, mapping = 2,"
                                 " channels = 2, clamp = 1, noise = 'const' }";
static const char *const G_ADA_PSI = "local G = require('backbones.stylegan2').G{ size = 8, ch = 4, z = 6, w = 5, mapping = 2,"
                                     " channels = 2, clamp = 1, noise = 'const' }"
                                     " for _, l in ipairs(G) do if l[1] == 'w_avg' then l.psi = 0.7 end end return G";

static size_t count_of(const char *code)
{
	gf_net *net;
	size_t np;
	NN_OK(nn_build(&net, be, code, 2, 0));
	gf_net_block(net, GF_PARAMS, &np);
	gf_net_destroy(net);
	return np;
}

static void ada_case(unsigned flags)
{
	float *c = nn_ref(ref, "ada.count", NULL), *c32 = nn_ref(ref, "ada.count32", NULL),
	      *c32c = nn_ref(ref, "ada.count32c", NULL);
	assert_int_equal(count_of(G_ADA), (size_t)c[0]);
	assert_int_equal(count_of("return require('backbones.stylegan2').G{ ch = 32, z = 64, w = 64, channels = 1 }"),
	                 (size_t)c32[0]);
	assert_int_equal(count_of("return require('backbones.stylegan2').G{ ch = 32, z = 64, w = 64, channels = 1,"
	                          " classes = 10 }"),
	                 (size_t)c32c[0]);
	gf_tensor x, out;
	NN_OK(gf_st_get(ref, "ada.x", &x));
	int B = (int)x.shape[0];
	gf_net *net, *trunc;
	NN_OK(nn_build(&net, be, G_ADA, B, flags));
	NN_OK(nn_build(&trunc, be, G_ADA_PSI, B, flags));
	load_block(net, "ada", GF_PARAMS, "p");
	load_block(net, "ada", GF_BUFFERS, "b");
	load_block(trunc, "ada", GF_PARAMS, "p");
	load_block(trunc, "ada", GF_BUFFERS, "b");
	NN_OK(gf_net_forward(net, &x, NULL, GF_EVAL));
	gf_net_output(net, &out);
	check("ada.y", out.data, (size_t)gf_tensor_numel(&out), 0);
	NN_OK(gf_net_forward(trunc, &x, NULL, GF_EVAL));
	gf_net_output(trunc, &out);
	check("ada.y_trunc", out.data, (size_t)gf_tensor_numel(&out), 0);
	train_check(net, "ada", "ada.y_train", &x, NULL, 1);
	free(c);
	free(c32);
	free(c32c);
	gf_net_destroy(net);
	gf_net_destroy(trunc);
}

static void test_sg2ada(void **state)
{
	(void)state;
	against("tests/ref/nn_ref_sg2ada.safetensors", ada_case);
}

/* The draw: over many training forwards, a batch mixes with probability
 * prob, and layer i reads w2 with probability prob i / (num_ws - 1) (the
 * cutoff uniform in 1..num_ws-1), never layer 0, and a layer after one
 * that reads w2 reads it too; eval forwards never mix. Rows told apart
 * by the input: row 0 is x (all 3), row 1 normalised z2 (rms 1). */
static void test_mix_prob(void **state)
{
	(void)state;
	enum { L = 4, N = 3000, B = 2, Z = 4 };
	static const float probs[] = { 0.9f, 0.3f, 0.0f };
	for (size_t k = 0; k < sizeof(probs) / sizeof(probs[0]); k++) {
		char code[600];
		snprintf(code, sizeof(code),
		         "return { {'style_mix', z = %d, prob = %g, layers = %d, name = 'mix'},"
		         " {'style_w', index = 0, source = 'mix', input = 'mix', name = 'w0'},"
		         " {'style_w', index = 1, source = 'mix', input = 'mix', name = 'w1'},"
		         " {'style_w', index = 2, source = 'mix', input = 'mix', name = 'w2'},"
		         " {'style_w', index = 3, source = 'mix', input = 'mix', name = 'w3'},"
		         " {'concat', input = 'w0', with = 'w1', name = 'a'}, {'concat', input = 'w2', with = 'w3', name = 'b'},"
		         " {'concat', input = 'a', with = 'b'}, input_shape = {%d} }",
		         Z, (double)probs[k], L, Z);
		gf_net *net;
		NN_OK(nn_build(&net, be, code, B, 0));
		float xs[B * Z], *y = NULL;
		for (int i = 0; i < B * Z; i++)
			xs[i] = 3.0f;
		gf_tensor x = nn_tensor(xs, 2, B, Z), out;
		int reads[L] = { 0 }, mixed = 0;
		for (int it = 0; it < N; it++) {
			NN_OK(gf_net_forward(net, &x, NULL, it % 2 ? GF_TRAIN : GF_EVAL));
			gf_net_output(net, &out);
			y = out.data;
			int prev = 0, any = 0;
			for (int i = 0; i < L; i++) {
				int w2 = y[i * Z] != 3.0f;   /* sample 0; sample 1 reads the same row */
				assert_int_equal(w2, y[L * Z + i * Z] != 3.0f);
				assert_true(w2 >= prev);
				if (it % 2 == 0)
					assert_int_equal(w2, 0);   /* eval */
				reads[i] += w2;
				prev = w2;
				any |= w2;
			}
			mixed += any;
		}
		double n = N / 2, p = probs[k], tol = 5 * sqrt(0.25 / n);
		fprintf(stderr, "prob %.1f: mixed %.3f, layer reads of w2 %.3f %.3f %.3f %.3f (tolerance %.3f)\n", p,
		        mixed / n, reads[0] / n, reads[1] / n, reads[2] / n, reads[3] / n, tol);
		assert_true(fabs(mixed / n - p) <= tol);
		assert_int_equal(reads[0], 0);
		for (int i = 1; i < L; i++)
			assert_true(fabs(reads[i] / n - p * i / (L - 1)) <= tol);
		gf_net_destroy(net);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_g),
		cmocka_unit_test(test_d),
		cmocka_unit_test(test_w_avg),
		cmocka_unit_test(test_mix),
		cmocka_unit_test(test_pl),
		cmocka_unit_test(test_mix_prob),
		cmocka_unit_test(test_sg2ada),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
