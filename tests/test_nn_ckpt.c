/* Checkpoints of networks (gf_ckpt_save / gf_ckpt_load): names and round
 * trips; N steps + save + resume + N steps is bit-identical to 2N steps
 * (parameters, running statistics, optimiser state, generators); loading
 * a checkpoint whose tensors differ names the first that differs and
 * changes nothing.
 *
 *   test_nn_ckpt --write PATH   writes the small checkpoint that
 *                               tests/ref/check_ckpt.py reads in Python */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include <cmocka.h>

#include "test_nn_util.h"

static gf_backend *be;
static char dir[256];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/gf_test_ckpt.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	gf_backend_opts o = { .threads = 2 };
	return gf_backend_open("cpu", &o, &be);
}

static int teardown(void **state)
{
	(void)state;
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	gf_backend_close(be);
	return system(cmd) == 0 ? 0 : -1;
}

static const char *path(const char *name)
{
	static char buf[512];
	snprintf(buf, sizeof(buf), "%s/%s", dir, name);
	return buf;
}

/* ---- a small GAN ---- */

struct gan {
	gf_net *g, *d;
	gf_optim *og, *od;
	gf_rng noise;
	int64_t step;
};

#define B 4

static void gan_open(struct gan *s, uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	NN_OK(nn_build(&s->g, be, "return require('backbones.dcgan').G{ z = 8, size = 16 }", B, 0));
	NN_OK(nn_build(&s->d, be, "return require('backbones.dcgan').D{ size = 16 }", B, 0));
	gf_rng r = { seed, 0, 0 };
	NN_OK(gf_net_init(s->g, &r));
	NN_OK(gf_net_init(s->d, &r));
	gf_rng_init(gf_net_rng(s->d), seed, 1);
	gf_rng_init(&s->noise, seed, 2);
	gf_optim_conf c;
	gf_optim_defaults(&c, GF_OPT_ADAM);
	c.lr = 2e-4f;
	c.beta1 = 0.5f;
	NN_OK(gf_optim_create(&s->og, s->g, &c));
	gf_optim_defaults(&c, GF_OPT_OADAM);
	NN_OK(gf_optim_create(&s->od, s->d, &c));
}

static void gan_close(struct gan *s)
{
	gf_optim_destroy(s->og);
	gf_optim_destroy(s->od);
	gf_net_destroy(s->g);
	gf_net_destroy(s->d);
}

/* One GAN iteration; the real batch depends on the step number only. */
static void gan_step(struct gan *s)
{
	float z[B * 8], real[B * 256], dp[B];
	gf_rng data = { 999, 0, (uint64_t)s->step * 1000 };
	gf_rng_normal(&data, real, B * 256, 0, 0.5f);
	gf_rng_normal(&s->noise, z, B * 8, 0, 1);
	gf_tensor zt = nn_tensor(z, 2, B, 8), rt = nn_tensor(real, 4, B, 1, 16, 16), fake, pred, dx;
	NN_OK(gf_net_forward(s->g, &zt, NULL, GF_TRAIN));
	NN_OK(gf_net_output(s->g, &fake));
	NN_OK(gf_net_forward(s->d, &fake, NULL, GF_TRAIN));
	NN_OK(gf_net_output(s->d, &pred));
	NN_OK(gf_loss(be, GF_LOSS_BCE, NULL, dp, &pred, NULL, 1.0f, 1.0f));
	NN_OK(gf_net_backward(s->d, dp, GF_NEED_DX));
	NN_OK(gf_net_dx(s->d, &dx));
	NN_OK(gf_net_backward(s->g, dx.data, GF_NEED_DW));
	NN_OK(gf_optim_step(s->og));
	NN_OK(gf_net_forward(s->d, &rt, NULL, GF_TRAIN));
	NN_OK(gf_net_output(s->d, &pred));
	NN_OK(gf_loss(be, GF_LOSS_BCE, NULL, dp, &pred, NULL, 1.0f, 0.5f));
	NN_OK(gf_net_backward(s->d, dp, GF_NEED_DW));
	NN_OK(gf_net_forward(s->d, &fake, NULL, GF_TRAIN));
	NN_OK(gf_net_output(s->d, &pred));
	NN_OK(gf_loss(be, GF_LOSS_BCE, NULL, dp, &pred, NULL, 0.0f, 0.5f));
	NN_OK(gf_net_backward(s->d, dp, GF_NEED_DW | GF_ACCUMULATE));
	NN_OK(gf_optim_step(s->od));
	s->step++;
}

