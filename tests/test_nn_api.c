/* The network, optimiser and loss API around the maths: input checks,
 * call-order errors, blocks and views, copying between networks (the D
 * replica of a G step), frozen running statistics, bit-identical repeated
 * runs, optimiser configuration from Lua values, optimistic Adam and
 * gradient clipping, backends by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_nn_util.h"

#include <ganflow/train.h>

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

static gf_net *small_d(unsigned flags)
{
	gf_net *d;
	NN_OK(nn_build(&d, be, "return require('backbones.dcgan').D{ size = 16 }", 4, flags));
	gf_rng r = { 3, 0, 0 };
	NN_OK(gf_net_init(d, &r));
	gf_rng_init(gf_net_rng(d), 9, 1);
	return d;
}

static void test_input_checks(void **state)
{
	(void)state;
	gf_net *d = small_d(0);
	float x[4 * 16 * 16] = { 0 }, dy[4] = { 0 };
	/* backward before any forward */
	assert_int_equal(gf_net_backward(d, dy, GF_NEED_DW), GF_EPARAM);
	gf_tensor out;
	assert_int_equal(gf_net_output(d, &out), GF_EPARAM);
	/* wrong shapes name both */
	gf_tensor bad = nn_tensor(x, 4, 4, 1, 16, 8);
	assert_int_equal(gf_net_forward(d, &bad, NULL, GF_TRAIN), GF_ESHAPE);
	assert_non_null(strstr(gf_errmsg(), "(4, 1, 16, 8) f32"));
	assert_non_null(strstr(gf_errmsg(), "(4, 1, 16, 16) f32"));
	bad = nn_tensor(x, 3, 4, 16, 16);
	assert_int_equal(gf_net_forward(d, &bad, NULL, GF_TRAIN), GF_ESHAPE);
	/* batch beyond max_batch */
	float big[5 * 256];
	bad = nn_tensor(big, 4, 5, 1, 16, 16);
	assert_int_equal(gf_net_forward(d, &bad, NULL, GF_TRAIN), GF_ESHAPE);
	assert_non_null(strstr(gf_errmsg(), "max_batch"));
	/* i32 given as f32 */
	gf_tensor ix = nn_tensor(x, 4, 4, 1, 16, 16);
	ix.dtype = GF_I32;
	assert_int_equal(gf_net_forward(d, &ix, NULL, GF_TRAIN), GF_ESHAPE);
	/* a smaller batch than max works; backward after eval is refused (batchnorm, dropout) */
	gf_tensor ok = nn_tensor(x, 4, 2, 1, 16, 16);
	NN_OK(gf_net_forward(d, &ok, NULL, GF_EVAL));
	NN_OK(gf_net_output(d, &out));
	assert_int_equal(out.shape[0], 2);
	assert_int_equal(gf_net_backward(d, dy, GF_NEED_DW), GF_EPARAM);
	assert_non_null(strstr(gf_errmsg(), "eval"));
	NN_OK(gf_net_forward(d, &ok, NULL, GF_TRAIN));
	NN_OK(gf_net_backward(d, dy, GF_NEED_DX));
	gf_tensor dx;
	NN_OK(gf_net_dx(d, &dx));
	assert_int_equal(dx.shape[0], 2);
	assert_int_equal(gf_net_backward(d, NULL, GF_NEED_DX), GF_EPARAM);
	gf_net_destroy(d);
	/* a network without batchnorm/dropout may go back through an eval forward */
	gf_net *l;
	NN_OK(nn_build(&l, be, "return { {'linear', 3, 2}, input_shape = {3} }", 2, 0));
	float lx[6] = { 1, 2, 3, 4, 5, 6 }, ldy[4] = { 1, 1, 1, 1 };
	gf_tensor lt = nn_tensor(lx, 2, 2, 3);
	NN_OK(gf_net_forward(l, &lt, NULL, GF_EVAL));
	NN_OK(gf_net_backward(l, ldy, GF_NEED_DW));
	gf_net_destroy(l);
	/* options */
	gf_value t = nn_lua("return { {'linear', 3, 2}, input_shape = {3} }");
	gf_net_opts o = { .max_batch = 0 };
	gf_net *n;
	assert_int_equal(gf_net_create(&n, be, &t, &o), GF_EPARAM);
	o.max_batch = 2;
	o.input_ndim = 1;
	o.input_shape[0] = 4;   /* overrides the table's input_shape, and mismatches */
	assert_int_equal(gf_net_create(&n, be, &t, &o), GF_ESHAPE);
	gf_value_free(&t);
}

