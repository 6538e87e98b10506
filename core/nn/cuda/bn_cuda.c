/* CUDA batch normalisation (the vtable side; kernels in bn.cu), 1d and 2d,
 * with ReLU/LeakyReLU fused after the affine step. PyTorch's conventions:
 * the biased variance normalises, the unbiased one enters the running
 * average. The CPU version is core/nn/cpu/bn_cpu.c.
 *
 * Batchnorm runs in f32 whatever the instance's precision: it reads and
 * writes the engine's f32 activations, and its statistics are sums that
 * half precision would spoil (the AMP rule: reductions stay in f32). */
#include <errno.h>

#include <ganflow/err.h>

#include "cuda.h"

static int check(const gf_bn_desc *d)
{
	if (d->dtype != GF_F32 || d->layout != GF_NCHW)
		return gf_seterr(GF_EUNSUPPORTED, "cuda batchnorm: the engine's tensors must be f32 NCHW");
	if (d->act != GF_ACT_NONE && d->act != GF_ACT_RELU && d->act != GF_ACT_LRELU)
		return gf_seterr(GF_EUNSUPPORTED, "cuda batchnorm: fused activation %d", (int)d->act);
	if (d->n < 1 || d->c < 1 || d->hw < 1)
		return gf_seterr(GF_EPARAM, "cuda batchnorm: empty input (%d, %d, %d)", d->n, d->c, d->hw);
	return 0;
}

static int sig_bn(gf_cuda *c, int op, const void *p0, const void *p1, const void *p2, const void *p3,
                  const void *p4, const void *p5, const void *p6, const void *p7, const void *p8,
                  const gf_bn_desc *d, int acc)
{
	int rc = GF_CU_SIG(c, op, GF_CU_P(p0), GF_CU_P(p1), GF_CU_P(p2), GF_CU_P(p3), GF_CU_P(p4), GF_CU_P(p5),
	                   GF_CU_P(p6), GF_CU_P(p7), GF_CU_P(p8), (uint64_t)acc);
	gf_cu_sig_bytes(c, d, sizeof(*d));
	return rc;
}

int gf_cu_bn_forward_train(gf_backend *be, float *y, float *mean, float *rstd, float *run_mean, float *run_var,
                           const float *x, const float *gamma, const float *beta, const gf_bn_desc *d)
{
	gf_cuda *c = gf_cu(be);
	TRY(check(d));
	if ((double)d->n * d->hw < 2 && run_var)
		return gf_seterr(GF_ESHAPE, "batchnorm: needs more than one value per channel in training, got %d",
		                 d->n * d->hw);
	TRY(gf_cu_enter(c));
	int rc = sig_bn(c, GF_CU_OP_BN_TRAIN, y, mean, rstd, run_mean, run_var, x, gamma, beta, NULL, d, 0);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	double *part = gf_cu_scratch(c, gf_cu_bn_parts(d) * sizeof(double));
	if (!part)
		return -ENOMEM;
	CU_LAUNCH(gf_cu_bn_stats_launch(c->stream, mean, rstd, run_mean, run_var, part, x, *d));
	CU_LAUNCH(gf_cu_bn_apply_launch(c->stream, y, x, mean, rstd, gamma, beta, *d, 0));
	return 0;
}

int gf_cu_bn_forward_eval(gf_backend *be, float *y, const float *x, const float *gamma, const float *beta,
                          const float *run_mean, const float *run_var, const gf_bn_desc *d)
{
	gf_cuda *c = gf_cu(be);
	TRY(check(d));
	TRY(gf_cu_enter(c));
	int rc = sig_bn(c, GF_CU_OP_BN_EVAL, y, x, gamma, beta, run_mean, run_var, NULL, NULL, NULL, d, 0);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_bn_apply_launch(c->stream, y, x, run_mean, run_var, gamma, beta, *d, 1));
	return 0;
}

int gf_cu_bn_backward(gf_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy, const float *y,
                      const float *x, const float *gamma, const float *mean, const float *rstd, const gf_bn_desc *d,
                      int accumulate)
{
	gf_cuda *c = gf_cu(be);
	TRY(check(d));
	if (d->act != GF_ACT_NONE && !y)
		return gf_seterr(GF_EPARAM, "batchnorm backward: the fused activation needs the output");
	TRY(gf_cu_enter(c));
	int rc = sig_bn(c, GF_CU_OP_BN_BWD, dx, dgamma, dbeta, dy, y, x, gamma, mean, rstd, d, accumulate);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	double *part = gf_cu_scratch(c, gf_cu_bn_parts(d) * sizeof(double));
	if (!part)
		return -ENOMEM;
	CU_LAUNCH(gf_cu_bn_bwd_launch(c->stream, dx, dgamma, dbeta, part, dy, y, x, gamma, mean, rstd, *d, accumulate));
	return 0;
}

/* ---- conditional batchnorm (layer cbn): gamma and beta per (sample, channel) ---- */

int gf_cu_cbn_forward(gf_backend *be, float *y, float *mean, float *rstd, float *run_mean, float *run_var,
                      const float *x, const float *gamma, const float *beta, const gf_bn_desc *d, int train)
{
	gf_cuda *c = gf_cu(be);
	TRY(check(d));
	if (!gamma || !beta || (!train && (!run_mean || !run_var)) || (train && (!mean || !rstd)))
		return gf_seterr(GF_EPARAM, "conditional batchnorm: missing gain, bias or statistics");
	if (train && (double)d->n * d->hw < 2 && run_var)
		return gf_seterr(GF_ESHAPE, "batchnorm: needs more than one value per channel in training, got %d",
		                 d->n * d->hw);
	TRY(gf_cu_enter(c));
	int rc = sig_bn(c, GF_CU_OP_CBN_FWD, y, mean, rstd, run_mean, run_var, x, gamma, beta, NULL, d, train);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	if (!train) {
		CU_LAUNCH(gf_cu_cbn_apply_launch(c->stream, y, x, run_mean, run_var, gamma, beta, *d, 1));
		return 0;
	}
	double *part = gf_cu_scratch(c, gf_cu_bn_parts(d) * sizeof(double));
	if (!part)
		return -ENOMEM;
	CU_LAUNCH(gf_cu_bn_stats_launch(c->stream, mean, rstd, run_mean, run_var, part, x, *d));
	CU_LAUNCH(gf_cu_cbn_apply_launch(c->stream, y, x, mean, rstd, gamma, beta, *d, 0));
	return 0;
}

int gf_cu_cbn_backward(gf_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy, const float *y,
                       const float *x, const float *gamma, const float *mean, const float *rstd, const gf_bn_desc *d)
{
	gf_cuda *c = gf_cu(be);
	TRY(check(d));
	if (d->act != GF_ACT_NONE && !y)
		return gf_seterr(GF_EPARAM, "batchnorm backward: the fused activation needs the output");
	if (!dgamma || !dbeta || !gamma)
		return gf_seterr(GF_EPARAM, "conditional batchnorm backward: needs gamma, dgamma and dbeta");
	TRY(gf_cu_enter(c));
	int rc = sig_bn(c, GF_CU_OP_CBN_BWD, dx, dgamma, dbeta, dy, y, x, gamma, mean, rstd, d, 0);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	double *part = gf_cu_scratch(c, gf_cu_cbn_parts(d) * sizeof(double));
	if (!part)
		return -ENOMEM;
	CU_LAUNCH(gf_cu_cbn_bwd_launch(c->stream, dx, dgamma, dbeta, part, dy, y, x, gamma, mean, rstd, *d));
	return 0;
}
