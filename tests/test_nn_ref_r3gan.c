/* Grouped convolutions and R3GAN's networks against PyTorch 1.13:
 *
 *  - test_layers: the cases of tests/ref/make_nn_refs_r3.py
 *    (tests/ref/nn_ref_r3.safetensors, written with torch.nn.functional):
 *    grouped convolutions on the CPU backend's generic, direct (depthwise)
 *    and Winograd paths, the grouped transposed convolution, and R3GAN's
 *    parts as compositions of kinds: the generative and discriminative
 *    bases, the interpolative resamplers, the residual block. The output,
 *    the gradients of L = <w, y> with respect to the input and every
 *    parameter, and the double backward of P = 1/2 |dL/dx|^2 through
 *    gf_net_backward2; fused and unfused.
 *  - test_networks: luaconf/backbones/r3gan.lua's G and D, conditional and
 *    not, against the authors' own R3GAN/Networks.py, run by
 *    tests/ref/make_nn_refs_r3gan.py with the weights copied
 *    (tests/ref/nn_ref_r3gan.safetensors): the same values, plus D's R1
 *    double backward (and G's, through z).
 *  - test_training_step: one training step of R3GAN's loss, D's
 *    (relativistic pairs, gamma/2 (R1 + R2)) and G's, against the authors'
 *    R3GAN/Trainer.py on the same networks (the same file): the losses,
 *    the penalties and every parameter's gradient, computed with the calls
 *    d_step and g_step make, in one batch and in two accumulated halves.
 *  - test_init: R3GAN's initialisation (init = "msr"): the variance
 *    scaling by the number of blocks, each block's last 1x1 at zero (the
 *    block is the identity), the bases' statistics.
 *  - test_errors: groups that do not divide, init_gain without msr, the
 *    backbone's option checks; the grouped FLOPs; no sub-pixel fusion of a
 *    grouped conv. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <ganflow/train.h>

#include "test_nn_refcase.h"

#define TOL_LAYERS 2e-4   /* largest seen 4.6e-5 (the Winograd case's double backward) */
#define TOL_NETS 1e-4     /* largest seen 1.2e-5 */

static gf_backend *be;

static int setup(void **state)
{
	(void)state;
	gf_backend_opts o = { .threads = 2 };
	return gf_backend_open("cpu", &o, &be);
}

static int teardown(void **state)
{
	(void)state;
	gf_backend_close(be);
	return 0;
}

static void run_file(const char *rel, const char *const cases[][2], size_t n, double tol)
{
	gf_st_file *ref;
	if (gf_st_open(&ref, nn_src(rel)))
		fail_msg("%s", gf_errmsg());
	nn_refcase rc = { ref, be, tol, 0 };
	for (size_t i = 0; i < n; i++) {
		if (getenv("GC_VERBOSE"))
			fprintf(stderr, "%s\n", cases[i][0]);
		nn_rc_run(&rc, cases[i][0], cases[i][1], 1, 0);
		nn_rc_run(&rc, cases[i][0], cases[i][1], 1, GF_NET_NOFUSE);
	}
	fprintf(stderr, "%s: largest relative error %.3g (tolerance %.1g)\n", rel, rc.worst, tol);
	gf_st_close(ref);
}

