/* Spectral normalisation (`sn = true`) against PyTorch's
 * torch.nn.utils.spectral_norm: linear, conv, tconv and embedding through
 * two training forwards (each one power iteration, u and v updated) and
 * one eval forward (no iteration), compared with
 * tests/ref/nn_ref3.safetensors, which tests/ref/make_nn_refs3.py wrote
 * with torch 1.13 from the same hash-formula parameters. Also: u and v
 * survive a checkpoint (3 steps + save + resume + 3 steps = 6 steps bit
 * for bit), the initial u and v come from the init generator, and sn on a
 * kind without a weight matrix is an error naming the layer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include <cmocka.h>

#include "test_nn_util.h"

#define TOL 1e-4

static gf_st_file *ref;
static gf_backend *be;
static double worst_seen;   /* largest relative error over every comparison, printed at the end */

static int setup(void **state)
{
	(void)state;
	return nn_ref_open("tests/ref/nn_ref3.safetensors", &ref, &be);
}

static int teardown(void **state)
{
	(void)state;
	nn_ref_close(ref, be);
	return 0;
}

/* a[0..n) against reference `name` to TOL relative (floor 1e-2 of the
 * largest reference value). */
static void check(const char *name, const float *a, size_t n)
{
	size_t rn = 0, w = 0;
	float *r = nn_ref(ref, name, &rn);
	assert_non_null(r);
	assert_int_equal(rn, n);
	double e = nn_relerr(a, r, n, 1e-2, &w);
	if (e > worst_seen)
		worst_seen = e;
	if (!nn_close(name, a, r, n, TOL))
		fail();
	free(r);
}

static const struct sn_case {
	const char *name, *table;
	uint64_t k;
	int ndim;
	int shape[4];   /* input shape including the batch */
	int labels;
} cases[] = {
	{ "linear", "{ {'linear', 7, 5, sn = true}, input_shape = {7} }", 100, 2, { 3, 7 }, 0 },
	{ "conv", "{ {'conv', 3, 6, 3, 2, 1, sn = true}, input_shape = {3, 9, 9} }", 200, 4, { 2, 3, 9, 9 }, 0 },
	{ "tconv", "{ {'tconv', 3, 4, 3, 2, 1, output_padding = 1, sn = true}, input_shape = {3, 5, 5} }", 300, 4,
	  { 2, 3, 5, 5 }, 0 },
	{ "embedding", "{ {'embedding', 5, 4, sn = true}, input_shape = {1} }", 400, 2, { 4, 1 }, 1 },
};

/* The input (or the labels) of step s. */
static void step_input(const struct sn_case *c, int s, float **x, int32_t *idx, gf_tensor *in, gf_tensor *lab)
{
	char name[128];
	int64_t sh[4];
	for (int i = 0; i < c->ndim; i++)
		sh[i] = c->shape[i];
	if (c->labels) {
		gf_tensor t;
		snprintf(name, sizeof(name), "sn.%s.idx%d", c->name, s);
		NN_OK(gf_st_get(ref, name, &t));
		memcpy(idx, t.data, (size_t)c->shape[0] * sizeof(int32_t));
		*x = calloc((size_t)c->shape[0], sizeof(float));
		*lab = gf_tensor_make(idx, GF_I32, 1, sh);
	} else {
		snprintf(name, sizeof(name), "sn.%s.x%d", c->name, s);
		*x = nn_ref(ref, name, NULL);
		assert_non_null(*x);
	}
	*in = gf_tensor_make(*x, GF_F32, c->ndim, sh);
}