static void parts(struct gan *s, gf_ckpt_part p[2])
{
	p[0] = (gf_ckpt_part){ "G", s->g, s->og };
	p[1] = (gf_ckpt_part){ "D", s->d, s->od };
}

/* Everything that evolves, as one host buffer. */
static float *snapshot(struct gan *s, size_t *n)
{
	gf_net *nets[2] = { s->g, s->d };
	gf_optim *opts[2] = { s->og, s->od };
	size_t total = 0, at = 0;
	for (int k = 0; k < 2; k++) {
		size_t a, b, c;
		gf_net_block(nets[k], GF_PARAMS, &a);
		gf_net_block(nets[k], GF_BUFFERS, &b);
		gf_optim_state(opts[k], &c);
		total += a + b + c;
	}
	float *buf = malloc(total * sizeof(float));
	for (int k = 0; k < 2; k++) {
		size_t a, b, c;
		gf_net_block(nets[k], GF_PARAMS, &a);
		gf_net_block(nets[k], GF_BUFFERS, &b);
		float *st = gf_optim_state(opts[k], &c);
		gf_net_read(nets[k], GF_PARAMS, buf + at);
		gf_net_read(nets[k], GF_BUFFERS, buf + at + a);
		memcpy(buf + at + a + b, st, c * sizeof(float));
		at += a + b + c;
	}
	*n = total;
	return buf;
}

static void test_resume(void **state)
{
	(void)state;
	enum { N = 3 };
	struct gan a, b;
	gf_ckpt_part pa[2], pb[2];
	gan_open(&a, 1);
	for (int i = 0; i < N; i++)
		gan_step(&a);
	parts(&a, pa);
	const char *meta[] = { "run", "resume-test", NULL };
	NN_OK(gf_ckpt_save(path("resume.safetensors"), pa, 2, a.step, &a.noise, meta));
	for (int i = 0; i < N; i++)
		gan_step(&a);

	gan_open(&b, 2);   /* other initial weights: everything must come from the file */
	parts(&b, pb);
	NN_OK(gf_ckpt_load(path("resume.safetensors"), pb, 2, &b.step, &b.noise));
	assert_int_equal(b.step, N);
	assert_int_equal(gf_optim_steps(b.og), N);
	for (int i = 0; i < N; i++)
		gan_step(&b);

	size_t na, nb;
	float *sa = snapshot(&a, &na), *sb = snapshot(&b, &nb);
	assert_int_equal(na, nb);
	assert_memory_equal(sa, sb, na * sizeof(float));
	assert_memory_equal(&a.noise, &b.noise, sizeof(gf_rng));
	assert_memory_equal(gf_net_rng(a.d), gf_net_rng(b.d), sizeof(gf_rng));
	free(sa);
	free(sb);

	/* the file: names, metadata, a few values */
	gf_st_file *f;
	NN_OK(gf_st_open(&f, path("resume.safetensors")));
	assert_string_equal(gf_st_meta(f, "format"), "ganflow-nn-1");
	assert_string_equal(gf_st_meta(f, "run"), "resume-test");
	gf_tensor t;
	NN_OK(gf_st_get(f, "G.0.weight", &t));
	assert_int_equal(t.ndim, 2);
	assert_int_equal(t.shape[0], 128 * 4 * 4);
	assert_int_equal(t.shape[1], 8);
	NN_OK(gf_st_get(f, "D.6.running_var", &t));
	NN_OK(gf_st_get(f, "D.opt.g_prev.16.weight", &t));
	NN_OK(gf_st_get(f, "G.opt.v.11.bias", &t));
	NN_OK(gf_st_get(f, "G.opt.step", &t));
	assert_int_equal(t.dtype, GF_I64);
	NN_OK(gf_st_get(f, "D.rng", &t));
	assert_int_equal(t.shape[0], 3);
	int64_t step;
	NN_OK(gf_st_read(f, "step", GF_I64, 1, (int64_t[]){ 1 }, &step));
	assert_int_equal(step, N);
	gf_st_close(f);

	/* the entries a stage merges into its own state image: those of the
	 * file without the caller's step and rng, with the same bytes */
	gf_ckpt_entries ce;
	NN_OK(gf_ckpt_collect(pb, 2, &ce));
	NN_OK(gf_ckpt_save(path("again.safetensors"), pb, 2, 0, NULL, NULL));
	NN_OK(gf_st_open(&f, path("again.safetensors")));
	assert_int_equal(ce.n + 1, gf_st_count(f));   /* + "step" */
	for (size_t i = 0; i < ce.n; i++) {
		assert_string_equal(ce.e[i].name, gf_st_name(f, i));
		NN_OK(gf_st_get(f, ce.e[i].name, &t));
		assert_true(gf_tensor_same_shape(&t, &ce.e[i].t) && t.dtype == ce.e[i].t.dtype);
		assert_memory_equal(t.data, ce.e[i].t.data, gf_tensor_bytes(&t));
	}
	gf_st_close(f);
	gf_ckpt_entries_free(&ce);
	assert_null(ce.e);
	gan_close(&a);
	gan_close(&b);
}

