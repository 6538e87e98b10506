/* Conditional batchnorm (the cbn kind) against PyTorch: class-embedding
 * and cond-projection gains and biases, with and without spectral norm,
 * 2-d, 3-d and 4-d inputs, fused relu/lrelu, and the ResNet block
 * (BigGAN's G block: SN convs, cond cBNs, ReLU, upsample, 1x1 shortcut,
 * add). Two training forwards each
 * (output, input gradient, which through the splits of the cond cases
 * includes the cond source's gradient, every parameter gradient), then the
 * buffers (running statistics, u and v) and an eval forward, compared with
 * tests/ref/nn_ref4.safetensors, which tests/ref/make_nn_refs4.py wrote
 * with torch 1.13 from the same hash-formula parameters (nn_fill_params).
 * Also: GF_FREEZE_STATS leaves the buffers alone, the results do not
 * depend on the thread count, docs/nn.md's example tables run, and the
 * new parameters and buffers round-trip through a checkpoint (3 steps +
 * save + resume + 3 steps = 6 steps bit for bit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include <cmocka.h>

#include "test_nn_util.h"

#define TOL 1e-4   /* relative, with a floor of 1e-2 of the tensor's largest value */

static gf_st_file *ref;
static gf_backend *be;

static int setup(void **state)
{
	(void)state;
	return nn_ref_open("tests/ref/nn_ref4.safetensors", &ref, &be);
}

static int teardown(void **state)
{
	(void)state;
	nn_ref_close(ref, be);
	return 0;
}

static void check(const char *name, const float *a, size_t n)
{
	size_t rn = 0;
	float *r = nn_ref(ref, name, &rn);
	assert_non_null(r);
	assert_int_equal(rn, n);
	if (getenv("GF_VERBOSE")) {
		double md = 0;
		for (size_t i = 0; i < n; i++)
			md = fabs((double)a[i] - r[i]) > md ? fabs((double)a[i] - r[i]) : md;
		fprintf(stderr, "  %-28s max |diff| %.3g\n", name, md);
	}
	if (!nn_close(name, a, r, n, TOL))
		fail();
	free(r);
}

/* A gradient that is zero in exact arithmetic (the bias of a conv feeding
 * a batchnorm, which the normalisation cancels) is rounding noise on both
 * sides: then both must be below 1e-4 of the largest gradient (returns 1),
 * else it is compared as any other (returns 0). */
static int grad_is_noise(const char *name, const float *a, size_t n, double gmax)
{
	size_t rn = 0;
	float *r = nn_ref(ref, name, &rn);
	assert_non_null(r);
	double ra = 0, aa = 0;
	for (size_t i = 0; i < rn; i++)
		ra = fabs(r[i]) > ra ? fabs(r[i]) : ra;
	for (size_t i = 0; i < n; i++)
		aa = fabs(a[i]) > aa ? fabs(a[i]) : aa;
	free(r);
	if (ra > 1e-4 * gmax)
		return 0;
	if (getenv("GF_VERBOSE"))
		fprintf(stderr, "  %-28s zero up to rounding: max |ref| %.3g, max |ours| %.3g\n", name, ra, aa);
	assert_true(aa <= 1e-4 * gmax);
	return 1;
}

static const struct cbn_case {
	const char *name, *table;
	uint64_t k;
	int ndim;
	int shape[4];   /* input shape including the batch */
	int labels;
} cases[] = {
	{ "classes", "{ {'cbn', 4, classes = 5}, input_shape = {4, 3, 3} }", 100, 4, { 3, 4, 3, 3 }, 1 },
	{ "classes_sn", "{ {'cbn', 4, classes = 3, sn = true}, {'lrelu', 0.2}, input_shape = {4, 5} }", 200, 3,
	  { 4, 4, 5 }, 1 },
	{ "cond",
	  "{ {'split', 0, 6, name = 'c'}, {'split', 6, 54, input = 'x'}, {'reshape', 3, 4, 4},"
	  " {'cbn', 3, cond = 'c', bias = true}, {'relu'}, input_shape = {54} }",
	  300, 2, { 4, 54 }, 0 },
	{ "cond_sn",
	  "{ {'split', 0, 5, name = 'c'}, {'split', 5, 11, input = 'x'},"
	  " {'cbn', 6, eps = 1e-3, momentum = 0.2, cond = 'c', sn = true}, input_shape = {11} }",
	  400, 2, { 5, 11 }, 0 },
	{ "resblock",
	  "{ {'split', 0, 5, name = 'c'}, {'split', 5, 69, input = 'x'}, {'reshape', 4, 4, 4, name = 'xin'},"
	  " {'cbn', 4, cond = 'c', sn = true}, {'relu'}, {'upsample', 2}, {'conv', 4, 3, 3, 1, 1, sn = true},"
	  " {'cbn', 3, cond = 'c', sn = true}, {'relu'}, {'conv', 3, 3, 3, 1, 1, sn = true, name = 'res'},"
	  " {'upsample', 2, input = 'xin'}, {'conv', 4, 3, 1, sn = true, name = 'sc'}, {'add', input = 'res', with = 'sc'},"
	  " input_shape = {69} }",
	  500, 2, { 3, 69 }, 0 },
};