static void run_case(const struct sn_case *c)
{
	char code[512], name[128];
	gf_net *net;
	snprintf(code, sizeof(code), "return %s", c->table);
	NN_OK(nn_build(&net, be, code, c->shape[0], 0));
	nn_fill_params(net, c->k, c->labels);

	size_t nv, nbv, nb;
	const gf_view *v = gf_net_views(net, GF_PARAMS, &nv);
	const gf_view *bv = gf_net_views(net, GF_BUFFERS, &nbv);
	assert_string_equal(v[0].name, "0.weight_orig");
	assert_int_equal(nbv, 2);
	assert_string_equal(bv[0].name, "0.weight_u");
	assert_string_equal(bv[1].name, "0.weight_v");
	float *buf = gf_net_block(net, GF_BUFFERS, &nb);
	float *u0 = nn_ref(ref, (snprintf(name, sizeof(name), "sn.%s.u_init", c->name), name), NULL);
	float *v0 = nn_ref(ref, (snprintf(name, sizeof(name), "sn.%s.v_init", c->name), name), NULL);
	memcpy(buf + bv[0].offset, u0, bv[0].numel * sizeof(float));
	memcpy(buf + bv[1].offset, v0, bv[1].numel * sizeof(float));

	float *g = gf_net_block(net, GF_GRADS, NULL);
	int32_t idx[8];
	for (int s = 0; s < 2; s++) {
		float *x, *dy;
		gf_tensor in, lab, out, dx;
		step_input(c, s, &x, idx, &in, &lab);
		NN_OK(gf_net_forward(net, &in, c->labels ? &lab : NULL, GF_TRAIN));
		NN_OK(gf_net_output(net, &out));
		snprintf(name, sizeof(name), "sn.%s.y%d", c->name, s);
		check(name, out.data, (size_t)gf_tensor_numel(&out));
		snprintf(name, sizeof(name), "sn.%s.u%d", c->name, s);
		check(name, buf + bv[0].offset, bv[0].numel);
		snprintf(name, sizeof(name), "sn.%s.v%d", c->name, s);
		check(name, buf + bv[1].offset, bv[1].numel);

		snprintf(name, sizeof(name), "sn.%s.dy%d", c->name, s);
		dy = nn_ref(ref, name, NULL);
		NN_OK(gf_net_backward(net, dy, (c->labels ? 0 : GF_NEED_DX) | GF_NEED_DW));
		if (!c->labels) {
			NN_OK(gf_net_dx(net, &dx));
			snprintf(name, sizeof(name), "sn.%s.dx%d", c->name, s);
			check(name, dx.data, (size_t)gf_tensor_numel(&dx));
		}
		snprintf(name, sizeof(name), "sn.%s.dweight%d", c->name, s);
		check(name, g + v[0].offset, v[0].numel);
		if (nv > 1) {
			snprintf(name, sizeof(name), "sn.%s.dbias%d", c->name, s);
			check(name, g + v[1].offset, v[1].numel);
		}
		free(x);
		free(dy);
	}

	/* eval: no iteration (u, v as the second step left them) */
	float *x;
	gf_tensor in, lab, out;
	step_input(c, 0, &x, idx, &in, &lab);
	NN_OK(gf_net_forward(net, &in, c->labels ? &lab : NULL, GF_EVAL));
	NN_OK(gf_net_output(net, &out));
	snprintf(name, sizeof(name), "sn.%s.y_eval", c->name);
	check(name, out.data, (size_t)gf_tensor_numel(&out));
	snprintf(name, sizeof(name), "sn.%s.u1", c->name);
	check(name, buf + bv[0].offset, bv[0].numel);
	free(x);
	free(u0);
	free(v0);
	gf_net_destroy(net);
}

static void test_layers(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i]);
	printf("sn vs PyTorch: largest relative error %.3g\n", worst_seen);
}

/* ---- checkpoints ---- */

#define B 4
static const char *small =
	"return { {'conv', 2, 4, 3, 2, 1, sn = true}, {'lrelu', 0.2}, {'flatten'},"
	" {'linear', 64, 3, sn = true}, input_shape = {2, 8, 8} }";

static void train_step(gf_net *net, gf_optim *opt, gf_rng *data)
{
	float x[B * 2 * 8 * 8], dp[B * 3];
	gf_rng_normal(data, x, B * 2 * 8 * 8, 0.0f, 1.0f);
	gf_tensor in = nn_tensor(x, 4, B, 2, 8, 8), out;
	NN_OK(gf_net_forward(net, &in, NULL, GF_TRAIN));
	NN_OK(gf_net_output(net, &out));
	NN_OK(gf_loss(be, GF_LOSS_LS, NULL, dp, &out, NULL, 0.5f, 1.0f));
	NN_OK(gf_net_backward(net, dp, GF_NEED_DW));
	NN_OK(gf_optim_step(opt));
}

