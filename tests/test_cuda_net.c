/* Whole networks on the CUDA backend against the CPU backend: the DC-GAN
 * G and D forward and backward (outputs, input gradients, every parameter
 * gradient) in fp32 NCHW/NHWC, both forms of the fused upsample, bf16 and
 * fp16; the conditional DC-GAN (embedding, concat) and the classifier
 * (max pooling, dropout, softmax); GAN training steps; checkpoints written
 * from a CUDA network that a CPU network loads and continues from, and the
 * reverse; fp16 dynamic loss scaling (an overflowing update is skipped,
 * counted, and the scale backs off and grows); streams, events and pinned
 * memory between two backend instances. Exits 77 without a CUDA device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include <cmocka.h>

#include <ganflow/msg.h>

#include "test_cuda_util.h"

static gf_backend *cpu;
static char dir[256];

static int setup(void **state)
{
	(void)state;
	cpu = cpu_open();
	snprintf(dir, sizeof(dir), "/tmp/gf_test_cuda.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	gf_backend_close(cpu);
	return system(cmd) == 0 ? 0 : -1;
}

/* Network tolerances: several layers of rounding, batchnorm dividing by
 * small deviations (test_cuda_util.h has the per-op ones). */
static double net_tol(gf_precision p)
{
	return p == GF_PREC_BF16 ? 1e-1 : p == GF_PREC_FP16 ? 3e-2 : 1e-3;
}

static gf_net *build(gf_backend *be, const char *code, int batch)
{
	gf_net *n;
	NN_OK(nn_build(&n, be, code, batch, 0));
	return n;
}

/* Copies params and buffers of a (CPU) into b (any backend). */
static void copy_net(gf_net *b, gf_net *a)
{
	size_t np, nb;
	gf_net_block(a, GF_PARAMS, &np);
	gf_net_block(a, GF_BUFFERS, &nb);
	float *h = malloc((np > nb ? np : nb) * 4 + 4);
	NN_OK(gf_net_read(a, GF_PARAMS, h));
	NN_OK(gf_net_write(b, GF_PARAMS, h));
	NN_OK(gf_net_read(a, GF_BUFFERS, h));
	NN_OK(gf_net_write(b, GF_BUFFERS, h));
	free(h);
}

static int block_close(const char *what, gf_net *got, gf_net *want, gf_block b, double tol)
{
	size_t n;
	gf_net_block(want, b, &n);
	float *g = malloc(n * 4 + 4), *w = malloc(n * 4 + 4);
	NN_OK(gf_net_read(got, b, g));
	NN_OK(gf_net_read(want, b, w));
	size_t nv;
	const gf_view *v = gf_net_views(want, b, &nv);
	int ok = 1;
	for (size_t i = 0; i < nv; i++) {
		char name[160];
		snprintf(name, sizeof(name), "%s %s", what, v[i].name);
		ok &= nn_close(name, g + v[i].offset, w + v[i].offset, v[i].numel, tol);
	}
	free(g);
	free(w);
	return ok;
}

static int out_close(const char *what, gf_backend *gb, const gf_tensor *got, const gf_tensor *want, double tol)
{
	size_t n = (size_t)gf_tensor_numel(want);
	return dev_close(what, gb, got->data, want->data, n, tol);
}

/* ---- forward and backward of whole networks ---- */

/* One pass through G then D (train mode, dropout on, BCE), as a G step
 * followed by a D step's weight gradients, on both backends. */