/* The D replica of a G step: copy parameters and buffers, run with frozen
 * statistics, back-propagate to the input only. */
static void test_replica(void **state)
{
	(void)state;
	gf_net *d = small_d(0), *rep = small_d(0);
	gf_rng other = { 100, 0, 0 };
	NN_OK(gf_net_init(rep, &other));
	NN_OK(gf_net_copy(rep, d, GF_PARAMS));
	NN_OK(gf_net_copy(rep, d, GF_BUFFERS));
	size_t np, nb;
	float *pd = gf_net_block(d, GF_PARAMS, &np), *pr = gf_net_block(rep, GF_PARAMS, NULL);
	assert_memory_equal(pd, pr, np * sizeof(float));
	float *bd = gf_net_block(d, GF_BUFFERS, &nb), *br = gf_net_block(rep, GF_BUFFERS, NULL);
	float *keep = malloc(nb * sizeof(float));
	memcpy(keep, br, nb * sizeof(float));
	float x[4 * 256];
	gf_rng r = { 4, 0, 0 };
	gf_rng_normal(&r, x, 4 * 256, 0, 1);
	gf_tensor xt = nn_tensor(x, 4, 4, 1, 16, 16);
	/* sentinel gradients stay untouched by a NEED_DX backward */
	float *g = gf_net_block(rep, GF_GRADS, NULL);
	for (size_t i = 0; i < np; i++)
		g[i] = 42.0f;
	NN_OK(gf_net_forward(rep, &xt, NULL, GF_TRAIN | GF_FREEZE_STATS));
	assert_memory_equal(keep, br, nb * sizeof(float));
	float dy[4] = { 1, -1, 0.5f, 2 };
	NN_OK(gf_net_backward(rep, dy, GF_NEED_DX));
	for (size_t i = 0; i < np; i++)
		assert_true(g[i] == 42.0f);
	NN_OK(gf_net_zero_grad(rep));
	assert_true(g[0] == 0.0f && g[np - 1] == 0.0f);
	/* training mode without the flag moves the statistics */
	NN_OK(gf_net_forward(rep, &xt, NULL, GF_TRAIN));
	assert_memory_not_equal(keep, br, nb * sizeof(float));
	(void)bd;
	/* host copies in and out */
	float *host = malloc(np * sizeof(float));
	NN_OK(gf_net_read(d, GF_PARAMS, host));
	host[0] += 1.0f;
	NN_OK(gf_net_write(rep, GF_PARAMS, host));
	assert_true(pr[0] == pd[0] + 1.0f);
	/* a different network is refused */
	gf_net *g2;
	NN_OK(nn_build(&g2, be, "return require('backbones.dcgan').D{ size = 32 }", 4, 0));
	assert_int_equal(gf_net_copy(g2, d, GF_PARAMS), GF_ESHAPE);
	gf_net_destroy(g2);
	free(host);
	free(keep);
	gf_net_destroy(d);
	gf_net_destroy(rep);
}

/* Views tile the blocks: sorted by offset, no gaps, no overlap. */
static void test_views(void **state)
{
	(void)state;
	gf_net *g;
	NN_OK(nn_build(&g, be, "return require('backbones.dcgan').CG{}", 2, 0));
	for (int b = 0; b < 3; b++) {
		size_t n, nv, at = 0;
		gf_net_block(g, (gf_block)b, &n);
		const gf_view *v = gf_net_views(g, (gf_block)b, &nv);
		for (size_t i = 0; i < nv; i++) {
			assert_int_equal(v[i].offset, at);
			size_t numel = 1;
			for (int d = 0; d < v[i].ndim; d++)
				numel *= (size_t)v[i].shape[d];
			assert_int_equal(numel, v[i].numel);
			at += v[i].numel;
		}
		assert_int_equal(at, n);
	}
	gf_net_destroy(g);
}

