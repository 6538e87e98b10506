/* CUDA StyleGAN2 ops (the vtable side; kernels in sg2.cu): bias +
 * activation with gain and clamping, the demodulation's reciprocal square
 * root, FIR resampling and style mixing's row pick. The CPU versions are core/nn/cpu/sg2_cpu.c. Every op
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

static int fir(gf_backend *be, int backward, float *y, const float *x, const gf_fir_desc *d)
{
	gf_cuda *cu = gf_cu(be);
	if (d->n < 0 || d->h < 1 || d->w < 1 || d->hout < 1 || d->wout < 1 || d->p0 < 0)
		return gf_seterr(GF_EPARAM, "cuda fir: bad sizes (%d planes, %dx%d -> %dx%d, pad %d)", d->n, d->h, d->w, d->hout,
		                 d->wout, d->p0);
	if (d->up < 1 || d->up > 2 || d->down < 1 || d->down > 2)
		return gf_seterr(GF_EUNSUPPORTED, "cuda fir: up = %d, down = %d (1 or 2)", d->up, d->down);
	TRY(gf_cu_enter(cu));
	int rc = GF_CU_SIG(cu, backward ? GF_CU_OP_FIR_BWD : GF_CU_OP_FIR_FWD, GF_CU_P(y), GF_CU_P(x));
	gf_cu_sig_bytes(cu, d, sizeof(*d));
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_fir_launch(cu->stream, backward, y, x, *d));
	return 0;
}

int gf_cu_fir_forward(gf_backend *be, float *y, const float *x, const gf_fir_desc *d)
{
	return fir(be, 0, y, x, d);
}

int gf_cu_fir_backward(gf_backend *be, float *dx, const float *dy, const gf_fir_desc *d)
{
	return fir(be, 1, dx, dy, d);
}

int gf_cu_style_mix(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int index, int num_ws,
                    float prob, int adjoint)
{
	gf_cuda *cu = gf_cu(be);
	if (n < 0 || c < 1 || num_ws < 2 || index < 0 || index >= num_ws)
		return gf_seterr(GF_EPARAM, "cuda style_mix: bad sizes (n %d, c %d, index %d of %d)", n, c, index, num_ws);
	TRY(gf_cu_enter(cu));
	int rc = GF_CU_SIG(cu, GF_CU_OP_STYLE_MIX, GF_CU_P(y), GF_CU_P(x), GF_CU_P(u), (uint64_t)n, (uint64_t)c,
	                   (uint64_t)index, (uint64_t)num_ws, gf_cu_fbits(prob), (uint64_t)adjoint);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_style_mix_launch(cu->stream, y, x, u, n, c, index, num_ws, prob, adjoint));
	return 0;
}
