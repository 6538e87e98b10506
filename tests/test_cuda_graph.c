/* Captured steps (graph_begin / graph_end) on the CUDA backend: a GAN
 * iteration replayed from a CUDA graph gives bit for bit what the same
 * iteration gives eagerly, step after step (parameters, running
 * statistics, optimiser state, losses, generator offsets; fp32 and fp16
 * with its loss scaler), whether the iteration is one graph or a G-step
 * graph and a D-step graph; a step that differs from the captured one is
 * refused and not run; ops that need the host are refused inside the
 * brackets and spoil the capture cleanly; the ema op replays with each
 * step's decay. Every case runs and reports
 * before a test fails (CHECK). Exits 77 without a CUDA device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_cuda_util.h"
#include "test_cuda_cases.h"

#define B 8
#define Z 16

struct gan {
	gf_backend *be;
	gf_net *g, *d;
	gf_optim *og, *od;
	gf_rng noise, data;
	float *z, *real, *dp, *loss;   /* device */
};

static void gan_open(struct gan *s, gf_precision prec)
{
	memset(s, 0, sizeof(*s));
	s->be = cuda_open(prec, GF_LAYOUT_AUTO);
	/* cuDNN's heuristic choice, the same in both instances (timing could
	 * pick different algorithms, and then different bits) */
	NN_OK(s->be->ops->set_option(s->be, "benchmark", "0"));
	NN_OK(nn_build(&s->g, s->be, NET_SMALL_G, B, 0));
	NN_OK(nn_build(&s->d, s->be, NET_SMALL_D, B, 0));
	gf_rng r = { 3, 0, 0 };
	NN_OK(gf_net_init(s->g, &r));
	NN_OK(gf_net_init(s->d, &r));
	gf_rng_init(gf_net_rng(s->d), 3, 1);
	gf_rng_init(&s->noise, 3, 2);
	gf_rng_init(&s->data, 3, 3);
	gf_optim_conf c;
	gf_optim_defaults(&c, GF_OPT_ADAM);
	c.lr = 2e-4f;
	c.beta1 = 0.5f;
	NN_OK(gf_optim_create(&s->og, s->g, &c));
	NN_OK(gf_optim_create(&s->od, s->d, &c));
	s->z = dev_alloc(s->be, B * Z);
	s->real = dev_alloc(s->be, B * 256);
	s->dp = dev_alloc(s->be, B);
	s->loss = dev_alloc(s->be, 3);
}

static void gan_close(struct gan *s)
{
	gf_optim_destroy(s->og);
	gf_optim_destroy(s->od);
	gf_net_destroy(s->g);
	gf_net_destroy(s->d);
	s->be->ops->free(s->be, s->z);
	s->be->ops->free(s->be, s->real);
	s->be->ops->free(s->be, s->dp);
	s->be->ops->free(s->be, s->loss);
	gf_backend_close(s->be);
}

/* The deferred loss: BCE of pred into loss[i], gradient into dp. */
static int bce(struct gan *s, const gf_tensor *pred, float target, float scale, int i)
{
	gf_loss_desc d = { GF_LOSS_BCE, (int)pred->shape[0], 1, target, scale };
	return s->be->ops->loss_dev(s->be, s->loss + i, s->dp, pred->data, NULL, NULL, &d);
}

/* The G step: noise, G, D (train, statistics frozen), BCE(D(G(z)), 1)
 * through D into G, Adam on G. Nothing waits for the host. */
static int g_step(struct gan *s)
{
	gf_backend *be = s->be;
	gf_tensor zt = nn_tensor(s->z, 2, B, Z), fake, pred, dx;
	zt.device = GF_CUDA;
	int rc;
	if ((rc = be->ops->rng_normal(be, s->z, B * Z, 0, 1, &s->noise)))
		return rc;
	s->noise.offset += gf_rng_blocks(B * Z);
	if ((rc = gf_net_forward(s->g, &zt, NULL, GF_TRAIN)) || (rc = gf_net_output(s->g, &fake)) ||
	    (rc = gf_net_forward(s->d, &fake, NULL, GF_TRAIN | GF_FREEZE_STATS)) || (rc = gf_net_output(s->d, &pred)) ||
	    (rc = bce(s, &pred, 1.0f, 1.0f, 0)) || (rc = gf_net_backward(s->d, s->dp, GF_NEED_DX)) ||
	    (rc = gf_net_dx(s->d, &dx)) || (rc = gf_net_backward(s->g, dx.data, GF_NEED_DW)))
		return rc;
	return gf_optim_step(s->og);
}