/* Same seeds, same thread count: bit-identical training steps. */
static void train_steps(gf_net *d, gf_optim *o, int steps, float *out_params)
{
	float x[4 * 256], dy[4];
	gf_rng data = { 55, 0, 0 };
	for (int s = 0; s < steps; s++) {
		gf_rng_normal(&data, x, 4 * 256, 0, 1);
		gf_tensor xt = nn_tensor(x, 4, 4, 1, 16, 16), pred;
		NN_OK(gf_net_forward(d, &xt, NULL, GF_TRAIN));
		NN_OK(gf_net_output(d, &pred));
		NN_OK(gf_loss(be, GF_LOSS_BCE, NULL, dy, &pred, NULL, s % 2 ? 1.0f : 0.0f, 1.0f));
		NN_OK(gf_net_backward(d, dy, GF_NEED_DW));
		NN_OK(gf_net_clip_grad_norm(d, 1.0f, NULL));
		NN_OK(gf_optim_step(o));
	}
	NN_OK(gf_net_read(d, GF_PARAMS, out_params));
}

static void test_determinism(void **state)
{
	(void)state;
	float *p[2];
	size_t np = 0;
	for (int k = 0; k < 2; k++) {
		gf_net *d = small_d(0);
		gf_net_block(d, GF_PARAMS, &np);
		gf_optim *o;
		gf_optim_conf c;
		gf_optim_defaults(&c, GF_OPT_ADAM);
		NN_OK(gf_optim_create(&o, d, &c));
		p[k] = malloc(np * sizeof(float));
		train_steps(d, o, 5, p[k]);
		gf_optim_destroy(o);
		gf_net_destroy(d);
	}
	assert_memory_equal(p[0], p[1], np * sizeof(float));
	free(p[0]);
	free(p[1]);
}

/* ---- optimisers ---- */