static void gan_pass(gf_backend *g, gf_precision prec, const char *cfg, const char *gcode, const char *dcode, int B,
                     int zdim, int classes)
{
	double tol = net_tol(prec);
	gf_net *Gc = build(cpu, gcode, B), *Dc = build(cpu, dcode, B), *Gg = build(g, gcode, B), *Dg = build(g, dcode, B);
	gf_rng r = { 42, 0, 0 };
	NN_OK(gf_net_init(Gc, &r));
	NN_OK(gf_net_init(Dc, &r));
	copy_net(Gg, Gc);
	copy_net(Dg, Dc);
	gf_rng_init(gf_net_rng(Dc), 7, 1);
	gf_rng_init(gf_net_rng(Dg), 7, 1);
	float *z = host_rand((size_t)B * zdim, 3, -1, 1);
	int32_t lab[64];
	for (int i = 0; i < B; i++)
		lab[i] = classes ? i % classes : 0;
	gf_tensor zt = nn_tensor(z, 2, B, zdim), lt = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ B });
	const gf_tensor *labels = classes ? &lt : NULL;
	gf_tensor fc, fg, pc, pg, dxc, dxg;
	char what[128];

	NN_OK(gf_net_forward(Gc, &zt, labels, GF_TRAIN));
	NN_OK(gf_net_forward(Gg, &zt, labels, GF_TRAIN));
	NN_OK(gf_net_output(Gc, &fc));
	NN_OK(gf_net_output(Gg, &fg));
	snprintf(what, sizeof(what), "%s: G(z)", cfg);
	assert_true(out_close(what, g, &fg, &fc, tol));
	/* D on the CPU's fakes on both sides, so the comparison is D's alone */
	gf_tensor fin = fc;
	NN_OK(gf_net_forward(Dc, &fin, labels, GF_TRAIN));
	NN_OK(gf_net_forward(Dg, &fin, labels, GF_TRAIN));
	NN_OK(gf_net_output(Dc, &pc));
	NN_OK(gf_net_output(Dg, &pg));
	snprintf(what, sizeof(what), "%s: D(fake)", cfg);
	assert_true(out_close(what, g, &pg, &pc, tol));
	float *dpc = calloc((size_t)B, 4), *dpg = dev_alloc(g, (size_t)B);
	float lc, lg;
	NN_OK(gf_loss(cpu, GF_LOSS_BCE, &lc, dpc, &pc, NULL, 1.0f, 1.0f));
	NN_OK(gf_loss(g, GF_LOSS_BCE, &lg, dpg, &pg, NULL, 1.0f, 1.0f));
	/* the loss gradient of the CPU on both sides (fp16 scales its own) */
	float *dpcd = dev_from(g, dpc, (size_t)B);
	if (prec == GF_PREC_FP16) {
		gf_backend_stats st;
		NN_OK(g->ops->stats(g, &st));
		g->ops->scale(g, dpcd, (size_t)B, st.loss_scale);
	}
	NN_OK(gf_net_backward(Dc, dpc, GF_NEED_DX | GF_NEED_DW));
	NN_OK(gf_net_backward(Dg, dpcd, GF_NEED_DX | GF_NEED_DW));
	if (prec == GF_PREC_FP16) {
		size_t n;
		float *gr = gf_net_block(Dg, GF_GRADS, &n);
		NN_OK(g->ops->grad_unscale(g, gr, n));
	}
	snprintf(what, sizeof(what), "%s: D grads", cfg);
	assert_true(block_close(what, Dg, Dc, GF_GRADS, tol));
	NN_OK(gf_net_dx(Dc, &dxc));
	NN_OK(gf_net_dx(Dg, &dxg));
	/* dx carries the fp16 loss scale: compare G's gradients from the CPU's dx */
	size_t ndx = (size_t)gf_tensor_numel(&dxc);
	float *dxcd = dev_from(g, dxc.data, ndx);
	if (prec != GF_PREC_FP16) {
		snprintf(what, sizeof(what), "%s: dD/dx", cfg);
		assert_true(out_close(what, g, &dxg, &dxc, tol));
	} else {
		/* the GPU's dx holds the loss scale: the same numbers once divided */
		gf_backend_stats st;
		NN_OK(g->ops->stats(g, &st));
		float *h = host_from(g, dxg.data, ndx);
		for (size_t i = 0; i < ndx; i++)
			h[i] /= st.loss_scale;
		snprintf(what, sizeof(what), "%s: dD/dx (unscaled)", cfg);
		assert_true(nn_close(what, h, dxc.data, ndx, tol));
		free(h);
		g->ops->scale(g, dxcd, ndx, st.loss_scale);   /* G's backward in fp16 gets a scaled gradient too */
	}
	NN_OK(gf_net_backward(Gc, dxc.data, GF_NEED_DW));
	NN_OK(gf_net_backward(Gg, dxcd, GF_NEED_DW));
	if (prec == GF_PREC_FP16) {
		size_t n;
		float *gr = gf_net_block(Gg, GF_GRADS, &n);
		NN_OK(g->ops->grad_unscale(g, gr, n));
	}
	snprintf(what, sizeof(what), "%s: G grads", cfg);
	assert_true(block_close(what, Gg, Gc, GF_GRADS, tol));
	snprintf(what, sizeof(what), "%s: G running stats", cfg);
	assert_true(block_close(what, Gg, Gc, GF_BUFFERS, tol));
	/* eval mode (running statistics, no dropout) */
	NN_OK(gf_net_forward(Gc, &zt, labels, GF_EVAL));
	NN_OK(gf_net_forward(Gg, &zt, labels, GF_EVAL));
	NN_OK(gf_net_output(Gc, &fc));
	NN_OK(gf_net_output(Gg, &fg));
	snprintf(what, sizeof(what), "%s: G(z) eval", cfg);
	assert_true(out_close(what, g, &fg, &fc, tol));

	g->ops->free(g, dpg);
	g->ops->free(g, dpcd);
	g->ops->free(g, dxcd);
	free(dpc);
	free(z);
	gf_net_destroy(Gc);
	gf_net_destroy(Dc);
	gf_net_destroy(Gg);
	gf_net_destroy(Dg);
}