/* Input and labels of step s into in / lab (x and idx own the data). */
static void step_input(const struct cbn_case *c, int s, float **x, int32_t *idx, gf_tensor *in, gf_tensor *lab)
{
	char name[128];
	int64_t sh[4];
	size_t n;
	for (int i = 0; i < c->ndim; i++)
		sh[i] = c->shape[i];
	snprintf(name, sizeof(name), "cbn.%s.x%d", c->name, s);
	*x = nn_ref(ref, name, &n);
	assert_non_null(*x);
	*in = gf_tensor_make(*x, GF_F32, c->ndim, sh);
	if (c->labels) {
		gf_tensor t;
		snprintf(name, sizeof(name), "cbn.%s.labels%d", c->name, s);
		NN_OK(gf_st_get(ref, name, &t));
		memcpy(idx, t.data, (size_t)c->shape[0] * sizeof(int32_t));
		*lab = gf_tensor_make(idx, GF_I32, 1, sh);
	}
}

static gf_net *build(const struct cbn_case *c, gf_backend *b)
{
	char code[512];
	gf_net *net;
	snprintf(code, sizeof(code), "return %s", c->table);
	NN_OK(nn_build(&net, b, code, c->shape[0], 0));
	nn_fill_params(net, c->k, 0);
	return net;
}

static void run_case(const struct cbn_case *c)
{
	char name[128];
	gf_net *net = build(c, be);
	int32_t idx[8];
	size_t nv, nb;
	for (int s = 0; s < 2; s++) {
		float *x, *dy;
		gf_tensor in, lab, out, dx;
		size_t ndy;
		step_input(c, s, &x, idx, &in, &lab);
		NN_OK(gf_net_forward(net, &in, c->labels ? &lab : NULL, GF_TRAIN));
		NN_OK(gf_net_output(net, &out));
		snprintf(name, sizeof(name), "cbn.%s.y%d", c->name, s);
		check(name, out.data, (size_t)gf_tensor_numel(&out));
		snprintf(name, sizeof(name), "cbn.%s.dy%d", c->name, s);
		dy = nn_ref(ref, name, &ndy);
		assert_non_null(dy);
		NN_OK(gf_net_backward(net, dy, GF_NEED_DX | GF_NEED_DW));
		NN_OK(gf_net_dx(net, &dx));
		snprintf(name, sizeof(name), "cbn.%s.dx%d", c->name, s);
		check(name, dx.data, (size_t)gf_tensor_numel(&dx));
		const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
		float *g = gf_net_block(net, GF_GRADS, NULL);
		size_t np;
		gf_net_block(net, GF_GRADS, &np);
		double gmax = 0;
		for (size_t i = 0; i < np; i++)
			gmax = fabs(g[i]) > gmax ? fabs(g[i]) : gmax;
		for (size_t i = 0; i < nv; i++) {
			snprintf(name, sizeof(name), "cbn.%s.grad%d.%zu", c->name, s, i);
			if (!grad_is_noise(name, g + v[i].offset, v[i].numel, gmax))
				check(name, g + v[i].offset, v[i].numel);
		}
		free(x);
		free(dy);
	}
	const gf_view *bv = gf_net_views(net, GF_BUFFERS, &nb);
	const float *buf = gf_net_block(net, GF_BUFFERS, NULL);
	for (size_t i = 0; i < nb; i++) {
		snprintf(name, sizeof(name), "cbn.%s.buf.%zu", c->name, i);
		check(name, buf + bv[i].offset, bv[i].numel);
	}
	/* eval: running statistics, stored u and v */
	float *x;
	gf_tensor in, lab, out;
	step_input(c, 0, &x, idx, &in, &lab);
	NN_OK(gf_net_forward(net, &in, c->labels ? &lab : NULL, GF_EVAL));
	NN_OK(gf_net_output(net, &out));
	snprintf(name, sizeof(name), "cbn.%s.y_eval", c->name);
	check(name, out.data, (size_t)gf_tensor_numel(&out));
	free(x);
	gf_net_destroy(net);
}