static void test_optim_conf(void **state)
{
	(void)state;
	gf_optim_conf c;
	gf_value v = nn_lua("return { 'adam', lr = 2e-4, betas = {0.5, 0.999}, weight_decay = 0.01 }");
	NN_OK(gf_optim_conf_parse(&c, &v));
	assert_int_equal(c.kind, GF_OPT_ADAM);
	assert_true(c.lr == 2e-4f && c.beta1 == 0.5f && c.beta2 == 0.999f && c.eps == 1e-8f && c.weight_decay == 0.01f);
	gf_value_free(&v);
	v = nn_lua("return { kind = 'sgd', lr = 0.1, momentum = 0.9, nesterov = true }");
	NN_OK(gf_optim_conf_parse(&c, &v));
	assert_int_equal(c.kind, GF_OPT_SGD);
	assert_true(c.momentum == 0.9f && c.nesterov);
	gf_value_free(&v);
	v = nn_lua("return { 'oadam', lr = 1e-3 }");
	NN_OK(gf_optim_conf_parse(&c, &v));
	assert_int_equal(c.kind, GF_OPT_OADAM);
	gf_value_free(&v);
	static const char *const bad[][2] = {
		{ "return { 'adam', lrate = 1 }", "unknown key 'lrate'" },
		{ "return { 'adamax' }", "unknown kind 'adamax'" },
		{ "return { lr = 1 }", "needs a kind" },
		{ "return { 'adam', betas = {0.5} }", "betas" },
		{ "return { 'adam', lr = 'fast' }", "lr must be a number" },
		{ "return { 'adam', beta1 = 1.5 }", "out of range" },
		{ "return { 'sgd', nesterov = true }", "nesterov needs momentum" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = nn_lua(bad[i][0]);
		int rc = gf_optim_conf_parse(&c, &v);
		if (rc != GF_EPARAM || !strstr(gf_errmsg(), bad[i][1])) {
			fprintf(stderr, "%s: %s (%s)\n", bad[i][0], gf_strerror(rc), gf_errmsg());
			fail();
		}
		gf_value_free(&v);
	}
	gf_loss_kind k;
	NN_OK(gf_loss_parse("hinge_d", &k));
	assert_int_equal(k, GF_LOSS_HINGE_D);
	assert_string_equal(gf_loss_name(GF_LOSS_NONSAT_LOGITS), "nonsat_logits");
	assert_int_equal(gf_loss_parse("wasserstein", &k), GF_EPARAM);
}

/* The Wasserstein critic loss: -mean t x (t = +1 real and G, -1 fake),
 * its gradient -t/n times the scale; and the GAN loss table's wgan row. */
static void test_wgan_loss(void **state)
{
	(void)state;
	float x[4] = { 0.5f, -1.0f, 2.0f, 0.0f }, dx[4], l;
	int64_t shape[2] = { 4, 1 };
	gf_tensor pred = gf_tensor_make(x, GF_F32, 2, shape);
	gf_loss_kind k;
	NN_OK(gf_loss_parse("wgan", &k));
	assert_int_equal(k, GF_LOSS_WGAN);
	NN_OK(gf_loss(be, k, &l, dx, &pred, NULL, 1.0f, 0.5f));
	assert_float_equal(l, -0.375f * 0.5f, 1e-7);
	for (int i = 0; i < 4; i++)
		assert_float_equal(dx[i], -0.25f * 0.5f, 1e-7);
	NN_OK(gf_loss(be, k, &l, dx, &pred, NULL, -1.0f, 1.0f));
	assert_float_equal(l, 0.375f, 1e-7);
	for (int i = 0; i < 4; i++)
		assert_float_equal(dx[i], 0.25f, 1e-7);
	gf_gan_loss gl;
	NN_OK(gf_gan_loss_parse("wgan", &gl));
	assert_int_equal(gl.g, GF_LOSS_WGAN);
	assert_int_equal(gl.d, GF_LOSS_WGAN);
	assert_true(gl.real == 1.0f && gl.fake == -1.0f);
	assert_int_equal(gf_gan_loss_parse("r1", &gl), GF_EPARAM);
	assert_non_null(strstr(gf_errmsg(), "bce|bce_logits|hinge|ls|wgan"));
}

/* Optimistic Adam: Adam fed with 2 g_t - g_{t-1}; state views. */
static void test_oadam(void **state)
{
	(void)state;
	gf_net *n;
	NN_OK(nn_build(&n, be, "return { {'linear', 3, 1, bias = false}, input_shape = {3} }", 1, 0));
	float p[3] = { 0.5f, -1.0f, 2.0f };
	NN_OK(gf_net_write(n, GF_PARAMS, p));
	gf_optim *o;
	gf_optim_conf c;
	gf_optim_defaults(&c, GF_OPT_OADAM);
	c.lr = 0.1f;
	NN_OK(gf_optim_create(&o, n, &c));
	size_t nv, ns;
	const gf_view *v = gf_optim_views(o, &nv);
	gf_optim_state(o, &ns);
	assert_int_equal(nv, 3);
	assert_int_equal(ns, 9);
	assert_string_equal(v[0].name, "m.0.weight");
	assert_string_equal(v[1].name, "v.0.weight");
	assert_string_equal(v[2].name, "g_prev.0.weight");
	const float g[2][3] = { { 0.1f, -0.2f, 0.3f }, { 0.05f, 0.4f, -0.1f } };
	double m[3] = { 0 }, s[3] = { 0 }, gp[3] = { 0 }, want[3] = { 0.5, -1.0, 2.0 };
	for (int t = 1; t <= 2; t++) {
		NN_OK(gf_net_write(n, GF_GRADS, g[t - 1]));
		NN_OK(gf_optim_step(o));
		for (int i = 0; i < 3; i++) {
			double h = 2.0 * g[t - 1][i] - gp[i];
			gp[i] = g[t - 1][i];
			m[i] = 0.9 * m[i] + 0.1 * h;
			s[i] = 0.999 * s[i] + 0.001 * h * h;
			double mh = m[i] / (1 - pow(0.9, t)), vh = s[i] / (1 - pow(0.999, t));
			want[i] -= 0.1 * mh / (sqrt(vh) + 1e-8);
		}
	}
	float *got = gf_net_block(n, GF_PARAMS, NULL);
	for (int i = 0; i < 3; i++)
		assert_true(fabs(got[i] - want[i]) < 1e-5);
	assert_int_equal(gf_optim_steps(o), 2);
	gf_optim_set_lr(o, 0.5f);
	assert_true(gf_optim_config(o)->lr == 0.5f);
	gf_optim_destroy(o);
	gf_net_destroy(n);
}

static void test_clip(void **state)
{
	(void)state;
	gf_net *n;
	NN_OK(nn_build(&n, be, "return { {'linear', 2, 2}, input_shape = {2} }", 1, 0));
	float g[6] = { 3, 4, 0, 0, 0, 0 };   /* weight (2, 2), bias (2): norm 5 */
	NN_OK(gf_net_write(n, GF_GRADS, g));
	float norm;
	NN_OK(gf_net_clip_grad_norm(n, 0, &norm));   /* measure only */
	assert_true(norm == 5.0f);
	NN_OK(gf_net_clip_grad_norm(n, 10.0f, &norm));   /* under the limit: untouched */
	float *gr = gf_net_block(n, GF_GRADS, NULL);
	assert_true(gr[0] == 3.0f && gr[1] == 4.0f);
	NN_OK(gf_net_clip_grad_norm(n, 1.0f, &norm));
	assert_true(norm == 5.0f);
	assert_true(fabsf(gr[0] - 0.6f) < 1e-6f && fabsf(gr[1] - 0.8f) < 1e-6f);
	NN_OK(gf_net_clip_grad_norm(n, 0, &norm));
	assert_true(fabsf(norm - 1.0f) < 1e-5f);
	gr[3] = NAN;
	assert_int_equal(gf_net_clip_grad_norm(n, 1.0f, &norm), GF_ENONFINITE);
	assert_true(isnan(gr[3]) && fabsf(gr[0] - 0.6f) < 1e-6f);
	/* a large block: the fixed-order sum in double */
	gf_net *big;
	NN_OK(nn_build(&big, be, "return { {'linear', 300, 300}, input_shape = {300} }", 1, 0));
	size_t nb;
	float *gb = gf_net_block(big, GF_GRADS, &nb);
	double want = 0;
	for (size_t i = 0; i < nb; i++) {
		gb[i] = (float)((i % 7) - 3) * 0.01f;
		want += (double)gb[i] * gb[i];
	}
	NN_OK(gf_net_clip_grad_norm(big, 0, &norm));
	assert_true(fabs(norm - sqrt(want)) < 1e-6 * sqrt(want));
	gf_net_destroy(big);
	gf_net_destroy(n);
}

/* The orthogonal regularisation term of one (r, c) matrix in double,
 * straight from its definition: 2 beta (W W^T (.) (1 - I)) W. */
static void ortho_ref(const float *w, int r, int c, double beta, double *out)
{
	for (int i = 0; i < r; i++)
		for (int k = 0; k < c; k++) {
			double acc = 0;
			for (int j = 0; j < r; j++) {
				if (j == i)
					continue;
				double m = 0;
				for (int q = 0; q < c; q++)
					m += (double)w[i * c + q] * w[j * c + q];
				acc += m * w[j * c + k];
			}
			out[i * c + k] = 2 * beta * acc;
		}
}

/* R / 2 = beta / 2 ||W W^T (.) (1 - I)||^2 in double, whose derivative the
 * added gradient is (BigGAN-PyTorch's convention). */
static double ortho_half(const float *w, int r, int c, double beta)
{
	double s = 0;
	for (int i = 0; i < r; i++)
		for (int j = 0; j < r; j++) {
			if (i == j)
				continue;
			double m = 0;
			for (int q = 0; q < c; q++)
				m += (double)w[i * c + q] * w[j * c + q];
			s += m * m;
		}
	return beta / 2 * s;
}

/* One power iteration on (rows, cols) W from u0 in double: v, u. */
static void power_step(const float *w, int rows, int cols, const double *u0, double *u, double *v)
{
	double s = 0;
	for (int j = 0; j < cols; j++) {
		v[j] = 0;
		for (int i = 0; i < rows; i++)
			v[j] += (double)w[i * cols + j] * u0[i];
		s += v[j] * v[j];
	}
	for (int j = 0; j < cols; j++)
		v[j] /= sqrt(s);
	s = 0;
	for (int i = 0; i < rows; i++) {
		u[i] = 0;
		for (int j = 0; j < cols; j++)
			u[i] += (double)w[i * cols + j] * v[j];
		s += u[i] * u[i];
	}
	for (int i = 0; i < rows; i++)
		u[i] /= sqrt(s);
}

/* Spectral norm under GF_FREEZE_STATS (a G step's replica of D): one
 * power iteration from the stored u on copies, as D's own training forward
 * would compute (PyTorch's module in train mode), and the buffers left as
 * they are; a plain training forward stores the iterated u and v. Right
 * after init (u and v independent draws) the old frozen forward used
 * sigma = u^T W v of those and could blow W / sigma up by orders of
 * magnitude (SNGAN's first G step: loss_g 5e15). */
static void test_sn_frozen(void **state)
{
	(void)state;
	enum { IN = 12, OUT = 7 };
	gf_net *n;
	NN_OK(nn_build(&n, be, "return { {'linear', 12, 7, sn = true, bias = false}, input_shape = {12} }", IN, 0));
	gf_rng r = { 11, 0, 0 };
	NN_OK(gf_net_init(n, &r));
	float w[OUT * IN], buf0[OUT + IN], buf[OUT + IN], x[IN * IN];
	size_t np, nb;
	gf_net_block(n, GF_PARAMS, &np);
	gf_net_block(n, GF_BUFFERS, &nb);
	assert_int_equal(np, OUT * IN);
	assert_int_equal(nb, OUT + IN);   /* weight_u (7), weight_v (12) */
	NN_OK(gf_net_read(n, GF_PARAMS, w));
	NN_OK(gf_net_read(n, GF_BUFFERS, buf0));
	/* the expected sigma, in double: v = normalize(W^T u0), u = normalize(W v), sigma = u^T W v */
	double u0[OUT], v[IN], u[OUT], sigma = 0;
	for (int i = 0; i < OUT; i++)
		u0[i] = buf0[i];
	power_step(w, OUT, IN, u0, u, v);
	for (int i = 0; i < OUT; i++)
		for (int j = 0; j < IN; j++)
			sigma += u[i] * w[i * IN + j] * v[j];
	for (int i = 0; i < IN * IN; i++)
		x[i] = i % (IN + 1) == 0;   /* the identity: row b of y is column b of W / sigma */
	gf_tensor in = gf_tensor_make(x, GF_F32, 2, (int64_t[]){ IN, IN }), out;
	for (int pass = 0; pass < 2; pass++) {
		NN_OK(gf_net_forward(n, &in, NULL, pass ? GF_TRAIN : GF_TRAIN | GF_FREEZE_STATS));
		NN_OK(gf_net_output(n, &out));
		const float *y = out.data;
		for (int b = 0; b < IN; b++)
			for (int i = 0; i < OUT; i++)
				assert_true(fabs(y[b * OUT + i] - w[i * IN + b] / sigma) <= 1e-5 * (1 + fabs(w[i * IN + b] / sigma)));
		NN_OK(gf_net_read(n, GF_BUFFERS, buf));
		if (!pass) {
			assert_memory_equal(buf, buf0, sizeof(buf));   /* frozen: D's vectors untouched */
		} else {
			for (int i = 0; i < OUT; i++)
				assert_true(fabs(buf[i] - u[i]) <= 1e-5);
			for (int j = 0; j < IN; j++)
				assert_true(fabs(buf[OUT + j] - v[j]) <= 1e-5);
		}
	}
	gf_net_destroy(n);
}

/* gf_net_sn_iterate (g_step's moving average): every spectral norm of the
 * network does one power iteration on its weight, from a u of any length,
 * and repeated ones converge to the weight's spectral norm */
static void test_sn_iterate(void **state)
{
	(void)state;
	gf_net *n;
	NN_OK(nn_build(&n, be,
	               "return { input_shape = {12}, {'linear', 12, 7, sn = true, bias = false}, "
	               "{'relu'}, {'linear', 7, 5, sn = true, bias = false} }",
	               2, 0));
	gf_rng r = { 3, 0, 0 };
	NN_OK(gf_net_init(n, &r));
	int rows[2] = { 7, 5 }, cols[2] = { 12, 7 };
	float w[12 * 7 + 7 * 5], buf[7 + 12 + 5 + 7];
	NN_OK(gf_net_read(n, GF_PARAMS, w));
	NN_OK(gf_net_read(n, GF_BUFFERS, buf));
	/* an average of turning unit vectors: short, and off the singular direction */
	for (int i = 0; i < 7 + 12 + 5 + 7; i++)
		buf[i] = 0.3f * buf[i] + 0.01f * (float)(i % 3);
	NN_OK(gf_net_write(n, GF_BUFFERS, buf));
	NN_OK(gf_net_sn_iterate(n));
	float got[7 + 12 + 5 + 7];
	NN_OK(gf_net_read(n, GF_BUFFERS, got));
	for (int l = 0, wo = 0, bo = 0; l < 2; wo += rows[l] * cols[l], bo += rows[l] + cols[l], l++) {
		double u0[7], u[7], v[12];
		for (int i = 0; i < rows[l]; i++)
			u0[i] = buf[bo + i];
		power_step(w + wo, rows[l], cols[l], u0, u, v);
		for (int i = 0; i < rows[l]; i++)
			assert_true(fabs(got[bo + i] - u[i]) <= 1e-5);
		for (int j = 0; j < cols[l]; j++)
			assert_true(fabs(got[bo + rows[l] + j] - v[j]) <= 1e-5);
	}
	/* many iterations: the stored vectors give the spectral norm (the
	 * reference: 2000 iterations in double) */
	for (int it = 0; it < 300; it++)
		NN_OK(gf_net_sn_iterate(n));
	NN_OK(gf_net_read(n, GF_BUFFERS, got));
	for (int l = 0, wo = 0, bo = 0; l < 2; wo += rows[l] * cols[l], bo += rows[l] + cols[l], l++) {
		double u0[7], u[7], v[12], sigma = 0, s = 0;
		for (int i = 0; i < rows[l]; i++)
			u[i] = 1;
		for (int it = 0; it < 2000; it++) {
			power_step(w + wo, rows[l], cols[l], u, u0, v);
			memcpy(u, u0, sizeof(u));
		}
		for (int i = 0; i < rows[l]; i++)
			for (int j = 0; j < cols[l]; j++) {
				sigma += u[i] * w[wo + i * cols[l] + j] * v[j];
				s += (double)got[bo + i] * w[wo + i * cols[l] + j] * got[bo + rows[l] + j];
			}
		assert_true(fabs(s - sigma) <= 1e-4 * sigma);
	}
	float w2[12 * 7 + 7 * 5];
	NN_OK(gf_net_read(n, GF_PARAMS, w2));   /* the weights stay as they are */
	assert_memory_equal(w2, w, sizeof(w));
	gf_net_destroy(n);
}

/* gf_net_ortho_grad: both routes (rows <= cols: a conv; rows > cols: a
 * linear from a short input, several row blocks) against the definition
 * and finite differences, 1-D parameters untouched, skip honoured, added
 * to the gradients already there. */
static void test_ortho(void **state)
{
	(void)state;
	gf_net *n;
	NN_OK(nn_build(&n, be,
	               "return { input_shape = {3}, {'linear', 3, 40, name = 'tall'}, {'reshape', 10, 2, 2}, "
	               "{'conv', 10, 4, 2, name = 'wide'}, {'flatten'}, {'linear', 4, 5, name = 'skipme'} }",
	               2, 0));
	gf_rng r = { 5, 0, 0 };
	NN_OK(gf_net_init(n, &r));
	size_t np, nv;
	float *dev = gf_net_block(n, GF_PARAMS, &np);
	(void)dev;
	float *p = malloc(np * sizeof(float)), *g0 = malloc(np * sizeof(float)), *g = malloc(np * sizeof(float));
	double *ref = malloc(np * sizeof(double));
	NN_OK(gf_net_read(n, GF_PARAMS, p));
	for (size_t i = 0; i < np; i++)
		g0[i] = 0.01f * (float)((int)(i % 7) - 3);
	NN_OK(gf_net_write(n, GF_GRADS, g0));
	const double beta = 0.37;
	NN_OK(gf_net_ortho_grad(n, (float)beta, "skipme"));
	NN_OK(gf_net_read(n, GF_GRADS, g));
	const gf_view *v = gf_net_views(n, GF_PARAMS, &nv);
	int checked = 0;
	for (size_t i = 0; i < nv; i++) {
		const float *w = p + v[i].offset;
		int rows = (int)v[i].shape[0], cols = (int)(v[i].numel / (size_t)rows);
		int on = v[i].ndim >= 2 && strncmp(v[i].name, "skipme", 6);
		if (on)
			ortho_ref(w, rows, cols, beta, ref + v[i].offset);
		for (size_t k = 0; k < v[i].numel; k++) {
			double want = g0[v[i].offset + k] + (on ? ref[v[i].offset + k] : 0);
			assert_true(fabs(g[v[i].offset + k] - want) <= 1e-5 + 1e-4 * fabs(want));
		}
		if (!on)
			continue;
		checked++;
		/* finite differences of beta/2 ||...||^2 at three entries */
		float *wc = malloc(v[i].numel * sizeof(float));
		memcpy(wc, w, v[i].numel * sizeof(float));
		for (size_t k = 0; k < v[i].numel; k += v[i].numel / 3) {
			float keep = wc[k], h = 1e-2f;
			wc[k] = keep + h;
			double up = ortho_half(wc, rows, cols, beta);
			wc[k] = keep - h;
			double down = ortho_half(wc, rows, cols, beta);
			wc[k] = keep;
			double fd = (up - down) / (2 * (double)h);
			assert_true(fabs(fd - ref[v[i].offset + k]) <= 1e-3 + 1e-3 * fabs(fd));
		}
		free(wc);
	}
	assert_int_equal(checked, 2); /* tall.weight (40, 3) and wide.weight (4, 10, 2, 2) */
	/* beta = 0: nothing */
	NN_OK(gf_net_write(n, GF_GRADS, g0));
	NN_OK(gf_net_ortho_grad(n, 0.0f, NULL));
	NN_OK(gf_net_read(n, GF_GRADS, g));
	assert_memory_equal(g, g0, np * sizeof(float));
	free(p);
	free(g0);
	free(g);
	free(ref);
	gf_net_destroy(n);
}

/* LeCam: nothing before the first average, then the term and its gradient
 * against the definition and finite differences, and the averages. */
static void test_lecam(void **state)
{
	(void)state;
	gf_lecam l = { .lambda = 0.3f, .decay = 0.9f };
	float out[5] = { 0.8f, -0.2f, 0.1f, 1.5f, -1.0f }, g[5];
	assert_true(gf_lecam_grad(&l, out, 5, 0, 0.5f, g) == 0.0);
	for (int i = 0; i < 5; i++)
		assert_true(g[i] == 0.0f);
	gf_lecam_average(&l, 0.6, -0.4); /* first: taken as is */
	assert_true(l.set && l.ema[0] == 0.6 && l.ema[1] == -0.4);
	gf_lecam_average(&l, 1.6, 0.6);
	assert_true(fabs(l.ema[0] - 0.7) < 1e-6 && fabs(l.ema[1] + 0.3) < 1e-6); /* decay is a float */
	for (int fake = 0; fake < 2; fake++) {
		double v = gf_lecam_grad(&l, out, 5, fake, 0.5f, g), want = 0;
		for (int i = 0; i < 5; i++) {
			double r = fake ? 0.7 - out[i] : out[i] - (-0.3);
			want += r > 0 ? r * r : 0;
		}
		want *= 0.3 * 0.5 / 5;
		assert_true(fabs(v - want) < 1e-6);
		for (int i = 0; i < 5; i++) {
			float keep = out[i], h = 1e-3f, gg[5];
			out[i] = keep + h;
			double up = gf_lecam_grad(&l, out, 5, fake, 0.5f, gg);
			out[i] = keep - h;
			double down = gf_lecam_grad(&l, out, 5, fake, 0.5f, gg);
			out[i] = keep;
			assert_true(fabs((up - down) / (2 * h) - g[i]) < 1e-4);
		}
	}
	/* real outputs below the fake average and fakes above the real one cost nothing */
	float calm[2] = { -0.5f, -0.9f };
	assert_true(gf_lecam_grad(&l, calm, 2, 0, 1.0f, g) == 0.0 && g[0] == 0.0f && g[1] == 0.0f);
}

static void test_backend_open(void **state)
{
	(void)state;
	gf_backend *b;
	NN_OK(gf_backend_open("cpu", NULL, &b));
	assert_string_equal(b->ops->name, "cpu");
	assert_int_equal(b->ops->abi, GF_BACKEND_ABI);
	assert_true(b->ops->size == sizeof(gf_backend_ops));
	assert_true(b->threads >= 1);
	gf_backend_close(b);
	setenv("GANFLOW_BACKEND_PATH", "/nonexistent", 1);
	assert_int_equal(gf_backend_open("nosuch", NULL, &b), GF_ENOBACKEND);
	assert_non_null(strstr(gf_errmsg(), "backend_nosuch.so"));
	assert_int_equal(gf_backend_open("../evil", NULL, &b), GF_ENOBACKEND);
	/* auto falls back to the CPU where no CUDA backend is built */
	NN_OK(gf_backend_open("auto", NULL, &b));
	assert_non_null(b);
	gf_backend_close(b);
	unsetenv("GANFLOW_BACKEND_PATH");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_input_checks),
		cmocka_unit_test(test_replica),
		cmocka_unit_test(test_views),
		cmocka_unit_test(test_determinism),
		cmocka_unit_test(test_optim_conf),
		cmocka_unit_test(test_oadam),
		cmocka_unit_test(test_wgan_loss),
		cmocka_unit_test(test_clip),
		cmocka_unit_test(test_sn_frozen),
		cmocka_unit_test(test_sn_iterate),
		cmocka_unit_test(test_ortho),
		cmocka_unit_test(test_lecam),
		cmocka_unit_test(test_backend_open),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