/* the tables of make_nn_refs_r3.py's cases (its comments repeat them) */
static const char *const layer_cases[][2] = {
	{ "gconv", "return { {'conv', 8, 12, 3, 1, 1, groups = 4}, {'tanh'}, {'conv', 12, 6, 3, 2, 1, groups = 3, bias = false},"
	           " {'tanh'}, {'conv', 6, 6, 3, 1, 1, groups = 6}, {'tanh'}, {'conv', 6, 12, 1, groups = 2},"
	           " input_shape = {8, 7, 7} }" },
	{ "gconv_winograd", "return { {'conv', 16, 16, 3, 1, 1, groups = 2}, {'tanh'},"
	                    " {'conv', 16, 24, 3, 1, 1, groups = 2, bias = false}, input_shape = {16, 12, 12} }" },
	{ "gtconv", "return { {'tconv', 6, 4, 4, 2, 1, groups = 2}, {'tanh'}, {'tconv', 4, 4, 3, 1, 1, groups = 4, bias = false},"
	            " input_shape = {6, 3, 3} }" },
	{ "bases", "return { {'linear', 5, 6, bias = false, name = 'lin'}, {'reshape', 6, 1, 1},"
	           " {'tconv', 6, 6, 4, groups = 6, bias = false, name = 'basis'}, {'tanh'},"
	           " {'conv', 6, 6, 4, groups = 6, bias = false, name = 'dbasis'}, {'flatten'},"
	           " {'linear', 6, 3, bias = false, name = 'dlin'}, input_shape = {5} }" },
	{ "resample", "return { {'conv', 3, 4, 1, bias = false, name = 'uc'}, {'fir', up = 2, name = 'up'}, {'tanh'},"
	              " {'fir', down = 2, name = 'down'}, {'conv', 4, 2, 1, bias = false, name = 'dc'}, input_shape = {3, 5, 4} }" },
	{ "block", "local t = { input_shape = {8, 6, 6} } local from = 'x'"
	           " for _, b in ipairs({'b0', 'b1'}) do"
	           "  t[#t + 1] = {'conv', 8, 16, 1, bias = false, input = from, name = b .. '_l1'}"
	           "  t[#t + 1] = {'bias_act', 16, gain = 1, name = b .. '_a1'}"
	           "  t[#t + 1] = {'conv', 16, 16, 3, 1, 1, groups = 4, bias = false, name = b .. '_l2'}"
	           "  t[#t + 1] = {'bias_act', 16, gain = 1, name = b .. '_a2'}"
	           "  t[#t + 1] = {'conv', 16, 8, 1, bias = false, name = b .. '_l3'}"
	           "  t[#t + 1] = {'add', with = from, name = b} from = b"
	           " end return t" },
};

static void test_layers(void **state)
{
	(void)state;
	run_file("tests/ref/nn_ref_r3.safetensors", layer_cases, sizeof(layer_cases) / sizeof(layer_cases[0]), TOL_LAYERS);
}

/* make_nn_refs_r3gan.py's networks: 16x16 RGB, z 6, three stages */
#define R3_OPTS "size = 16, widths = {8, 6, 6}, cardinality = {4, 2, 3}, blocks = {1, 2, 1}"
static const char *const net_cases[][2] = {
	{ "g", "return require('backbones.r3gan').G{ z = 6, " R3_OPTS " }" },
	{ "g_cond", "return require('backbones.r3gan').G{ z = 6, classes = 3, embed = 4, " R3_OPTS " }" },
	{ "d", "return require('backbones.r3gan').D{ " R3_OPTS " }" },
	{ "d_cond", "return require('backbones.r3gan').D{ classes = 3, embed = 5, " R3_OPTS " }" },
};

static void test_networks(void **state)
{
	(void)state;
	run_file("tests/ref/nn_ref_r3gan.safetensors", net_cases, sizeof(net_cases) / sizeof(net_cases[0]), TOL_NETS);
}