static void test_dcgan(void **state)
{
	(void)state;
	struct {
		gf_precision prec;
		gf_layout_choice layout;
		const char *up2, *name;
	} cfgs[] = {
		{ GF_PREC_FP32, GF_LAYOUT_AUTO, "subpixel", "fp32" },
		{ GF_PREC_FP32, GF_LAYOUT_NHWC, "subpixel", "fp32 nhwc" },
		{ GF_PREC_FP32, GF_LAYOUT_AUTO, "upsample", "fp32 upsample" },
		{ GF_PREC_BF16, GF_LAYOUT_AUTO, "subpixel", "bf16" },
		{ GF_PREC_FP16, GF_LAYOUT_AUTO, "subpixel", "fp16" },
	};
	for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
		gf_backend *g = cuda_open(cfgs[i].prec, cfgs[i].layout);
		NN_OK(g->ops->set_option(g, "up2", cfgs[i].up2));
		gan_pass(g, cfgs[i].prec, cfgs[i].name, "return require('backbones.dcgan').G{ size = 32 }",
		         "return require('backbones.dcgan').D{ size = 32 }", 16, 100, 0);
		gf_backend_close(g);
	}
}

static void test_cgan_classifier(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	gan_pass(g, GF_PREC_FP32, "cgan", "return require('backbones.dcgan').CG{ size = 16, z = 20 }",
	         "return require('backbones.dcgan').CD{ size = 16 }", 10, 20, 10);
	/* the classifier: conv-bn-relu-maxpool stages, dropout, logits, ce */
	const char *code = "return require('backbones.classifier').classifier{ size = 28 }";
	int B = 8;
	gf_net *c0 = build(cpu, code, B), *c1 = build(g, code, B);
	gf_rng r = { 5, 0, 0 };
	NN_OK(gf_net_init(c0, &r));
	copy_net(c1, c0);
	gf_rng_init(gf_net_rng(c0), 3, 3);
	gf_rng_init(gf_net_rng(c1), 3, 3);
	float *x = host_rand((size_t)B * 28 * 28, 9, -1, 1);
	gf_tensor xt = nn_tensor(x, 4, B, 1, 28, 28), o0, o1;
	NN_OK(gf_net_forward(c0, &xt, NULL, GF_TRAIN));
	NN_OK(gf_net_forward(c1, &xt, NULL, GF_TRAIN));
	NN_OK(gf_net_output(c0, &o0));
	NN_OK(gf_net_output(c1, &o1));
	assert_true(out_close("classifier logits", g, &o1, &o0, 1e-3));
	int32_t lab[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	int32_t *glab = (int32_t *)dev_alloc(g, 8);
	NN_OK(g->ops->copy(g, glab, lab, sizeof(lab), GF_COPY_H2D));
	gf_tensor lt0 = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ B }), lt1 = lt0;
	lt1.data = glab;
	lt1.device = GF_CUDA;
	float *d0 = calloc((size_t)B * 10, 4), *d1 = dev_alloc(g, (size_t)B * 10), l0, l1;
	NN_OK(gf_loss(cpu, GF_LOSS_CE, &l0, d0, &o0, &lt0, 0, 1));
	NN_OK(gf_loss(g, GF_LOSS_CE, &l1, d1, &o1, &lt1, 0, 1));
	assert_true(nn_close("classifier ce", &l1, &l0, 1, 1e-4));
	NN_OK(gf_net_backward(c0, d0, GF_NEED_DW | GF_NEED_DX));
	NN_OK(gf_net_backward(c1, d1, GF_NEED_DW | GF_NEED_DX));
	assert_true(block_close("classifier grads", c1, c0, GF_GRADS, 1e-3));
	gf_net_destroy(c0);
	gf_net_destroy(c1);
	g->ops->free(g, glab);
	g->ops->free(g, d1);
	free(d0);
	free(x);
	gf_backend_close(g);
}

/* A network of 12 inputs and 10 outputs on the CPU and in fp32 and bf16 on
 * the GPU: output, every gradient and dx against the CPU's. */