static void test_cases(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i]);
}

/* GF_FREEZE_STATS: batch statistics, buffers untouched; views are named
 * as checkpoints name them; the relu fusion. */
static void test_freeze_and_names(void **state)
{
	(void)state;
	const struct cbn_case *c = &cases[3];
	gf_net *net = build(c, be);
	size_t nb, np;
	gf_net_block(net, GF_BUFFERS, &nb);
	float *before = malloc(nb * sizeof(float)), *after = malloc(nb * sizeof(float));
	NN_OK(gf_net_read(net, GF_BUFFERS, before));
	float *x;
	int32_t idx[8];
	gf_tensor in, lab;
	step_input(c, 0, &x, idx, &in, &lab);
	NN_OK(gf_net_forward(net, &in, NULL, GF_TRAIN | GF_FREEZE_STATS));
	NN_OK(gf_net_read(net, GF_BUFFERS, after));
	assert_memory_equal(before, after, nb * sizeof(float));
	const gf_view *pv = gf_net_views(net, GF_PARAMS, &np);
	const gf_view *bv = gf_net_views(net, GF_BUFFERS, &nb);
	assert_int_equal(np, 2);
	assert_string_equal(pv[0].name, "2.gain.weight_orig");
	assert_string_equal(pv[1].name, "2.bias.weight_orig");
	assert_int_equal(nb, 6);
	static const char *const bufs[] = { "2.running_mean", "2.running_var", "2.gain.weight_u", "2.gain.weight_v",
		                            "2.bias.weight_u", "2.bias.weight_v" };
	for (int i = 0; i < 6; i++)
		assert_string_equal(bv[i].name, bufs[i]);
	free(x);
	free(before);
	free(after);
	gf_net_destroy(net);

	/* an unnamed cbn takes over the following relu, as bn does */
	char sum[1024];
	net = build(&cases[2], be);
	gf_net_summary(net, sum, sizeof(sum));
	assert_non_null(strstr(sum, "cbn        3      -> (3, 4, 4)  + relu"));
	assert_non_null(strstr(sum, "fused into the conditional batchnorm"));
	gf_net_destroy(net);
}

/* One and three threads give the same bits (per-channel sums in one
 * thread, in a fixed order). */
static void test_threads(void **state)
{
	(void)state;
	const char *code = "return { {'split', 0, 16, name = 'c'}, {'split', 16, 16 + 32 * 64, input = 'x'},"
	                   " {'reshape', 32, 8, 8}, {'cbn', 32, cond = 'c'}, {'relu'}, input_shape = {16 + 32 * 64} }";
	const int B = 8, n = 16 + 32 * 64;
	float *x = malloc((size_t)B * n * sizeof(float)), *dy = malloc((size_t)B * 32 * 64 * sizeof(float));
	nn_fill(x, (size_t)B * n, 7, 1.0f, 0.0f);
	nn_fill(dy, (size_t)B * 32 * 64, 8, 1.0f, 0.0f);
	float *res[2][2];
	for (int t = 0; t < 2; t++) {
		gf_backend *b;
		gf_backend_opts o = { .threads = t ? 3 : 1 };
		NN_OK(gf_backend_open("cpu", &o, &b));
		gf_net *net;
		NN_OK(nn_build(&net, b, code, B, 0));
		nn_fill_params(net, 50, 0);
		gf_tensor in = nn_tensor(x, 2, B, n), out, dx;
		NN_OK(gf_net_forward(net, &in, NULL, GF_TRAIN));
		NN_OK(gf_net_output(net, &out));
		NN_OK(gf_net_backward(net, dy, GF_NEED_DX | GF_NEED_DW));
		NN_OK(gf_net_dx(net, &dx));
		res[t][0] = malloc((size_t)B * 32 * 64 * sizeof(float));
		res[t][1] = malloc((size_t)B * n * sizeof(float));
		memcpy(res[t][0], out.data, (size_t)B * 32 * 64 * sizeof(float));
		memcpy(res[t][1], dx.data, (size_t)B * n * sizeof(float));
		gf_net_destroy(net);
		gf_backend_close(b);
	}
	assert_memory_equal(res[0][0], res[1][0], (size_t)B * 32 * 64 * sizeof(float));
	assert_memory_equal(res[0][1], res[1][1], (size_t)B * n * sizeof(float));
	for (int t = 0; t < 2; t++) {
		free(res[t][0]);
		free(res[t][1]);
	}
	free(x);
	free(dy);
}

/* docs/nn.md's BigGAN G start and projection D head build, run forward
 * and backward, and depend on the label (the cond source gets a gradient:
 * the shared embedding's weights move). */