/* ---- the training step (R3GAN/Trainer.py) ----
 * make_nn_refs_r3gan.py's "step" and "step_cond": the authors'
 * AccumulateDiscriminatorGradients (D minimises mean softplus(-(D(x) -
 * D(G(z)))) + gamma/2 (R1 + R2), the pairs conditioned on the real batch's
 * labels) and AccumulateGeneratorGradients (G minimises mean
 * softplus(-(D(G(z)) - D(x)))) on the G and D of the cases above (their
 * weights, "g[_cond].p.*", "d[_cond].p.*") and one batch of 4 pairs,
 * against ganflow's API called as the stages call it: d_step's pair_step
 * and d_pair_penalty (one forward of [x; G(z)], the relativistic loss with
 * target 1 and scale 1/accumulate, R1 on the reals and R2 on the fakes as
 * one penalty split at the pair, weight = weight2 = gamma, its double
 * backward walking the loss's gradient too), g_step's train_ops with
 * g_rp_pair (a replica of D on [G(z); x], the loss, the replica's input
 * gradient, its first half into G's backward). With accumulate = 2 the
 * batch runs as two micro-batches of 2 pairs, each scaled 1/2 and added
 * (GF_ACCUMULATE), which must give the whole batch's means. */

#define TOL_STEP 1e-4   /* largest seen 1.8e-5 (step_cond's D gradients) */

typedef struct step_ref {
	nn_refcase *rc;
	const char *c;          /* "step" or "step_cond" */
	int n, acc, m;          /* pairs, micro-batches, pairs per micro-batch */
	size_t in_numel;        /* floats per image */
	float *z, *x, *gamma;
	int32_t lab[64];        /* the real batch's labels, G's and both halves of the pair's */
	int has_lab;
	float *pair, *dpred;    /* [first; second] of one micro-batch, D's output gradient */
	int32_t plab[64];
} step_ref;

/* A network's input of b samples at data */
static gf_tensor net_input(const gf_net *net, void *data, int b)
{
	gf_tensor in, out;
	gf_net_shapes(net, &in, &out);
	in.data = data;
	in.shape[0] = b;
	return in;
}

/* floats per sample of a network's input */
static size_t in_numel(const gf_net *net)
{
	gf_tensor in = net_input(net, NULL, 1);
	return (size_t)gf_tensor_numel(&in);
}

static float *step_get(step_ref *s, const char *what, size_t *n)
{
	char name[160];
	snprintf(name, sizeof(name), "%s.%s", s->c, what);
	float *p = nn_ref(s->rc->ref, name, n);
	assert_non_null(p);
	return p;
}

static void step_check(step_ref *s, const char *what, const float *a, size_t n)
{
	char name[160];
	snprintf(name, sizeof(name), "%s.%s", s->c, what);
	nn_rc_check(s->rc, name, a, n, 0);
}

/* G's forward on micro-batch k's z (the real batch's labels), as g_step's
 * generate; the fakes also into fakes (all of them) when given. */
static void step_generate(step_ref *s, gf_net *g, int k, float *fakes)
{
	gf_tensor zt = net_input(g, s->z + (size_t)k * s->m * in_numel(g), s->m);
	gf_tensor lt = gf_tensor_make(s->lab + k * s->m, GF_I32, 1, (int64_t[]){ s->m }), out;
	NN_OK(gf_net_forward(g, &zt, s->has_lab ? &lt : NULL, GF_TRAIN));
	gf_net_output(g, &out);
	assert_int_equal(gf_tensor_numel(&out), (int64_t)s->m * (int64_t)s->in_numel);
	if (fakes)
		memcpy(fakes + (size_t)k * s->m * s->in_numel, out.data, (size_t)gf_tensor_numel(&out) * sizeof(float));
}

/* D (or the replica) on the pair batch [first; second] of micro-batch k,
 * both halves with its labels; the relativistic loss (target 1, scale
 * 1/accumulate) into s->dpred, returned. */
static float step_pair(step_ref *s, gf_net *d, const float *first, const float *second, int k, unsigned mode)
{
	size_t half = (size_t)s->m * s->in_numel;
	memcpy(s->pair, first, half * sizeof(float));
	memcpy(s->pair + half, second, half * sizeof(float));
	for (int i = 0; i < s->m; i++)
		s->plab[i] = s->plab[s->m + i] = s->lab[k * s->m + i];
	gf_tensor xt = net_input(d, s->pair, 2 * s->m), out;
	gf_tensor lt = gf_tensor_make(s->plab, GF_I32, 1, (int64_t[]){ 2 * s->m });
	NN_OK(gf_net_forward(d, &xt, s->has_lab ? &lt : NULL, mode));
	gf_net_output(d, &out);
	float l;
	NN_OK(gf_loss(s->rc->be, GF_LOSS_RELATIVISTIC, &l, s->dpred, &out, NULL, 1.0f, 1.0f / (float)s->acc));
	return l;
}