static void net_vs_cpu_labels(const char *what, const char *code, int classes)
{
	char msg[128];
	gf_precision precs[] = { GF_PREC_FP32, GF_PREC_BF16 };
	for (int pi = 0; pi < 2; pi++) {
		gf_backend *g = cuda_open(precs[pi], GF_LAYOUT_AUTO);
		int B = 6;
		gf_net *a = build(cpu, code, B), *b = build(g, code, B);
		gf_rng r = { 8, 0, 0 };
		NN_OK(gf_net_init(a, &r));
		copy_net(b, a);
		gf_rng_init(gf_net_rng(a), 4, 4);
		gf_rng_init(gf_net_rng(b), 4, 4);
		float *x = host_rand((size_t)B * 12, 17, -1, 1), *t = host_rand((size_t)B * 10, 18, 0, 0.2f);
		gf_tensor xt = nn_tensor(x, 2, B, 12), oa, ob, dxa, dxb;
		int32_t lab[6];
		for (int i = 0; i < B; i++)
			lab[i] = (i * 3 + 1) % (classes ? classes : 1);
		gf_tensor lt = gf_tensor_make(lab, GF_I32, 1, (int64_t[]){ B });
		NN_OK(gf_net_forward(a, &xt, classes ? &lt : NULL, GF_TRAIN));
		NN_OK(gf_net_forward(b, &xt, classes ? &lt : NULL, GF_TRAIN));
		NN_OK(gf_net_output(a, &oa));
		NN_OK(gf_net_output(b, &ob));
		double tol = net_tol(precs[pi]);
		snprintf(msg, sizeof(msg), "%s: output", what);
		assert_true(out_close(msg, g, &ob, &oa, tol));
		float *da = calloc((size_t)B * 10, 4), *db = dev_alloc(g, (size_t)B * 10), *gt = dev_from(g, t, (size_t)B * 10);
		gf_tensor ta = nn_tensor(t, 2, B, 10), tb = ta;
		tb.data = gt;
		tb.device = GF_CUDA;
		NN_OK(gf_loss(cpu, GF_LOSS_LS, NULL, da, &oa, &ta, 0, 1));
		float *dac = dev_from(g, da, (size_t)B * 10);   /* the CPU's loss gradient on both sides */
		NN_OK(gf_net_backward(a, da, GF_NEED_DW | GF_NEED_DX));
		NN_OK(gf_net_backward(b, dac, GF_NEED_DW | GF_NEED_DX));
		snprintf(msg, sizeof(msg), "%s: grads", what);
		assert_true(block_close(msg, b, a, GF_GRADS, tol));
		NN_OK(gf_net_dx(a, &dxa));
		NN_OK(gf_net_dx(b, &dxb));
		snprintf(msg, sizeof(msg), "%s: dx", what);
		assert_true(out_close(msg, g, &dxb, &dxa, tol));
		/* the GPU's own loss matches too */
		float la, lb;
		NN_OK(gf_loss(cpu, GF_LOSS_LS, &la, NULL, &oa, &ta, 0, 1));
		NN_OK(gf_loss(g, GF_LOSS_LS, &lb, db, &ob, &tb, 0, 1));
		snprintf(msg, sizeof(msg), "%s: loss", what);
		assert_true(nn_close(msg, &lb, &la, 1, tol));
		g->ops->free(g, db);
		g->ops->free(g, gt);
		g->ops->free(g, dac);
		free(da);
		free(x);
		free(t);
		gf_net_destroy(a);
		gf_net_destroy(b);
		gf_backend_close(g);
	}
}

static void net_vs_cpu(const char *what, const char *code)
{
	net_vs_cpu_labels(what, code, 0);
}

/* The layer types the DC-GANs do not use, in one network (transposed
 * conv, unfused upsample x3, average pooling, 1d batchnorm, dropout,
 * sigmoid, softmax; max pooling is the classifier's, in fp32 only: a
 * near-tie can route its gradient elsewhere in bf16), forward and
 * backward against the CPU. */
static void test_all_layers(void **state)
{
	(void)state;
	net_vs_cpu("all layers",
	           "return { {'linear', 12, 64}, {'bn', 64}, {'relu'}, {'reshape', 4, 4, 4},"
	           " {'tconv', 4, 6, 4, 2, 1}, {'upsample', 3}, {'conv', 6, 5, 3, 1, 1}, {'avgpool', 2},"
	           " {'tanh'}, {'dropout', 0.3}, {'conv', 5, 3, 3, 2, 1}, {'lrelu', 0.1}, {'dropout2d', 0.2},"
	           " {'sigmoid'}, {'flatten'}, {'linear', 108, 10}, {'softmax'},"
	           " input_shape = {12} }");
}