/* The D step: a fresh real batch (drawn on the device), D on real and on
 * G's last output, Adam on D. */
static int d_step(struct gan *s, int with_optim)
{
	gf_backend *be = s->be;
	gf_tensor rt = nn_tensor(s->real, 4, B, 1, 16, 16), fake, pred;
	rt.device = GF_CUDA;
	int rc;
	if ((rc = be->ops->rng_uniform(be, s->real, B * 256, -1, 1, &s->data)))
		return rc;
	s->data.offset += gf_rng_blocks(B * 256);
	if ((rc = gf_net_output(s->g, &fake)) || (rc = gf_net_forward(s->d, &rt, NULL, GF_TRAIN)) ||
	    (rc = gf_net_output(s->d, &pred)) || (rc = bce(s, &pred, 1.0f, 0.5f, 1)) ||
	    (rc = gf_net_backward(s->d, s->dp, GF_NEED_DW)) || (rc = gf_net_forward(s->d, &fake, NULL, GF_TRAIN)) ||
	    (rc = gf_net_output(s->d, &pred)) || (rc = bce(s, &pred, 0.0f, 0.5f, 2)) ||
	    (rc = gf_net_backward(s->d, s->dp, GF_NEED_DW | GF_ACCUMULATE)))
		return rc;
	return with_optim ? gf_optim_step(s->od) : 0;
}

/* How a run executes its iterations. */
enum { EAGER = 0, ONE_GRAPH, TWO_GRAPHS };

static void iterate(struct gan *s, int mode, gf_graph **gg, gf_graph **gd)
{
	gf_backend *be = s->be;
	if (mode == EAGER) {
		NN_OK(g_step(s));
		NN_OK(d_step(s, 1));
	} else if (mode == ONE_GRAPH) {
		NN_OK(be->ops->graph_begin(be, gg));
		NN_OK(g_step(s));
		NN_OK(d_step(s, 1));
		NN_OK(be->ops->graph_end(be, *gg));
	} else {
		NN_OK(be->ops->graph_begin(be, gg));
		NN_OK(g_step(s));
		NN_OK(be->ops->graph_end(be, *gg));
		NN_OK(be->ops->graph_begin(be, gd));
		NN_OK(d_step(s, 1));
		NN_OK(be->ops->graph_end(be, *gd));
	}
	NN_OK(be->ops->sync(be));
}

static float *dump(struct gan *s, size_t *len)
{
	gf_net *nets[2] = { s->g, s->d };
	gf_optim *opts[2] = { s->og, s->od };
	size_t total = 3;
	for (int k = 0; k < 2; k++) {
		size_t np, nb, no;
		gf_net_block(nets[k], GF_PARAMS, &np);
		gf_net_block(nets[k], GF_BUFFERS, &nb);
		gf_optim_state(opts[k], &no);
		total += np + nb + no;
	}
	float *h = malloc(total * 4), *p = h;
	for (int k = 0; k < 2; k++) {
		size_t n;
		NN_OK(gf_net_read(nets[k], GF_PARAMS, p));
		gf_net_block(nets[k], GF_PARAMS, &n);
		p += n;
		NN_OK(gf_net_read(nets[k], GF_BUFFERS, p));
		gf_net_block(nets[k], GF_BUFFERS, &n);
		p += n;
		float *st = gf_optim_state(opts[k], &n);
		NN_OK(s->be->ops->copy(s->be, p, st, n * 4, GF_COPY_D2H));
		p += n;
	}
	NN_OK(s->be->ops->copy(s->be, p, s->loss, 12, GF_COPY_D2H));
	*len = total;
	return h;
}

static void same(struct gan *a, struct gan *b, int step)
{
	size_t na, nb;
	float *x = dump(a, &na), *y = dump(b, &nb);
	assert_int_equal(na, nb);
	int differ = memcmp(x, y, na * 4) != 0;
	if (differ) {
		for (size_t i = 0; i < na; i++)
			if (memcmp(&x[i], &y[i], 4)) {
				fprintf(stderr, "step %d: value %zu of %zu differs: eager %.9g, graph %.9g\n", step, i, na,
				        (double)x[i], (double)y[i]);
				break;
			}
	}
	CHECK(!differ);
	CHECK_MEM(&a->noise, &b->noise, sizeof(gf_rng));
	CHECK_MEM(&a->data, &b->data, sizeof(gf_rng));
	CHECK_MEM(gf_net_rng(a->d), gf_net_rng(b->d), sizeof(gf_rng));
	CHECK_EQ(gf_optim_steps(a->og), gf_optim_steps(b->og));
	free(x);
	free(y);
}