/* Builds network case net (a row of net_cases) for batch b with the case's weights. */
static gf_net *step_net(step_ref *s, const char *const net[2], int b, unsigned flags)
{
	gf_net *n;
	NN_OK(nn_build(&n, s->rc->be, net[1], b, flags));
	nn_rc_load(s->rc, n, net[0], GF_PARAMS, "p");
	nn_rc_load(s->rc, n, net[0], GF_BUFFERS, "b");
	return n;
}

/* One training-step case c on G net_cases[gi] and D net_cases[di] in acc
 * micro-batches. */
static void step_case(nn_refcase *rc, const char *c, int gi, int di, int acc, unsigned flags)
{
	step_ref s = { .rc = rc, .c = c, .acc = acc };
	size_t nx, nz, ng, nl;
	s.x = step_get(&s, "x", &nx);
	s.z = step_get(&s, "z", &nz);
	s.gamma = step_get(&s, "gamma", &ng);
	char name[160];
	gf_tensor t;
	snprintf(name, sizeof(name), "%s.x", c);
	NN_OK(gf_st_get(rc->ref, name, &t));
	s.n = (int)t.shape[0];
	assert_true(s.n <= 32 && s.n % acc == 0);
	s.m = s.n / acc;
	snprintf(name, sizeof(name), "%s.labels", c);
	s.has_lab = !gf_st_get(rc->ref, name, &t);
	float *labf = s.has_lab ? step_get(&s, "labels", &nl) : NULL;
	/* G at the batch, D at the pair batch (d_step's net_batch, g_step's replica) */
	gf_net *g = step_net(&s, net_cases[gi], s.n, flags), *d = step_net(&s, net_cases[di], 2 * s.n, flags);
	s.in_numel = in_numel(d);
	assert_true(nx == (size_t)s.n * s.in_numel && nz == (size_t)s.n * in_numel(g));
	for (int i = 0; i < s.n; i++)
		s.lab[i] = labf ? (int32_t)labf[i] : 0;
	s.pair = malloc(2 * (size_t)s.m * s.in_numel * sizeof(float));
	s.dpred = malloc(2 * (size_t)s.m * sizeof(float));
	float *fakes = malloc(nx * sizeof(float)), *dout = malloc(2 * (size_t)s.n * sizeof(float));
	size_t half = (size_t)s.m * s.in_numel;

	/* D's step: d_step's pair_step and d_pair_penalty */
	gf_penalty *pen;
	NN_OK(gf_penalty_create(&pen, d, 2 * s.m));
	gf_penalty_desc pd = { .distance = GF_PENALTY_SQUARE, .weight = s.gamma[0], .scale = 1.0 / acc, .split = s.m,
		               .weight2 = s.gamma[0] };
	double pout[4], r1 = 0, r2 = 0;
	float dloss = 0;
	for (int k = 0; k < acc; k++) {
		step_generate(&s, g, k, fakes);
		dloss += step_pair(&s, d, s.x + k * half, fakes + k * half, k, GF_TRAIN);
		gf_tensor out;
		gf_net_output(d, &out);
		memcpy(dout + k * s.m, out.data, (size_t)s.m * sizeof(float));
		memcpy(dout + s.n + k * s.m, (float *)out.data + s.m, (size_t)s.m * sizeof(float));
		NN_OK(gf_penalty_lengths(pen, NULL));
		NN_OK(gf_penalty_apply(pen, &pd, NULL, pout, s.dpred, GF_NEED_DW | (k ? GF_ACCUMULATE : 0)));
		/* P = gamma mean |g|^2 / 2 of each part: R3GAN's R1 and R2 are the mean |g|^2 */
		r1 += 2 * pout[0] / s.gamma[0] / acc;
		r2 += 2 * pout[2] / s.gamma[0] / acc;
	}
	float r1f = (float)r1, r2f = (float)r2;
	step_check(&s, "fake", fakes, nx);
	step_check(&s, "d_out", dout, 2 * (size_t)s.n);
	step_check(&s, "d_loss", &dloss, 1);
	step_check(&s, "r1", &r1f, 1);
	step_check(&s, "r2", &r2f, 1);
	nn_rc_check_grads(rc, d, c, "gd");

	/* G's step: g_step's train_ops on g_rp_pair's [G(z); x], through a replica of D */
	gf_net *rep = step_net(&s, net_cases[di], 2 * s.n, flags);
	float gloss = 0;
	for (int k = 0; k < acc; k++) {
		step_generate(&s, g, k, NULL);
		gf_tensor gout, dx;
		gf_net_output(g, &gout);
		gloss += step_pair(&s, rep, gout.data, s.x + k * half, k, GF_TRAIN | GF_FREEZE_STATS);
		NN_OK(gf_net_backward(rep, s.dpred, GF_NEED_DX));
		NN_OK(gf_net_dx(rep, &dx)); /* G's backward reads its first half, the fakes' */
		NN_OK(gf_net_backward(g, dx.data, GF_NEED_DW | (k ? GF_ACCUMULATE : 0)));
	}
	step_check(&s, "g_loss", &gloss, 1);
	nn_rc_check_grads(rc, g, c, "gg");

	gf_penalty_destroy(pen);
	gf_net_destroy(rep);
	gf_net_destroy(d);
	gf_net_destroy(g);
	free(fakes);
	free(dout);
	free(s.pair);
	free(s.dpred);
	free(s.x);
	free(s.z);
	free(s.gamma);
	free(labf);
}