static void test_docs_example(void **state)
{
	(void)state;
	static const char *const tables[2] = {
		"return { {'split', 0, 20}, {'linear', 20, 4 * 4 * 64, sn = true}, {'reshape', 64, 4, 4, name = 'h0'},"
		" {'embedding', 10, 128, input = 'label', name = 'shared'}, {'split', 20, 40, input = 'x', name = 'z1'},"
		" {'concat', input = 'shared', with = 'z1', name = 'c1'}, {'cbn', 64, cond = 'c1', sn = true, input = 'h0'},"
		" {'relu'}, {'upsample', 2}, {'conv', 64, 64, 3, 1, 1, sn = true}, {'cbn', 64, classes = 10}, {'relu'},"
		" input_shape = {120} }",
		"return { {'conv', 3, 64, 3, 1, 1, sn = true}, {'relu'}, {'gsp', name = 'h'}, {'linear', 64, 1, sn = true},"
		" {'proj', 10, 64, with = 'h', sn = true}, input_shape = {3, 8, 8} }",
	};
	static const int nin[2] = { 120, 3 * 8 * 8 }, nout[2] = { 64 * 8 * 8, 1 };
	for (int t = 0; t < 2; t++) {
		const int B = 4;
		gf_net *net;
		NN_OK(nn_build(&net, be, tables[t], B, 0));
		gf_rng r = { 3, 0, 0 };
		NN_OK(gf_net_init(net, &r));
		assert_int_equal(gf_net_classes(net), 10);
		/* move the zero-initialised class tables off zero so that the label shows */
		size_t np;
		float *p = gf_net_block(net, GF_PARAMS, &np), *noise = malloc(np * sizeof(float));
		gf_rng_normal(&r, noise, np, 0.0f, 0.1f);
		for (size_t i = 0; i < np; i++)
			p[i] += noise[i];
		float *x = malloc((size_t)B * nin[t] * sizeof(float)), *dy = malloc((size_t)B * nout[t] * sizeof(float));
		nn_fill(x, (size_t)B * nin[t], 11, 1.0f, 0.0f);
		nn_fill(dy, (size_t)B * nout[t], 12, 1.0f, 0.0f);
		int64_t sh[4] = { B, t ? 3 : 120, 8, 8 };
		int32_t lab[4] = { 0, 1, 2, 3 }, lab2[4] = { 5, 1, 2, 3 };
		gf_tensor in = gf_tensor_make(x, GF_F32, t ? 4 : 2, sh), out, dx;
		gf_tensor lt = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ B }), lt2 = lt;
		lt2.data = lab2;
		NN_OK(gf_net_forward(net, &in, &lt2, GF_TRAIN | GF_FREEZE_STATS));
		NN_OK(gf_net_output(net, &out));
		float *o2 = malloc((size_t)B * nout[t] * sizeof(float));
		memcpy(o2, out.data, (size_t)B * nout[t] * sizeof(float));
		NN_OK(gf_net_forward(net, &in, &lt, GF_TRAIN | GF_FREEZE_STATS));
		NN_OK(gf_net_output(net, &out));
		/* sample 0's label differs: its output differs; (with batch statistics
		 * every sample's output may move, but sample 0's must) */
		int differs = 0;
		for (int i = 0; i < nout[t]; i++)
			differs |= ((float *)out.data)[i] != o2[i];
		assert_true(differs);
		NN_OK(gf_net_backward(net, dy, GF_NEED_DX | GF_NEED_DW));
		NN_OK(gf_net_dx(net, &dx));
		float *g = gf_net_block(net, GF_GRADS, NULL);
		size_t nv;
		const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
		for (size_t i = 0; i < nv; i++) {
			double s = 0;
			for (size_t j = 0; j < v[i].numel; j++)
				s += fabs(g[v[i].offset + j]);
			if (!(s > 0 && isfinite(s))) {
				fprintf(stderr, "table %d: gradient of %s is %g\n", t, v[i].name, s);
				fail();
			}
		}
		free(noise);
		free(x);
		free(dy);
		free(o2);
		gf_net_destroy(net);
	}
}

/* ---- checkpoints: the new parameters and buffers round-trip ---- */

#define CB 4
static const char *ckpt_table =
	"return { {'linear', 6, 8, name = 'c'}, {'linear', 6, 32, input = 'x'}, {'reshape', 2, 4, 4},"
	" {'cbn', 2, cond = 'c', sn = true, bias = true}, {'relu'}, {'cbn', 2, classes = 3, sn = true, name = 'k'},"
	" {'gsp', name = 'h'}, {'linear', 2, 1}, {'proj', 3, 2, with = 'h', sn = true}, input_shape = {6} }";