static void expect_load_error(const char *file, gf_net *net, gf_optim *opt, const char *prefix, int rc,
                              const char *msg)
{
	size_t np;
	gf_net_block(net, GF_PARAMS, &np);
	float *before = malloc(np * sizeof(float));
	gf_net_read(net, GF_PARAMS, before);
	gf_ckpt_part p = { prefix, net, opt };
	int got = gf_ckpt_load(path(file), &p, 1, NULL, NULL);
	if (got != rc || !strstr(gf_errmsg(), msg)) {
		fprintf(stderr, "load %s as %s: %s (%s), wanted %s with '%s'\n", file, prefix, gf_strerror(got),
		        gf_errmsg(), gf_strerror(rc), msg);
		fail();
	}
	assert_memory_equal(before, gf_net_block(net, GF_PARAMS, NULL), np * sizeof(float));
	free(before);
}

static void test_mismatch(void **state)
{
	(void)state;
	gf_net *g8, *g16, *gx;
	NN_OK(nn_build(&g8, be, "return require('backbones.dcgan').G{ z = 8, size = 16 }", B, 0));
	NN_OK(nn_build(&g16, be, "return require('backbones.dcgan').G{ z = 16, size = 16 }", B, 0));
	NN_OK(nn_build(&gx, be,
	               "local t = require('backbones.dcgan').G{ z = 8, size = 16 }; t[#t + 1] = {'conv', 1, 1, 1}; return t",
	               B, 0));
	gf_rng r = { 5, 0, 0 };
	NN_OK(gf_net_init(g8, &r));
	NN_OK(gf_net_init(g16, &r));
	NN_OK(gf_net_init(gx, &r));
	gf_ckpt_part p = { "G", g8, NULL };
	NN_OK(gf_ckpt_save(path("g8.safetensors"), &p, 1, 7, NULL, NULL));
	p.net = gx;
	NN_OK(gf_ckpt_save(path("gx.safetensors"), &p, 1, 7, NULL, NULL));

	/* shapes differ: the first differing tensor is named with both shapes */
	expect_load_error("g8.safetensors", g16, NULL, "G", GF_ESHAPE, "tensor 'G.0.weight' is (2048, 8) f32, expected (2048, 16) f32");
	/* another prefix: nothing found */
	expect_load_error("g8.safetensors", g8, NULL, "X", GF_ENOTFOUND, "no tensor 'X.0.weight'");
	/* a tensor the network does not have */
	expect_load_error("gx.safetensors", g8, NULL, "G", GF_ESHAPE, "tensor 'G.13.weight' is not in the network");
	/* a network with more layers than the file */
	expect_load_error("g8.safetensors", gx, NULL, "G", GF_ENOTFOUND, "no tensor 'G.13.weight'");
	/* optimiser state asked for but absent */
	gf_optim *o;
	gf_optim_conf c;
	gf_optim_defaults(&c, GF_OPT_ADAM);
	NN_OK(gf_optim_create(&o, g8, &c));
	expect_load_error("g8.safetensors", g8, o, "G", GF_ENOTFOUND, "no tensor 'G.opt.m.0.weight'");
	/* optimiser state present but not asked for: fine */
	p = (gf_ckpt_part){ "G", g8, o };
	NN_OK(gf_ckpt_save(path("g8o.safetensors"), &p, 1, 7, NULL, NULL));
	p.opt = NULL;
	NN_OK(gf_ckpt_load(path("g8o.safetensors"), &p, 1, NULL, NULL));
	/* the global rng asked for but not saved */
	gf_rng rr;
	assert_int_equal(gf_ckpt_load(path("g8.safetensors"), &p, 1, NULL, &rr), GF_ENOTFOUND);
	/* a truncated file */
	FILE *in = fopen(path("g8.safetensors"), "rb"), *out = fopen(path("cut.safetensors"), "wb");
	char buf[4096];
	size_t n = fread(buf, 1, sizeof(buf), in);
	fwrite(buf, 1, n, out);
	fclose(in);
	fclose(out);
	expect_load_error("cut.safetensors", g8, NULL, "G", GF_ECORRUPT, "cut.safetensors");
	expect_load_error("absent.safetensors", g8, NULL, "G", -ENOENT, "absent.safetensors");
	gf_optim_destroy(o);
	gf_net_destroy(g8);
	gf_net_destroy(g16);
	gf_net_destroy(gx);
}