static void test_training_step(void **state)
{
	(void)state;
	gf_st_file *ref;
	if (gf_st_open(&ref, nn_src("tests/ref/nn_ref_r3gan.safetensors")))
		fail_msg("%s", gf_errmsg());
	nn_refcase rc = { ref, be, TOL_STEP, 0 };
	for (int acc = 1; acc <= 2; acc++)
		for (unsigned f = 0; f < 2; f++) {
			step_case(&rc, "step", 0, 2, acc, f ? GF_NET_NOFUSE : 0);
			step_case(&rc, "step_cond", 1, 3, acc, f ? GF_NET_NOFUSE : 0);
		}
	fprintf(stderr, "training step: largest relative error %.3g (tolerance %.1g)\n", rc.worst, TOL_STEP);
	gf_st_close(ref);
}

/* ---- initialisation ---- */

static const gf_view *find_view(gf_net *net, const char *name)
{
	size_t nv;
	const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
	for (size_t i = 0; i < nv; i++)
		if (!strcmp(v[i].name, name))
			return &v[i];
	fail_msg("no parameter %s", name);
	return NULL;
}

/* The mean and standard deviation of parameter `name` against 0 and std
 * (within 4 standard errors of each: 4 std / sqrt(n) and 4 std /
 * sqrt(2 n) for n normal values), or all zero. */