/* The ResNet/BigGAN kinds (issue 14), which compose existing backend ops:
 * split chunks of z, instancenorm, residual add, global sum pooling, in a
 * small up/down residual network. */
static void test_resnet_kinds(void **state)
{
	(void)state;
	net_vs_cpu("resnet kinds",
	           "return { {'linear', 12, 40, name = 'z'}, {'split', 0, 32}, {'reshape', 2, 4, 4},"
	           " {'instancenorm', 2, affine = true}, {'relu', name = 'h'}, {'conv', 2, 2, 3, 1, 1},"
	           " {'add', with = 'h'}, {'upsample', 2}, {'conv', 2, 3, 3, 1, 1, name = 'u'}, {'avgpool', 2},"
	           " {'instancenorm', 3}, {'gsp'}, {'split', 32, 40, input = 'z', name = 'c'},"
	           " {'concat', input = 14, with = 'c'}, {'linear', 11, 10},"
	           " input_shape = {12} }");
}

/* Conditional batchnorm (a cond chunk of z with spectral norm and
 * projection biases; a class embedding) and the projection head, BigGAN's
 * conditioning, against the CPU. */
static void test_cbn_proj(void **state)
{
	(void)state;
	net_vs_cpu_labels("cbn + proj",
	                  "return { {'linear', 12, 40, name = 'z'}, {'split', 0, 32}, {'reshape', 2, 4, 4},"
	                  " {'split', 32, 40, input = 'z', name = 'c'},"
	                  " {'cbn', 2, cond = 'c', sn = true, bias = true, input = 3}, {'relu'}, {'conv', 2, 3, 3, 1, 1},"
	                  " {'cbn', 3, classes = 5}, {'lrelu', 0.2}, {'gsp', name = 'h'}, {'linear', 3, 1, sn = true},"
	                  " {'proj', 5, 3, with = 'h', sn = true}, {'linear', 1, 10},"
	                  " input_shape = {12} }",
	                  5);
}

/* ---- training, checkpoints ---- */

#define B 8

struct gan {
	gf_backend *be;
	gf_net *g, *d;
	gf_optim *og, *od;
	gf_rng noise;
	int64_t step;
	float *dp;
};

static void gan_open(struct gan *s, gf_backend *be, uint64_t seed, gf_optim_kind kind)
{
	memset(s, 0, sizeof(*s));
	s->be = be;
	s->g = build(be, "return require('backbones.dcgan').G{ z = 16, size = 16 }", B);
	s->d = build(be, "return require('backbones.dcgan').D{ size = 16 }", B);
	gf_rng r = { seed, 0, 0 };
	NN_OK(gf_net_init(s->g, &r));
	NN_OK(gf_net_init(s->d, &r));
	gf_rng_init(gf_net_rng(s->d), seed, 1);
	gf_rng_init(&s->noise, seed, 2);
	gf_optim_conf c;
	gf_optim_defaults(&c, kind);
	c.lr = kind == GF_OPT_SGD ? 0.01f : 2e-4f;
	c.momentum = kind == GF_OPT_SGD ? 0.9f : 0.0f;
	c.beta1 = 0.5f;
	NN_OK(gf_optim_create(&s->og, s->g, &c));
	NN_OK(gf_optim_create(&s->od, s->d, &c));
	s->dp = be->device == GF_CPU ? calloc(B, 4) : dev_alloc(be, B);
}

static void gan_close(struct gan *s)
{
	gf_optim_destroy(s->og);
	gf_optim_destroy(s->od);
	gf_net_destroy(s->g);
	gf_net_destroy(s->d);
	if (s->be->device == GF_CPU)
		free(s->dp);
	else
		s->be->ops->free(s->be, s->dp);
}