/* ---- the file tests/ref/check_ckpt.py reads ---- */

static int write_known(const char *file)
{
	gf_backend *b;
	gf_net *n;
	if (gf_backend_open("cpu", NULL, &b) || nn_build(&n, b, "return { {'linear', 3, 2}, {'bn', 2}, input_shape = {3} }", 2, 0)) {
		fprintf(stderr, "%s\n", gf_errmsg());
		return 1;
	}
	size_t np, nb;
	gf_net_block(n, GF_PARAMS, &np);
	gf_net_block(n, GF_BUFFERS, &nb);
	float p[16], bu[8];
	for (size_t i = 0; i < np; i++)
		p[i] = 0.25f * (float)i - 1.0f;   /* 0.weight (2,3), 0.bias (2), 1.weight (2), 1.bias (2) */
	for (size_t i = 0; i < nb; i++)
		bu[i] = 10.0f + (float)i;         /* 1.running_mean (2), 1.running_var (2) */
	gf_net_write(n, GF_PARAMS, p);
	gf_net_write(n, GF_BUFFERS, bu);
	gf_rng_init(gf_net_rng(n), 11, 12);
	gf_rng r = { 5, 6, 7 };
	gf_ckpt_part part = { "net", n, NULL };
	const char *meta[] = { "note", "written by test_nn_ckpt --write", NULL };
	int rc = gf_ckpt_save(file, &part, 1, 1234, &r, meta);
	if (rc)
		fprintf(stderr, "%s\n", gf_errmsg());
	gf_net_destroy(n);
	gf_backend_close(b);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write") == 0)
		return write_known(argv[2]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resume),
		cmocka_unit_test(test_mismatch),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
