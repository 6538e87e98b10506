/* CUDA StyleGAN2 ops (the vtable side; kernels in sg2.cu): bias +
 * activation with gain and clamping, and the demodulation's reciprocal
 * square root. The CPU versions are core/nn/cpu/sg2_cpu.c. Every op
 * records its signature (graph capture) and launches on the instance's
 * stream. */
#include <ganflow/err.h>

#include "sg2.h"

static int ba_check(const gf_bias_act_desc *d, const char *what)
{
	if (d->n < 0 || d->c < 0 || d->hw < 0)
		return gf_seterr(GF_EPARAM, "%s: negative size (%d, %d, %d)", what, d->n, d->c, d->hw);
	if (d->act != GF_ACT_NONE && d->act != GF_ACT_RELU && d->act != GF_ACT_LRELU)
		return gf_seterr(GF_EUNSUPPORTED, "%s: activation %d (none, relu and lrelu are)", what, (int)d->act);
	return 0;
}

int gf_cu_bias_act_forward(gf_backend *be, float *y, const float *x, const float *b, const gf_bias_act_desc *d)
{
	gf_cuda *cu = gf_cu(be);
	TRY(ba_check(d, "cuda bias_act_forward"));
	TRY(gf_cu_enter(cu));
	int rc = GF_CU_SIG(cu, GF_CU_OP_BIAS_ACT_FWD, GF_CU_P(y), GF_CU_P(x), GF_CU_P(b));
	gf_cu_sig_bytes(cu, d, sizeof(*d));
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_bias_act_fwd_launch(cu->stream, y, x, b, *d));
	return 0;
}

int gf_cu_bias_act_backward(gf_backend *be, float *dx, const float *dy, const float *y, const gf_bias_act_desc *d)
{
	gf_cuda *cu = gf_cu(be);
	TRY(ba_check(d, "cuda bias_act_backward"));
	TRY(gf_cu_enter(cu));
	int rc = GF_CU_SIG(cu, GF_CU_OP_BIAS_ACT_BWD, GF_CU_P(dx), GF_CU_P(dy), GF_CU_P(y));
	gf_cu_sig_bytes(cu, d, sizeof(*d));
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_bias_act_bwd_launch(cu->stream, dx, dy, y, *d));
	return 0;
}

int gf_cu_rsqrt_eps(gf_backend *be, float *y, const float *x, size_t n, float eps)
{
	gf_cuda *cu = gf_cu(be);
	TRY(gf_cu_enter(cu));
	int rc = GF_CU_SIG(cu, GF_CU_OP_RSQRT_EPS, GF_CU_P(y), GF_CU_P(x), (uint64_t)n, gf_cu_fbits(eps));
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_rsqrt_eps_launch(cu->stream, y, x, n, eps));
	return 0;
}