static void open_small(gf_net **net, gf_optim **opt, uint64_t seed)
{
	NN_OK(nn_build(net, be, small, B, 0));
	gf_rng init = { seed, 0, 0 };
	NN_OK(gf_net_init(*net, &init));
	gf_optim_conf oc;
	gf_optim_defaults(&oc, GF_OPT_ADAM);
	oc.lr = 1e-2f;
	NN_OK(gf_optim_create(opt, *net, &oc));
}

static float *state_of(gf_net *net, gf_optim *opt, size_t *n)
{
	size_t a, b, c;
	gf_net_block(net, GF_PARAMS, &a);
	gf_net_block(net, GF_BUFFERS, &b);
	float *st = gf_optim_state(opt, &c), *buf = malloc((a + b + c) * sizeof(float));
	gf_net_read(net, GF_PARAMS, buf);
	gf_net_read(net, GF_BUFFERS, buf + a);
	memcpy(buf + a + b, st, c * sizeof(float));
	*n = a + b + c;
	return buf;
}

static void test_resume(void **state)
{
	(void)state;
	char path[] = "/tmp/gf_test_sn.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	gf_net *na, *nb;
	gf_optim *oa, *ob;
	gf_rng da = { 9, 0, 0 }, db;
	open_small(&na, &oa, 1);

	/* the initial u, v are drawn (unit vectors, not the start values) */
	size_t nbuf;
	float *u = gf_net_block(na, GF_BUFFERS, &nbuf);
	double s = 0;
	for (int i = 0; i < 4; i++)
		s += (double)u[i] * u[i];
	assert_true(fabs(s - 1.0) < 1e-5 && u[0] != u[1]);

	for (int i = 0; i < 3; i++)
		train_step(na, oa, &da);
	gf_ckpt_part pa = { "D", na, oa };
	NN_OK(gf_ckpt_save(path, &pa, 1, 3, NULL, NULL));
	db = da;
	for (int i = 0; i < 3; i++)
		train_step(na, oa, &da);

	open_small(&nb, &ob, 2);
	gf_ckpt_part pb = { "D", nb, ob };
	NN_OK(gf_ckpt_load(path, &pb, 1, NULL, NULL));
	for (int i = 0; i < 3; i++)
		train_step(nb, ob, &db);
	size_t sa, sb;
	float *a = state_of(na, oa, &sa), *b = state_of(nb, ob, &sb);
	assert_int_equal(sa, sb);
	assert_memory_equal(a, b, sa * sizeof(float));

	gf_st_file *f;
	gf_tensor t;
	NN_OK(gf_st_open(&f, path));
	NN_OK(gf_st_get(f, "D.0.weight_orig", &t));
	NN_OK(gf_st_get(f, "D.0.weight_u", &t));
	assert_int_equal(t.shape[0], 4);
	NN_OK(gf_st_get(f, "D.3.weight_v", &t));
	assert_int_equal(t.shape[0], 64);
	gf_st_close(f);
	unlink(path);
	free(a);
	free(b);
	gf_optim_destroy(oa);
	gf_optim_destroy(ob);
	gf_net_destroy(na);
	gf_net_destroy(nb);
}

static void test_errors(void **state)
{
	(void)state;
	gf_net *net;
	assert_int_equal(nn_build(&net, be, "return { {'linear', 4, 4}, {'relu'}, {'bn', 4, sn = true}, input_shape = {4} }",
	                          2, 0),
	                 GF_EPARAM);
	assert_string_equal(gf_errmsg(), "layer 3 (bn): sn is not supported on this kind");
	assert_int_equal(nn_build(&net, be, "return { {'linear', 4, 4, sn = 1}, input_shape = {4} }", 2, 0), GF_EPARAM);
	assert_non_null(strstr(gf_errmsg(), "layer 1 (linear): sn must be true or false"));
	/* sn = false is the plain layer: the same views as without the key */
	NN_OK(nn_build(&net, be, "return { {'linear', 4, 4, sn = false}, input_shape = {4} }", 2, 0));
	size_t nv, nbv;
	assert_string_equal(gf_net_views(net, GF_PARAMS, &nv)[0].name, "0.weight");
	gf_net_views(net, GF_BUFFERS, &nbv);
	assert_int_equal(nbv, 0);
	gf_net_destroy(net);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layers),
		cmocka_unit_test(test_resume),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