static void expect_std(gf_net *net, const char *name, double std)
{
	const gf_view *v = find_view(net, name);
	const float *p = gf_net_block(net, GF_PARAMS, NULL) + v->offset;
	double s = 0, s2 = 0;
	for (size_t i = 0; i < v->numel; i++)
		s += p[i], s2 += (double)p[i] * p[i];
	double mean = s / (double)v->numel, sd = sqrt(s2 / (double)v->numel - mean * mean);
	if (std == 0) {
		if (s2 != 0)
			fail_msg("%s: not zero (sum of squares %g)", name, s2);
		return;
	}
	if (getenv("GC_VERBOSE"))
		fprintf(stderr, "  %s: mean %.4f std %.4f (want %.4f, %zu values)\n", name, mean, sd, std, v->numel);
	double n = (double)v->numel;
	if (fabs(sd / std - 1) > 4 / sqrt(2 * n) || fabs(mean) > 4 * std / sqrt(n))
		fail_msg("%s: mean %g, std %g; R3GAN's initialisation has 0 and %g", name, mean, sd, std);
}

static void test_init(void **state)
{
	(void)state;
	/* 4 blocks: gain sqrt(2 / 1.04) 4^(-1/4) on each block's first two convs */
	gf_net *g, *d;
	NN_OK(nn_build(&g, be, "return require('backbones.r3gan').G{ size = 16, z = 32, widths = 32, cardinality = 4,"
	                       " blocks = {1, 2, 1}, classes = 10 }", 2, 0));
	NN_OK(nn_build(&d, be, "return require('backbones.r3gan').D{ size = 16, widths = 32, cardinality = 4,"
	                       " blocks = {1, 2, 1}, classes = 10, embed = 64 }", 2, 0));
	gf_rng r = { 5, 0, 0 };
	NN_OK(gf_net_init(g, &r));
	NN_OK(gf_net_init(d, &r));
	double gain = sqrt(2 / 1.04) * pow(4, -0.25);
	expect_std(g, "embed.weight", 1 / sqrt(10.0));
	expect_std(g, "s4_basis_lin.weight", 1 / sqrt(64.0));   /* z and its embedding of z's size */
	expect_std(g, "s4_basis.weight", 1);
	expect_std(g, "s8_b1_l1.weight", gain / sqrt(32.0));
	expect_std(g, "s8_b1_l2.weight", gain / sqrt(16 * 9.0));   /* 64 expanded channels in 4 groups */
	expect_std(g, "s8_b1_l3.weight", 0);
	expect_std(g, "s8_b1_a1.bias", 0);
	expect_std(g, "out.weight", 1 / sqrt(32.0));
	expect_std(d, "in.weight", 1 / sqrt(3.0));
	expect_std(d, "s16_b0_l2.weight", gain / sqrt(16 * 9.0));
	expect_std(d, "basis.weight", 1 / sqrt(16.0));
	expect_std(d, "basis_lin.weight", 1 / sqrt(32.0));
	expect_std(d, "embed.weight", 1 / sqrt(64.0) / sqrt(10.0));
	/* every block starts as the identity: its output is its input */
	float z[2 * 32];
	int32_t lab[2] = { 3, 7 };
	gf_rng_normal(&r, z, 64, 0, 1);
	gf_tensor zt = nn_tensor(z, 2, 2, 32), lt = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ 2 }), a, b;
	NN_OK(gf_net_forward(g, &zt, &lt, GF_TRAIN));
	static const char *const pairs[][2] = { { "s4_basis", "s4_b0" }, { "s8_up", "s8_b0" }, { "s8_b0", "s8_b1" },
		                                { "s16_up", "s16_b0" } };
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		NN_OK(gf_net_node(g, pairs[i][0], &a));
		NN_OK(gf_net_node(g, pairs[i][1], &b));
		assert_int_equal(gf_tensor_numel(&a), gf_tensor_numel(&b));
		assert_memory_equal(a.data, b.data, (size_t)gf_tensor_numel(&a) * sizeof(float));
	}
	gf_net_destroy(g);
	gf_net_destroy(d);
}

/* ---- errors ---- */

