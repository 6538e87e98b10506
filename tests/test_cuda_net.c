/* Whole networks on the CUDA backend against the CPU backend: the DC-GAN
 * G and D forward and backward (outputs, input gradients, every parameter
 * gradient) in fp32 NCHW/NHWC, both forms of the fused upsample, bf16 and
 * fp16; the conditional DC-GAN (embedding, concat) and the classifier
 * (max pooling, dropout, softmax); GAN training steps; checkpoints written
 * from a CUDA network that a CPU network loads and continues from, and the
 * reverse; fp16 dynamic loss scaling (an overflowing update is skipped,
 * counted, and the scale backs off and grows); streams, events and pinned
 * memory between two backend instances. The networks and the passes that
 * compare them are test_cuda_cases.h's: the CPU test test_cuda_cmp builds
 * every one on the CPU and runs the passes on an emulated bf16/fp16
 * backend. Every case runs and reports before a test fails (CHECK).
 * Exits 77 without a CUDA device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include <cmocka.h>

#include <ganflow/msg.h>

#include "test_cuda_util.h"
#include "test_cuda_cases.h"

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
		gan_pass(cpu, g, cfgs[i].prec, cfgs[i].name, NET_DCGAN_G, NET_DCGAN_D, 16, 100, 0);
		gf_backend_close(g);
	}
	checks_done();
}

static void test_cgan_classifier(void **state)
{
	(void)state;
	gf_backend *g = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	gan_pass(cpu, g, GF_PREC_FP32, "cgan", NET_DCGAN_CG, NET_DCGAN_CD, 10, 20, 10);
	classifier_pass(cpu, g, GF_PREC_FP32);
	gf_backend_close(g);
	checks_done();
}

/* A network of 12 inputs and 10 outputs in fp32 and bf16 on the GPU
 * against the CPU: output, every gradient, dx, the loss (net_pass). */
static void net_vs_cpu(const char *what, const char *code, int classes)
{
	gf_precision precs[] = { GF_PREC_FP32, GF_PREC_BF16 };
	for (int pi = 0; pi < 2; pi++) {
		gf_backend *g = cuda_open(precs[pi], GF_LAYOUT_AUTO);
		net_pass(cpu, g, precs[pi], what, code, classes);
		gf_backend_close(g);
	}
}

/* The layer types the DC-GANs do not use (NET_ALL_LAYERS; max pooling is
 * the classifier's, in fp32 only: a near-tie can route its gradient
 * elsewhere in bf16), forward and backward against the CPU. */
static void test_all_layers(void **state)
{
	(void)state;
	net_vs_cpu("all layers", NET_ALL_LAYERS, 0);
	checks_done();
}

/* The ResNet/BigGAN kinds (issue 14), which compose existing backend ops:
 * split chunks of z, instancenorm, residual add, global sum pooling, in a
 * small up/down residual network (NET_RESNET_KINDS). */
static void test_resnet_kinds(void **state)
{
	(void)state;
	net_vs_cpu("resnet kinds", NET_RESNET_KINDS, 0);
	checks_done();
}

/* Conditional batchnorm and the projection head, BigGAN's conditioning
 * (NET_CBN_PROJ), against the CPU. */