/* One GAN iteration; the real batch depends on the step number only. */
static void gan_step(struct gan *s, float *lg, float *ld)
{
	float z[B * 16], real[B * 256];
	gf_rng data = { 999, 0, (uint64_t)s->step * 1000 };
	gf_rng_normal(&data, real, B * 256, 0, 0.5f);
	gf_rng_normal(&s->noise, z, B * 16, 0, 1);
	gf_tensor zt = nn_tensor(z, 2, B, 16), rt = nn_tensor(real, 4, B, 1, 16, 16), fake, pred, dx;
	float l1, l2;
	NN_OK(gf_net_forward(s->g, &zt, NULL, GF_TRAIN));
	NN_OK(gf_net_output(s->g, &fake));
	NN_OK(gf_net_forward(s->d, &fake, NULL, GF_TRAIN));
	NN_OK(gf_net_output(s->d, &pred));
	NN_OK(gf_loss(s->be, GF_LOSS_BCE, lg, s->dp, &pred, NULL, 1.0f, 1.0f));
	NN_OK(gf_net_backward(s->d, s->dp, GF_NEED_DX));
	NN_OK(gf_net_dx(s->d, &dx));
	NN_OK(gf_net_backward(s->g, dx.data, GF_NEED_DW));
	NN_OK(gf_optim_step(s->og));
	NN_OK(gf_net_forward(s->d, &rt, NULL, GF_TRAIN));
	NN_OK(gf_net_output(s->d, &pred));
	NN_OK(gf_loss(s->be, GF_LOSS_BCE, &l1, s->dp, &pred, NULL, 1.0f, 0.5f));
	NN_OK(gf_net_backward(s->d, s->dp, GF_NEED_DW));
	NN_OK(gf_net_forward(s->d, &fake, NULL, GF_TRAIN));
	NN_OK(gf_net_output(s->d, &pred));
	NN_OK(gf_loss(s->be, GF_LOSS_BCE, &l2, s->dp, &pred, NULL, 0.0f, 0.5f));
	NN_OK(gf_net_backward(s->d, s->dp, GF_NEED_DW | GF_ACCUMULATE));
	NN_OK(gf_optim_step(s->od));
	*ld = l1 + l2;
	s->step++;
}

static void parts(struct gan *s, gf_ckpt_part p[2])
{
	p[0] = (gf_ckpt_part){ "G", s->g, s->og };
	p[1] = (gf_ckpt_part){ "D", s->d, s->od };
}

static int state_close(const char *what, struct gan *a, struct gan *b, double tol)
{
	char w[96];
	int ok = 1;
	snprintf(w, sizeof(w), "%s G", what);
	ok &= block_close(w, a->g, b->g, GF_PARAMS, tol) & block_close(w, a->g, b->g, GF_BUFFERS, tol);
	snprintf(w, sizeof(w), "%s D", what);
	ok &= block_close(w, a->d, b->d, GF_PARAMS, tol) & block_close(w, a->d, b->d, GF_BUFFERS, tol);
	ok &= a->noise.offset == b->noise.offset && gf_net_rng(a->d)->offset == gf_net_rng(b->d)->offset;
	return ok;
}

/* SGD keeps the updates linear in the gradients, so the GPU's rounding
 * differences stay relative; Adam's sign-like first steps would turn a
 * rounding difference on a vanishing gradient into a full step. */
static void test_training(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	struct gan a, b;
	gan_open(&a, cpu, 11, GF_OPT_SGD);
	gan_open(&b, g, 11, GF_OPT_SGD);
	float lga, lda, lgb, ldb;
	for (int i = 0; i < 3; i++) {
		gan_step(&a, &lga, &lda);
		gan_step(&b, &lgb, &ldb);
		assert_true(nn_close("loss G", &lgb, &lga, 1, 1e-3));
		assert_true(nn_close("loss D", &ldb, &lda, 1, 1e-3));
	}
	assert_true(state_close("after 3 SGD steps", &b, &a, 1e-3));
	gan_close(&a);
	gan_close(&b);
	/* Adam runs too, and its results stay finite and close on most values */
	gan_open(&b, g, 11, GF_OPT_ADAM);
	for (int i = 0; i < 3; i++) {
		gan_step(&b, &lgb, &ldb);
		assert_true(isfinite(lgb) && isfinite(ldb));
	}
	gan_close(&b);
	gf_backend_close(g);
}

static const char *path(const char *name)
{
	static char buf[512];
	snprintf(buf, sizeof(buf), "%s/%s", dir, name);
	return buf;
}