static void replay_case(gf_precision prec, int mode)
{
	struct gan a, b;
	gan_open(&a, prec);
	gan_open(&b, prec);
	gf_graph *gg = NULL, *gd = NULL;
	/* one eager step first (cuDNN's choices, scratch sizes), then graphs:
	 * the first graph_end captures and runs, the later ones replay */
	for (int step = 1; step <= 6; step++) {
		iterate(&a, EAGER, NULL, NULL);
		iterate(&b, step == 1 ? EAGER : mode, &gg, &gd);
		same(&a, &b, step);
	}
	gf_backend_stats st;
	NN_OK(b.be->ops->stats(b.be, &st));
	CHECK_EQ(st.graphs, mode == TWO_GRAPHS ? 2 : 1);
	CHECK_EQ(st.replays, mode == TWO_GRAPHS ? 8 : 4);
	if (prec == GF_PREC_FP16) {
		gf_backend_stats sa;
		NN_OK(a.be->ops->stats(a.be, &sa));
		CHECK(sa.loss_scale == st.loss_scale);
		CHECK_EQ(sa.skipped_steps, st.skipped_steps);
	}
	b.be->ops->graph_destroy(b.be, gg);
	b.be->ops->graph_destroy(b.be, gd);
	gan_close(&a);
	gan_close(&b);
}

static void test_replay_equals_eager(void **state)
{
	(void)state;
	replay_case(GF_PREC_FP32, ONE_GRAPH);
	replay_case(GF_PREC_FP32, TWO_GRAPHS);
	replay_case(GF_PREC_BF16, ONE_GRAPH);
	replay_case(GF_PREC_FP16, TWO_GRAPHS);
	checks_done();
}

/* A step that is not the captured one is refused and does not run. */
static void test_mismatch(void **state)
{
	(void)state;
	struct gan s;
	gan_open(&s, GF_PREC_FP32);
	gf_graph *g = NULL;
	iterate(&s, EAGER, NULL, NULL);
	iterate(&s, ONE_GRAPH, &g, NULL);
	size_t n0, n1;
	float *before = dump(&s, &n0);
	NN_OK(s.be->ops->graph_begin(s.be, &g));
	NN_OK(g_step(&s));
	NN_OK(d_step(&s, 0));   /* no D update this time */
	CHECK_EQ(s.be->ops->graph_end(s.be, g), GF_EPARAM);
	CHECK(strstr(gf_errmsg(), "differs from the captured one") != NULL);
	NN_OK(s.be->ops->sync(s.be));
	float *after = dump(&s, &n1);
	CHECK_MEM(before, after, n0 * 4);
	/* the graph itself is intact: the captured step still replays */
	iterate(&s, ONE_GRAPH, &g, NULL);
	s.be->ops->graph_destroy(s.be, g);
	free(before);
	free(after);
	gan_close(&s);
	checks_done();
}

/* Ops that need the host are refused between the brackets. */
static void test_refused(void **state)
{
	(void)state;
	struct gan s;
	gan_open(&s, GF_PREC_FP32);
	iterate(&s, EAGER, NULL, NULL);
	gf_graph *g = NULL;
	NN_OK(s.be->ops->graph_begin(s.be, &g));
	NN_OK(g_step(&s));
	CHECK_EQ(s.be->ops->sync(s.be), GF_EUNSUPPORTED);
	CHECK(strstr(gf_errmsg(), "graph_begin and graph_end") != NULL);
	float v;
	gf_loss_desc d = { GF_LOSS_BCE, B, 1, 1.0f, 1.0f };
	CHECK_EQ(s.be->ops->loss(s.be, &v, s.dp, s.dp, NULL, NULL, &d), GF_EUNSUPPORTED);
	CHECK(s.be->ops->graph_end(s.be, g) != 0);
	/* the spoiled graph cannot be replayed; destroying it is fine, and the
	 * backend works eagerly and captures again afterwards */
	CHECK_EQ(s.be->ops->graph_begin(s.be, &g), GF_EPARAM);
	s.be->ops->graph_destroy(s.be, g);
	g = NULL;
	iterate(&s, EAGER, NULL, NULL);
	iterate(&s, ONE_GRAPH, &g, NULL);
	iterate(&s, ONE_GRAPH, &g, NULL);
	s.be->ops->graph_destroy(s.be, g);
	gan_close(&s);
	checks_done();
}