static void test_cbn_proj(void **state)
{
	(void)state;
	net_vs_cpu("cbn + proj", NET_CBN_PROJ, 5);
	checks_done();
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
	s->g = net_build_ok(be, NET_SMALL_G, B);
	s->d = net_build_ok(be, NET_SMALL_D, B);
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
		CHECK(nn_close("loss G", &lgb, &lga, 1, 1e-3));
		CHECK(nn_close("loss D", &ldb, &lda, 1, 1e-3));
	}
	CHECK(state_close("after 3 SGD steps", &b, &a, 1e-3));
	gan_close(&a);
	gan_close(&b);
	/* Adam runs too, and its results stay finite and close on most values */
	gan_open(&b, g, 11, GF_OPT_ADAM);
	for (int i = 0; i < 3; i++) {
		gan_step(&b, &lgb, &ldb);
		CHECK(isfinite(lgb) && isfinite(ldb));
	}
	gan_close(&b);
	gf_backend_close(g);
	checks_done();
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
			CHECK_MEM(x, y, n * 4);
			free(x);
			free(y);
		}
		size_t n;
		float *sa = gf_optim_state(oa[k], &n), *sb = gf_optim_state(ob[k], NULL);
		float *x = malloc(n * 4 + 4), *y = malloc(n * 4 + 4);
		NN_OK(a->be->ops->copy(a->be, x, sa, n * 4, GF_COPY_D2H));
		NN_OK(b->be->ops->copy(b->be, y, sb, n * 4, GF_COPY_D2H));
		CHECK_MEM(x, y, n * 4);
		free(x);
		free(y);
		CHECK_EQ(gf_optim_steps(oa[k]), gf_optim_steps(ob[k]));
	}
	CHECK_MEM(&a->noise, &b->noise, sizeof(gf_rng));
	CHECK_MEM(gf_net_rng(a->d), gf_net_rng(b->d), sizeof(gf_rng));
	CHECK_EQ(a->step, b->step);
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
		CHECK(nn_close("loss G after resume", &lg2, &lg, 1, 1e-3));
		CHECK(nn_close("loss D after resume", &ld2, &ld, 1, 1e-3));
	}
	CHECK(state_close("resumed on the other device", &b, &a, 1e-3));
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
	checks_done();
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
	CHECK(st.loss_scale == 65536.0f);
	CHECK_EQ(st.layout, GF_LAYOUT_NHWC);
	struct gan s;
	gan_open(&s, g, 5, GF_OPT_ADAM);
	float lg, ld;
	gan_step(&s, &lg, &ld);   /* ordinary: both updates applied */
	NN_OK(g->ops->stats(g, &st));
	CHECK_EQ(st.skipped_steps, 0);
	CHECK_EQ(st.optim_steps, 2);
	CHECK(isfinite(lg) && isfinite(ld));

	/* a scale that overflows fp16 at once: both updates skipped, counted,
	 * the parameters untouched, the scale halved once per skip */
	NN_OK(g->ops->set_option(g, "loss_scale", "1e30"));
	size_t ng, nd;
	float *g0 = read_block(s.g, GF_PARAMS, &ng), *d0 = read_block(s.d, GF_PARAMS, &nd);
	gan_step(&s, &lg, &ld);
	CHECK(isfinite(lg) && isfinite(ld));   /* the loss values themselves are not scaled */
	NN_OK(g->ops->stats(g, &st));
	CHECK_EQ(st.skipped_steps, 2);
	CHECK_EQ(st.optim_steps, 2);
	CHECK(st.loss_scale == 1e30f * 0.25f);
	float *g1 = read_block(s.g, GF_PARAMS, &ng), *d1 = read_block(s.d, GF_PARAMS, &nd);
	CHECK_MEM(g0, g1, ng * 4);
	CHECK_MEM(d0, d1, nd * 4);

	/* back to a sane scale: updates apply, and the scale grows after
	 * growth_interval good updates */
	NN_OK(g->ops->set_option(g, "loss_scale", "1024"));
	NN_OK(g->ops->set_option(g, "growth_interval", "2"));
	gan_step(&s, &lg, &ld);
	NN_OK(g->ops->stats(g, &st));
	CHECK_EQ(st.skipped_steps, 2);
	CHECK_EQ(st.optim_steps, 4);
	CHECK(st.loss_scale == 2048.0f);
	float *g2 = read_block(s.g, GF_PARAMS, &ng);
	CHECK(memcmp(g1, g2, ng * 4) != 0);
	free(g0);
	free(d0);
	free(g1);
	free(d1);
	free(g2);
	gan_close(&s);
	gf_backend_close(g);
	checks_done();
}

/* ---- streams, events, pinned memory ---- */

static void test_events_pinned(void **state)
{
	(void)state;
	gf_backend *a = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO), *b = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	assert_true(GF_BACKEND_HAS(a, event_record) && GF_BACKEND_HAS(a, pinned_alloc) && GF_BACKEND_HAS(a, stream));
	CHECK(a->ops->stream(a) != NULL && a->ops->stream(a) != b->ops->stream(b));
	CHECK(!GF_BACKEND_HAS(cpu, event_record));
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
	size_t wrong = 0;
	for (size_t i = 0; i < n; i += 4097)
		wrong += h[i] != 6.0f;
	CHECK(wrong == 0);
	free(h);
	/* pinned buffers as a message pool's allocator, copied asynchronously */
	gf_allocator al = { a->ops->pinned_alloc, a->ops->pinned_free, a };
	gf_msg_pool *pool;
	assert_int_equal(gf_msg_pool_create(2, &al, &pool), 0);
	gf_msg *m = gf_msg_pool_get(pool);
	float *buf = gf_msg_buffer(m, 0, n * 4);
	assert_non_null(buf);
	struct cudaPointerAttributes attr;
	CHECK_EQ(cudaPointerGetAttributes(&attr, buf), cudaSuccess);
	CHECK_EQ(attr.type, cudaMemoryTypeHost);
	for (size_t i = 0; i < n; i++)
		buf[i] = (float)i;
	NN_OK(a->ops->copy_async(a, xa, buf, n * 4, GF_COPY_H2D));
	NN_OK(a->ops->event_record(a, ev));
	NN_OK(a->ops->event_sync(a, ev));   /* now the buffer may be reused */
	memset(buf, 0, n * 4);
	NN_OK(a->ops->copy_async(a, buf, xa, n * 4, GF_COPY_D2H));
	NN_OK(a->ops->event_record(a, ev));
	NN_OK(a->ops->event_sync(a, ev));
	wrong = 0;
	for (size_t i = 0; i < n; i += 1001)
		wrong += buf[i] != (float)i;
	CHECK(wrong == 0);
	gf_msg_release(m);
	a->ops->event_destroy(a, ev);
	a->ops->free(a, xa);
	b->ops->free(b, xb);
	gf_backend_close(a);
	/* pinned memory outlives the instance that gave it (the .so stays loaded) */
	gf_msg_pool_destroy(pool);
	gf_backend_close(b);
	checks_done();
}

int main(void)
{
	cuda_require_device("test_cuda_net");
	const struct CMUnitTest tests[] = {
		CHECKED_TEST(test_dcgan),
		CHECKED_TEST(test_cgan_classifier),
		CHECKED_TEST(test_all_layers),
		CHECKED_TEST(test_resnet_kinds),
		CHECKED_TEST(test_cbn_proj),
		CHECKED_TEST(test_training),
		CHECKED_TEST(test_checkpoint_cross_device),
		CHECKED_TEST(test_fp16_loss_scaling),
		CHECKED_TEST(test_events_pinned),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