static void expect_build_error(const char *code, int rc, const char *msg)
{
	gf_net *net = NULL;
	gf_value v;
	int got = gf_lua_eval(code, &v);
	if (!got) {
		gf_net_opts o = { .max_batch = 2 };
		got = gf_net_create(&net, be, &v, &o);
		gf_value_free(&v);
	}
	if (got != rc || !strstr(gf_errmsg(), msg))
		fail_msg("%s\n  gave %s: %s\n  wanted %s containing '%s'", code, gf_strerror(got), gf_errmsg(), gf_strerror(rc),
		         msg);
	assert_null(net);
}

static void test_errors(void **state)
{
	(void)state;
	expect_build_error("return { {'conv', 6, 4, 3, groups = 4}, input_shape = {6, 5, 5} }", GF_EPARAM,
	                   "layer 1 (conv): groups = 4 must divide the 6 input and 4 output channels");
	expect_build_error("return { {'tconv', 4, 6, 3, groups = 4}, input_shape = {4, 5, 5} }", GF_EPARAM,
	                   "layer 1 (tconv): groups = 4 must divide the 4 input and 6 output channels");
	expect_build_error("return { {'conv', 4, 4, 3, groups = 0}, input_shape = {4, 5, 5} }", GF_EPARAM, "groups");
	expect_build_error("return { {'linear', 4, 4, init_gain = 2}, input_shape = {4} }", GF_EPARAM,
	                   "layer 1 (linear): init_gain needs init = \"msr\"");
	expect_build_error("return { {'linear', 4, 4, init = 'msr', init_gain = -1}, input_shape = {4} }", GF_EPARAM,
	                   "init_gain = -1 must be >= 0");
	expect_build_error("return { {'relu', init_gain = 2}, input_shape = {4} }", GF_EPARAM,
	                   "layer 1 (relu): unknown key 'init_gain'");
	expect_build_error("return require('backbones.r3gan').G{ widths = 8, cardinality = 3 }", GF_ELUA,
	                   "r3gan.G: cardinality 3 does not divide the 16 expanded channels of the 4x4 stage");
	expect_build_error("return require('backbones.r3gan').D{ widths = {8, 8} }", GF_ELUA,
	                   "r3gan.D: widths must be a number or a list of 4 (one per stage from 4x4), got 2 values");
	expect_build_error("return require('backbones.r3gan').D{ size = 24 }", GF_ELUA,
	                   "r3gan.D: size must be 4 times a power of 2, got 24");
	expect_build_error("return require('backbones.r3gan').G{ blocks = 0 }", GF_ELUA,
	                   "r3gan.G: the network needs at least one block");
	expect_build_error("return require('backbones.r3gan').G{ width = 8 }", GF_ELUA, "r3gan.G: unknown option 'width'");
	/* FLOPs of the grouped weight: 2 B (out values) (in / g) k k, and the
	 * grouped tconv's 2 B (in values) (out / g) k k */
	gf_net *f;
	NN_OK(nn_build(&f, be, "return { {'conv', 8, 12, 3, 1, 1, groups = 4}, {'tconv', 12, 6, 4, 2, 1, groups = 3},"
	                       " input_shape = {8, 5, 5} }", 2, 0));
	double model;
	gf_net_flops(f, 2, 0, &model, NULL);
	assert_true(fabs(model - (2.0 * 2 * (12 * 25) * 2 * 9 + 2.0 * 2 * (12 * 25) * 2 * 16)) < 0.5);
	gf_net_destroy(f);
	/* groups stop the sub-pixel fusion (upsample + 3x3 conv): both layers run */
	gf_net *net;
	NN_OK(nn_build(&net, be, "return { {'upsample', 2}, {'conv', 4, 4, 3, 1, 1, groups = 2}, input_shape = {4, 3, 3} }", 2,
	               0));
	char buf[2048];
	gf_net_summary(net, buf, sizeof(buf));
	assert_null(strstr(buf, "sub-pixel"));
	gf_net_destroy(net);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layers),
		cmocka_unit_test(test_networks),
		cmocka_unit_test(test_training_step),
		cmocka_unit_test(test_init),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