static void ckpt_step(gf_net *net, gf_optim *opt, gf_rng *data)
{
	float x[CB * 6], dp[CB];
	int32_t lab[CB];
	gf_rng_normal(data, x, CB * 6, 0.0f, 1.0f);
	for (int i = 0; i < CB; i++)
		lab[i] = (int32_t)((data->offset + (uint64_t)i) % 3);
	gf_tensor in = nn_tensor(x, 2, CB, 6), lt = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ CB }), out;
	NN_OK(gf_net_forward(net, &in, &lt, GF_TRAIN));
	NN_OK(gf_net_output(net, &out));
	NN_OK(gf_loss(be, GF_LOSS_LS, NULL, dp, &out, NULL, 0.5f, 1.0f));
	NN_OK(gf_net_backward(net, dp, GF_NEED_DW));
	NN_OK(gf_optim_step(opt));
}

static void ckpt_open(gf_net **net, gf_optim **opt, uint64_t seed)
{
	NN_OK(nn_build(net, be, ckpt_table, CB, 0));
	gf_rng init = { seed, 0, 0 };
	NN_OK(gf_net_init(*net, &init));
	gf_optim_conf oc;
	gf_optim_defaults(&oc, GF_OPT_ADAM);
	oc.lr = 1e-2f;
	NN_OK(gf_optim_create(opt, *net, &oc));
}

static float *ckpt_state(gf_net *net, gf_optim *opt, size_t *n)
{
	size_t a, b, c;
	gf_net_block(net, GF_PARAMS, &a);
	gf_net_block(net, GF_BUFFERS, &b);
	float *st = gf_optim_state(opt, &c), *buf = malloc((a + b + c) * sizeof(float));
	NN_OK(gf_net_read(net, GF_PARAMS, buf));
	NN_OK(gf_net_read(net, GF_BUFFERS, buf + a));
	memcpy(buf + a + b, st, c * sizeof(float));
	*n = a + b + c;
	return buf;
}

static void test_checkpoint(void **state)
{
	(void)state;
	char path[] = "/tmp/gf_test_cbn.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	gf_net *na, *nb;
	gf_optim *oa, *ob;
	gf_rng da = { 9, 0, 0 }, db;
	ckpt_open(&na, &oa, 1);
	for (int i = 0; i < 3; i++)
		ckpt_step(na, oa, &da);
	gf_ckpt_part pa = { "D", na, oa };
	NN_OK(gf_ckpt_save(path, &pa, 1, 3, NULL, NULL));
	db = da;
	for (int i = 0; i < 3; i++)
		ckpt_step(na, oa, &da);
	ckpt_open(&nb, &ob, 2);
	gf_ckpt_part pb = { "D", nb, ob };
	NN_OK(gf_ckpt_load(path, &pb, 1, NULL, NULL));
	for (int i = 0; i < 3; i++)
		ckpt_step(nb, ob, &db);
	size_t sa, sb;
	float *a = ckpt_state(na, oa, &sa), *b = ckpt_state(nb, ob, &sb);
	assert_int_equal(sa, sb);
	assert_memory_equal(a, b, sa * sizeof(float));

	gf_st_file *f;
	gf_tensor t;
	NN_OK(gf_st_open(&f, path));
	static const struct {
		const char *name;
		int64_t n0;
	} want[] = { { "D.3.gain.weight_orig", 2 }, { "D.3.gain.bias", 2 },   { "D.3.bias.weight_orig", 2 },
		     { "D.3.bias.bias", 2 },        { "D.3.running_var", 2 }, { "D.3.bias.weight_u", 2 },
		     { "D.3.bias.weight_v", 8 },    { "D.k.gain.weight_orig", 3 }, { "D.k.gain.weight_u", 3 },
		     { "D.8.weight_orig", 3 },      { "D.8.weight_v", 2 },    { "D.opt.m.k.bias.weight_orig", 3 } };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		if (gf_st_get(f, want[i].name, &t)) {
			fprintf(stderr, "%s: %s\n", want[i].name, gf_errmsg());
			fail();
		}
		assert_int_equal(t.shape[0], want[i].n0);
	}
	gf_st_close(f);
	unlink(path);
	free(a);
	free(b);
	gf_optim_destroy(oa);
	gf_optim_destroy(ob);
	gf_net_destroy(na);
	gf_net_destroy(nb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cases),
		cmocka_unit_test(test_freeze_and_names),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_docs_example),
		cmocka_unit_test(test_checkpoint),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
