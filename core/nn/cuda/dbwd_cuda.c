/* CUDA double-backward ops and the minibatch standard deviation (the
 * vtable side; kernels in dbwd.cu). The CPU versions are
 * core/nn/cpu/dbwd_cpu.c. Every op records its signature (graph capture)
 * and launches on the instance's stream. */
#include <ganflow/err.h>

#include "dbwd.h"

int gf_cu_act_backward2(gf_backend *be, float *dx, const float *t, const float *dy, const float *y, size_t n,
                        gf_act act, float param)
{
	(void)param;
	gf_cuda *cu = gf_cu(be);
	TRY(gf_cu_enter(cu));
	int rc = GF_CU_SIG(cu, GF_CU_OP_ACT_BWD2, GF_CU_P(dx), GF_CU_P(t), GF_CU_P(dy), GF_CU_P(y), (uint64_t)n,
	                   (uint64_t)act);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_act_bwd2_launch(cu->stream, dx, t, dy, y, n, (int)act));
	return 0;
}

int gf_cu_bn_backward2(gf_backend *be, float *ty, float *dx, float *dgamma, const float *t, const float *dy,
                       const float *y, const float *x, const float *gamma, const float *mean, const float *rstd,
                       const gf_bn_desc *d, int accumulate)
{
	gf_cuda *cu = gf_cu(be);
	if (d->dtype != GF_F32 || d->layout != GF_NCHW)
		return gf_seterr(GF_EUNSUPPORTED, "cuda batchnorm double backward: only f32 NCHW");
	if (d->act != GF_ACT_NONE && d->act != GF_ACT_RELU && d->act != GF_ACT_LRELU)
		return gf_seterr(GF_EUNSUPPORTED, "cuda batchnorm double backward: fused activation %d", (int)d->act);
	if (d->act != GF_ACT_NONE && !y)
		return gf_seterr(GF_EPARAM, "batchnorm double backward: the fused activation needs the output");
	int act = d->act == GF_ACT_NONE ? 0 : d->act == GF_ACT_RELU ? 1 : 2;
	TRY(gf_cu_enter(cu));
	int rc = GF_CU_SIG(cu, GF_CU_OP_BN_BWD2, GF_CU_P(ty), GF_CU_P(dx), GF_CU_P(dgamma), GF_CU_P(t), GF_CU_P(dy),
	                   GF_CU_P(y), GF_CU_P(x), GF_CU_P(gamma), GF_CU_P(mean), GF_CU_P(rstd), (uint64_t)d->n,
	                   (uint64_t)d->c, (uint64_t)d->hw, (uint64_t)act, gf_cu_fbits(d->slope), (uint64_t)accumulate);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_bn_bwd2_launch(cu->stream, ty, dx, dgamma, t, dy, act ? y : x, x, gamma, mean, rstd, d->n, d->c,
	                               d->hw, act, d->slope, accumulate));
	return 0;
}

int gf_cu_pooling_gather(gf_backend *be, float *y, const float *x, const int32_t *idx, const gf_pooling_desc *d)
{
	gf_cuda *cu = gf_cu(be);
	if (!idx)
		return gf_seterr(GF_EPARAM, "max pooling gather: no index buffer");
	TRY(gf_cu_enter(cu));
	int rc = GF_CU_SIG(cu, GF_CU_OP_POOL_GATHER, GF_CU_P(y), GF_CU_P(x), GF_CU_P(idx));
	gf_cu_sig_bytes(cu, d, sizeof(*d));
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_pool_gather_launch(cu->stream, y, x, idx, *d));
	return 0;
}

static int mbstd(gf_backend *be, int op, float *y, float *dx, const float *x, const float *dy, const float *t,
                 const gf_mbstd_desc *d)
{
	gf_cuda *cu = gf_cu(be);
	if (d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1 || d->group < 1 || d->f < 1 || d->n % d->group || d->c % d->f)
		return gf_seterr(GF_EPARAM, "minibatch stddev: batch %d is not a multiple of the group %d, or channels %d "
		                            "of the statistics channels %d",
		                 d->n, d->group, d->c, d->f);
	if (d->group > 64)
		return gf_seterr(GF_EUNSUPPORTED, "minibatch stddev: group %d > 64", d->group);
	TRY(gf_cu_enter(cu));
	int rc = GF_CU_SIG(cu, GF_CU_OP_MBSTD, (uint64_t)op, GF_CU_P(y), GF_CU_P(dx), GF_CU_P(x), GF_CU_P(dy), GF_CU_P(t),
	                   (uint64_t)d->n, (uint64_t)d->c, (uint64_t)d->h, (uint64_t)d->w, (uint64_t)d->group,
	                   (uint64_t)d->f, gf_cu_fbits(d->eps));
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_mbstd_launch(cu->stream, op, y, dx, x, dy, t, *d));
	return 0;
}

int gf_cu_mbstd_forward(gf_backend *be, float *y, const float *x, const gf_mbstd_desc *d)
{
	return mbstd(be, 0, y, NULL, x, NULL, NULL, d);
}

int gf_cu_mbstd_backward(gf_backend *be, float *dx, const float *dy, const float *x, const gf_mbstd_desc *d)
{
	return mbstd(be, 1, NULL, dx, x, dy, NULL, d);
}

int gf_cu_mbstd_backward2(gf_backend *be, float *ty, float *dx, const float *t, const float *dy, const float *x,
                          const gf_mbstd_desc *d)
{
	return mbstd(be, 2, ty, dx, x, dy, t, d);
}