/* The ema op (g_step's moving average): the CPU backend's bits eagerly,
 * the same as scale then axpy; in a captured step its decay is a per-step
 * scalar, so replays with other decays (StyleGAN2's ramp) give each
 * step's CPU result, where scale + axpy carry the captured decay in their
 * signature and a replay with another one is refused. */
static void test_ema(void **state)
{
	(void)state;
	const size_t n = 100003;   /* not a multiple of a block */
	gf_backend *cpu = cpu_open(), *be = cuda_open(GF_PREC_FP32, GF_LAYOUT_AUTO);
	CHECK(GF_BACKEND_HAS(be, ema));
	float *avg = host_rand(n, 1, -2, 2), *w = host_rand(n, 2, -2, 2);
	float *avg_c = dev_from(cpu, avg, n), *w_c = dev_from(cpu, w, n);
	float *avg_g = dev_from(be, avg, n), *w_g = dev_from(be, w, n), *ref_g = dev_from(be, avg, n);
	/* eagerly: the CPU's bits, and scale + axpy's on the device */
	NN_OK(cpu->ops->ema(cpu, avg_c, w_c, n, 0.9f));
	NN_OK(be->ops->ema(be, avg_g, w_g, n, 0.9f));
	NN_OK(be->ops->scale(be, ref_g, n, 0.9f));
	NN_OK(be->ops->axpy(be, ref_g, w_g, n, 1.0f - 0.9f));
	CHECK(dev_equal("ema eager", be, avg_g, avg_c, n));
	float *ref = host_from(be, ref_g, n);
	CHECK(dev_equal("ema eager against scale + axpy", be, avg_g, ref, n));
	free(ref);
	/* captured at one decay, replayed at others (the ramp's, and 0: a copy) */
	const float decays[] = { 0.5f, 0.8408964f, 0.99654f, 0.0f, 0.999f };
	gf_graph *g = NULL;
	for (int i = 0; i < 5; i++) {
		NN_OK(be->ops->graph_begin(be, &g));
		NN_OK(be->ops->ema(be, avg_g, w_g, n, decays[i]));
		NN_OK(be->ops->graph_end(be, g));
		NN_OK(be->ops->sync(be));
		NN_OK(cpu->ops->ema(cpu, avg_c, w_c, n, decays[i]));
		char what[64];
		snprintf(what, sizeof(what), "ema replay %d (decay %g)", i, (double)decays[i]);
		CHECK(dev_equal(what, be, avg_g, avg_c, n));
	}
	gf_backend_stats st;
	NN_OK(be->ops->stats(be, &st));
	CHECK_EQ(st.replays, 4);
	be->ops->graph_destroy(be, g);
	/* what the trainer did before: the decay in the signature */
	g = NULL;
	for (int i = 0; i < 2; i++) {
		NN_OK(be->ops->graph_begin(be, &g));
		NN_OK(be->ops->scale(be, ref_g, n, decays[i]));
		NN_OK(be->ops->axpy(be, ref_g, w_g, n, 1.0f - decays[i]));
		int rc = be->ops->graph_end(be, g);
		CHECK_EQ(rc, i == 0 ? 0 : GF_EPARAM);
	}
	be->ops->graph_destroy(be, g);
	be->ops->free(be, avg_g);
	be->ops->free(be, w_g);
	be->ops->free(be, ref_g);
	cpu->ops->free(cpu, avg_c);
	cpu->ops->free(cpu, w_c);
	free(avg);
	free(w);
	gf_backend_close(be);
	gf_backend_close(cpu);
	checks_done();
}

int main(void)
{
	cuda_require_device("test_cuda_graph");
	const struct CMUnitTest tests[] = {
		CHECKED_TEST(test_replay_equals_eager),
		CHECKED_TEST(test_mismatch),
		CHECKED_TEST(test_refused),
		CHECKED_TEST(test_ema),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
