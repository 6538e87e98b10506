/* bench_r1: the D step with and without the R1 penalty on the CPU backend,
 * as d_step runs them (stages/d_step): a real half-step (forward, loss,
 * backward), a fake half-step, an Adam update.
 *
 *   plain  the step without a penalty
 *   r1     R1 in the step (r1_every = 1): after the real forward, the
 *          backward of sum D(x) for g, the double backward of gamma/2
 *          E|g|^2 with the real loss's gradient walked in the same pass
 *   reg    the lazy R1 step of r1_every = k (StyleGAN2): a forward of the
 *          real batch, g, the double backward of the penalty times k, an
 *          Adam update
 *
 * for the DC-GAN D (BCE, batch norm, dropout, the pipelines' D) and the
 * SNGAN D (ch = 32, hinge, spectral norm) at 32x32x1. Prints one line per
 * network, milliseconds per step (best of `repeat` runs of `iters`):
 *   ganflow net=dcgan plain_ms=1.23 r1_ms=2.34 reg_ms=1.11
 * Arguments: net=dcgan|sngan|both, batch=, threads=, iters=, repeat=,
 * gamma=. tests/bench/r1.sh runs it beside the PyTorch peer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/lua.h>
#include <ganflow/nn.h>
#include <ganflow/train.h>

#include "bench_util.h"

#define CHECK(call)                                                                         \
	do {                                                                                \
		int rc_ = (call);                                                           \
		if (rc_) {                                                                  \
			fprintf(stderr, "%s: %s: %s\n", #call, gf_strerror(rc_), gf_errmsg()); \
			exit(1);                                                            \
		}                                                                           \
	} while (0)

struct bench {
	gf_backend *be;
	gf_net *d;
	gf_optim *opt;
	gf_penalty *pen;
	gf_loss_kind loss;
	float fake_target, gamma;
	int every;
	gf_tensor real, fake;
	float *dpred;
};

static void half(struct bench *b, const gf_tensor *x, float target, unsigned flags)
{
	gf_tensor out;
	CHECK(gf_net_forward(b->d, x, NULL, GF_TRAIN));
	CHECK(gf_net_output(b->d, &out));
	CHECK(gf_loss(b->be, b->loss, NULL, b->dpred, &out, NULL, target, 0.5f));
	CHECK(gf_net_backward(b->d, b->dpred, GF_NEED_DW | flags));
}

static void plain_step(struct bench *b)
{
	half(b, &b->real, 1.0f, 0);
	half(b, &b->fake, b->fake_target, GF_ACCUMULATE);
	CHECK(gf_optim_step(b->opt));
}

static void r1_step(struct bench *b)
{
	gf_tensor out;
	gf_penalty_desc d = { .distance = GF_PENALTY_SQUARE, .weight = b->gamma, .scale = 0.5 };
	CHECK(gf_net_forward(b->d, &b->real, NULL, GF_TRAIN));
	CHECK(gf_net_output(b->d, &out));
	CHECK(gf_loss(b->be, b->loss, NULL, b->dpred, &out, NULL, 1.0f, 0.5f));
	CHECK(gf_penalty_lengths(b->pen, NULL));
	CHECK(gf_penalty_apply(b->pen, &d, NULL, NULL, b->dpred, GF_NEED_DW));
	half(b, &b->fake, b->fake_target, GF_ACCUMULATE);
	CHECK(gf_optim_step(b->opt));
}

static void reg_step(struct bench *b)
{
	gf_penalty_desc d = { .distance = GF_PENALTY_SQUARE, .weight = b->gamma, .scale = 0.5 * b->every };
	CHECK(gf_net_forward(b->d, &b->real, NULL, GF_TRAIN));
	CHECK(gf_penalty_lengths(b->pen, NULL));
	CHECK(gf_penalty_apply(b->pen, &d, NULL, NULL, NULL, GF_NEED_DW));
	CHECK(gf_optim_step(b->opt));
}

/* Each kind of step is timed from the same network and a fresh optimiser:
 * a run of lazy R1 steps alone drives D's input gradient towards 0, and
 * tiny gradients slow the CPU down (subnormal floats), which training,
 * where the lazy step is one step in 16, never sees. */
static double timed(struct bench *b, void (*step)(struct bench *), int iters, int repeat, const float *p0,
                    const float *b0, const gf_optim_conf *oc)
{
	double best = 1e30;
	CHECK(gf_net_write(b->d, GF_PARAMS, p0));
	CHECK(gf_net_write(b->d, GF_BUFFERS, b0));
	gf_optim_destroy(b->opt);
	CHECK(gf_optim_create(&b->opt, b->d, oc));
	for (int rep = 0; rep < repeat + 1; rep++) {
		double t0 = bench_now();
		for (int i = 0; i < iters; i++)
			step(b);
		double ms = (bench_now() - t0) * 1e3 / iters;
		if (rep && ms < best) /* the first run warms up */
			best = ms;
	}
	return best;
}