/* Everything a checkpoint holds, as host data, compared bit for bit. */
static void same_state(struct gan *a, struct gan *b)
{
	gf_net *na[2] = { a->g, a->d }, *nb[2] = { b->g, b->d };
	gf_optim *oa[2] = { a->og, a->od }, *ob[2] = { b->og, b->od };
	for (int k = 0; k < 2; k++) {
		for (int blk = GF_PARAMS; blk <= GF_BUFFERS; blk += 2) {
			size_t n;
			gf_net_block(na[k], (gf_block)blk, &n);
			float *x = malloc(n * 4 + 4), *y = malloc(n * 4 + 4);
			NN_OK(gf_net_read(na[k], (gf_block)blk, x));
			NN_OK(gf_net_read(nb[k], (gf_block)blk, y));
			assert_memory_equal(x, y, n * 4);
			free(x);
			free(y);
		}
		size_t n;
		float *sa = gf_optim_state(oa[k], &n), *sb = gf_optim_state(ob[k], NULL);
		float *x = malloc(n * 4 + 4), *y = malloc(n * 4 + 4);
		NN_OK(a->be->ops->copy(a->be, x, sa, n * 4, GF_COPY_D2H));
		NN_OK(b->be->ops->copy(b->be, y, sb, n * 4, GF_COPY_D2H));
		assert_memory_equal(x, y, n * 4);
		free(x);
		free(y);
		assert_int_equal(gf_optim_steps(oa[k]), gf_optim_steps(ob[k]));
	}
	assert_memory_equal(&a->noise, &b->noise, sizeof(gf_rng));
	assert_memory_equal(gf_net_rng(a->d), gf_net_rng(b->d), sizeof(gf_rng));
	assert_int_equal(a->step, b->step);
}

/* Train on `from`, checkpoint, load into `to`: the state arrives bit for
 * bit; then both continue and stay close. */
static void ckpt_cross(gf_backend *from, gf_backend *to, const char *file)
{
	struct gan a, b;
	gan_open(&a, from, 21, GF_OPT_SGD);
	gan_open(&b, to, 99, GF_OPT_SGD);   /* other seeds: everything must come from the file */
	float lg, ld, lg2, ld2;
	for (int i = 0; i < 2; i++)
		gan_step(&a, &lg, &ld);
	gf_ckpt_part pa[2], pb[2];
	parts(&a, pa);
	parts(&b, pb);
	NN_OK(gf_ckpt_save(path(file), pa, 2, a.step, &a.noise, NULL));
	NN_OK(gf_ckpt_load(path(file), pb, 2, &b.step, &b.noise));
	same_state(&a, &b);
	for (int i = 0; i < 2; i++) {
		gan_step(&a, &lg, &ld);
		gan_step(&b, &lg2, &ld2);
		assert_true(nn_close("loss G after resume", &lg2, &lg, 1, 1e-3));
		assert_true(nn_close("loss D after resume", &ld2, &ld, 1, 1e-3));
	}
	assert_true(state_close("resumed on the other device", &b, &a, 1e-3));
	gan_close(&a);
	gan_close(&b);
}

static void test_checkpoint_cross_device(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	ckpt_cross(g, cpu, "gpu_to_cpu.safetensors");
	ckpt_cross(cpu, g, "cpu_to_gpu.safetensors");
	gf_backend_close(g);
}

/* ---- fp16 loss scaling ---- */

static float *read_block(gf_net *n, gf_block b, size_t *len)
{
	gf_net_block(n, b, len);
	float *h = malloc(*len * 4 + 4);
	NN_OK(gf_net_read(n, b, h));
	return h;
}

static void test_fp16_loss_scaling(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP16, GF_LAYOUT_AUTO);
	gf_backend_stats st;
	NN_OK(g->ops->stats(g, &st));
	assert_true(st.loss_scale == 65536.0f);
	assert_int_equal(st.layout, GF_LAYOUT_NHWC);
	struct gan s;
	gan_open(&s, g, 5, GF_OPT_ADAM);
	float lg, ld;
	gan_step(&s, &lg, &ld);   /* ordinary: both updates applied */
	NN_OK(g->ops->stats(g, &st));
	assert_int_equal(st.skipped_steps, 0);
	assert_int_equal(st.optim_steps, 2);
	assert_true(isfinite(lg) && isfinite(ld));

	/* a scale that overflows fp16 at once: both updates skipped, counted,
	 * the parameters untouched, the scale halved once per skip */
	NN_OK(g->ops->set_option(g, "loss_scale", "1e30"));
	size_t ng, nd;
	float *g0 = read_block(s.g, GF_PARAMS, &ng), *d0 = read_block(s.d, GF_PARAMS, &nd);
	gan_step(&s, &lg, &ld);
	assert_true(isfinite(lg) && isfinite(ld));   /* the loss values themselves are not scaled */
	NN_OK(g->ops->stats(g, &st));
	assert_int_equal(st.skipped_steps, 2);
	assert_int_equal(st.optim_steps, 2);
	assert_true(st.loss_scale == 1e30f * 0.25f);
	float *g1 = read_block(s.g, GF_PARAMS, &ng), *d1 = read_block(s.d, GF_PARAMS, &nd);
	assert_memory_equal(g0, g1, ng * 4);
	assert_memory_equal(d0, d1, nd * 4);

	/* back to a sane scale: updates apply, and the scale grows after
	 * growth_interval good updates */
	NN_OK(g->ops->set_option(g, "loss_scale", "1024"));
	NN_OK(g->ops->set_option(g, "growth_interval", "2"));
	gan_step(&s, &lg, &ld);
	NN_OK(g->ops->stats(g, &st));
	assert_int_equal(st.skipped_steps, 2);
	assert_int_equal(st.optim_steps, 4);
	assert_true(st.loss_scale == 2048.0f);
	float *g2 = read_block(s.g, GF_PARAMS, &ng);
	assert_true(memcmp(g1, g2, ng * 4) != 0);
	free(g0);
	free(d0);
	free(g1);
	free(d1);
	free(g2);
	gan_close(&s);
	gf_backend_close(g);
}