static void run(const char *name, gf_backend *be, int batch, int iters, int repeat, float gamma, int every)
{
	static const char *const tables[][2] = {
		{ "dcgan", "return require('backbones.dcgan').D{ size = 32, channels = 1 }" },
		{ "sngan", "return require('backbones.sngan').D{ size = 32, ch = 32, channels = 1 }" },
	};
	const char *code = NULL;
	for (int i = 0; i < 2; i++)
		if (!strcmp(name, tables[i][0]))
			code = tables[i][1];
	struct bench b = { .be = be, .gamma = gamma, .every = every };
	gf_value t;
	CHECK(gf_lua_eval(code, &t));
	CHECK(gf_net_create(&b.d, be, &t, &(gf_net_opts){ .max_batch = batch }));
	gf_value_free(&t);
	gf_rng init = { 1, 0, 0 };
	CHECK(gf_net_init(b.d, &init));
	gf_optim_conf oc;
	gf_optim_defaults(&oc, GF_OPT_ADAM);
	oc.lr = 2e-4f;
	oc.beta1 = 0.5f;
	CHECK(gf_optim_create(&b.opt, b.d, &oc));
	CHECK(gf_penalty_create(&b.pen, b.d, batch));
	int dc = !strcmp(name, "dcgan");
	b.loss = dc ? GF_LOSS_BCE : GF_LOSS_HINGE_D;
	b.fake_target = dc ? 0.0f : -1.0f;
	size_t nx = (size_t)batch * 32 * 32;
	float *xr = malloc(nx * sizeof(float)), *xf = malloc(nx * sizeof(float));
	gf_rng_uniform(&init, xr, nx, -1.0f, 1.0f);
	gf_rng_uniform(&init, xf, nx, -1.0f, 1.0f);
	b.real = gf_tensor_make(xr, GF_F32, 4, (int64_t[]){ batch, 1, 32, 32 });
	b.fake = gf_tensor_make(xf, GF_F32, 4, (int64_t[]){ batch, 1, 32, 32 });
	CHECK(be->ops->alloc(be, (void **)&b.dpred, (size_t)batch * sizeof(float)));
	size_t np, nb;
	gf_net_block(b.d, GF_PARAMS, &np);
	gf_net_block(b.d, GF_BUFFERS, &nb);
	float *p0 = malloc((np ? np : 1) * sizeof(float)), *b0 = malloc((nb ? nb : 1) * sizeof(float));
	CHECK(gf_net_read(b.d, GF_PARAMS, p0));
	CHECK(gf_net_read(b.d, GF_BUFFERS, b0));
	double plain = timed(&b, plain_step, iters, repeat, p0, b0, &oc);
	double r1 = timed(&b, r1_step, iters, repeat, p0, b0, &oc);
	double reg = timed(&b, reg_step, iters, repeat, p0, b0, &oc);
	free(p0);
	free(b0);
	printf("ganflow net=%s plain_ms=%.3f r1_ms=%.3f reg_ms=%.3f\n", name, plain, r1, reg);
	fflush(stdout);
	be->ops->free(be, b.dpred);
	free(xr);
	free(xf);
	gf_penalty_destroy(b.pen);
	gf_optim_destroy(b.opt);
	gf_net_destroy(b.d);
}

int main(int argc, char **argv)
{
	int batch = 64, threads = 2, iters = 10, repeat = 5, every = 16;
	float gamma = 10.0f;
	const char *net = "both", *v;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (bench_arg(a, "net", &v))
			net = v;
		else if (bench_arg(a, "batch", &v))
			batch = atoi(v);
		else if (bench_arg(a, "threads", &v))
			threads = atoi(v);
		else if (bench_arg(a, "iters", &v))
			iters = atoi(v);
		else if (bench_arg(a, "repeat", &v))
			repeat = atoi(v);
		else if (bench_arg(a, "every", &v))
			every = atoi(v);
		else if (bench_arg(a, "gamma", &v))
			gamma = (float)atof(v);
		else {
			fprintf(stderr, "bench_r1: unknown argument '%s'\n", a);
			return 2;
		}
	}
	if (strcmp(net, "both") && strcmp(net, "dcgan") && strcmp(net, "sngan")) {
		fprintf(stderr, "bench_r1: net must be dcgan, sngan or both, got '%s'\n", net);
		return 2;
	}
	gf_backend *be;
	CHECK(gf_backend_open("cpu", &(gf_backend_opts){ .threads = threads }, &be));
	if (strcmp(net, "sngan"))
		run("dcgan", be, batch, iters, repeat, gamma, every);
	if (strcmp(net, "dcgan"))
		run("sngan", be, batch, iters, repeat, gamma, every);
	gf_backend_close(be);
	return 0;
}