/* ---- streams, events, pinned memory ---- */

static void test_events_pinned(void **state)
{
	(void)state;
	gf_backend *a = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO), *b = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	assert_true(GF_BACKEND_HAS(a, event_record) && GF_BACKEND_HAS(a, pinned_alloc) && GF_BACKEND_HAS(a, stream));
	assert_true(a->ops->stream(a) != NULL && a->ops->stream(a) != b->ops->stream(b));
	assert_false(GF_BACKEND_HAS(cpu, event_record));
	size_t n = 1 << 20;
	float *xa = dev_alloc(a, n), *xb = dev_alloc(b, n);
	void *ev;
	NN_OK(a->ops->event_create(a, &ev));
	/* producer: work queued on a's stream, then the event; consumer: b's
	 * stream waits for the event on the device and copies */
	NN_OK(a->ops->fill(a, xa, n, 3.0f));
	NN_OK(a->ops->scale(a, xa, n, 2.0f));
	NN_OK(a->ops->event_record(a, ev));
	NN_OK(b->ops->event_wait(b, ev));
	NN_OK(b->ops->copy(b, xb, xa, n * 4, GF_COPY_D2D));
	float *h = host_from(b, xb, n);
	for (size_t i = 0; i < n; i += 4097)
		assert_true(h[i] == 6.0f);
	free(h);
	/* pinned buffers as a message pool's allocator, copied asynchronously */
	gf_allocator al = { a->ops->pinned_alloc, a->ops->pinned_free, a };
	gf_msg_pool *pool;
	assert_int_equal(gf_msg_pool_create(2, &al, &pool), 0);
	gf_msg *m = gf_msg_pool_get(pool);
	float *buf = gf_msg_buffer(m, 0, n * 4);
	assert_non_null(buf);
	struct cudaPointerAttributes attr;
	assert_int_equal(cudaPointerGetAttributes(&attr, buf), cudaSuccess);
	assert_int_equal(attr.type, cudaMemoryTypeHost);
	for (size_t i = 0; i < n; i++)
		buf[i] = (float)i;
	NN_OK(a->ops->copy_async(a, xa, buf, n * 4, GF_COPY_H2D));
	NN_OK(a->ops->event_record(a, ev));
	NN_OK(a->ops->event_sync(a, ev));   /* now the buffer may be reused */
	memset(buf, 0, n * 4);
	NN_OK(a->ops->copy_async(a, buf, xa, n * 4, GF_COPY_D2H));
	NN_OK(a->ops->event_record(a, ev));
	NN_OK(a->ops->event_sync(a, ev));
	for (size_t i = 0; i < n; i += 1001)
		assert_true(buf[i] == (float)i);
	gf_msg_release(m);
	a->ops->event_destroy(a, ev);
	a->ops->free(a, xa);
	b->ops->free(b, xb);
	gf_backend_close(a);
	/* pinned memory outlives the instance that gave it (the .so stays loaded) */
	gf_msg_pool_destroy(pool);
	gf_backend_close(b);
}

int main(void)
{
	cuda_require_device("test_cuda_net");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dcgan),
		cmocka_unit_test(test_cgan_classifier),
		cmocka_unit_test(test_all_layers),
		cmocka_unit_test(test_resnet_kinds),
		cmocka_unit_test(test_cbn_proj),
		cmocka_unit_test(test_training),
		cmocka_unit_test(test_checkpoint_cross_device),
		cmocka_unit_test(test_fp16_loss_scaling),
		cmocka_unit_test(test_events_pinned),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
