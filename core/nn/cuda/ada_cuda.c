/* CUDA StyleGAN2-ADA augmentation (the vtable side; kernels in ada.cu).
 * The CPU version is core/nn/cpu/ada_cpu.c. p, the uniforms and the
 * transforms stay on the device, so a captured step may contain the ops
 * and sees the p that d_step last wrote when it replays. */
#include <ganflow/err.h>

#include "ada.h"

static int check(const char *op, int n, int c, int h, int w)
{
	if (n < 1 || c < 1 || h < 1 || w < 1)
		return gf_seterr(GF_EPARAM, "%s: empty tensor (%d, %d, %d, %d)", op, n, c, h, w);
	if (h < 2 || w < 2)
		return gf_seterr(GF_EPARAM, "%s: images of %dx%d: reflection needs 2 pixels or more per side", op, h, w);
	return 0;
}

int gf_cu_ada_params(gf_backend *be, float *m, const float *u, const float *p, int n, int c, int h, int w,
                     unsigned what)
{
	gf_cuda *cu = gf_cu(be);
	TRY(check("ada_params", n, c, h, w));
	if ((what & GF_ADA_COLOR) && c != 1 && c != 3)
		return gf_seterr(GF_EPARAM, "ada_params: colour transforms need 1 or 3 channels, not %d", c);
	TRY(gf_cu_enter(cu));
	int rc = GF_CU_SIG(cu, GF_CU_OP_ADA_PARAMS, GF_CU_P(m), GF_CU_P(u), GF_CU_P(p), (uint64_t)n, (uint64_t)c,
	                   (uint64_t)h, (uint64_t)w, (uint64_t)what);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_ada_params_launch(cu->stream, m, u, p, n, c, h, w, what));
	return 0;
}

int gf_cu_ada_forward(gf_backend *be, float *y, const float *x, const float *m, int n, int c, int h, int w,
                      int affine)
{
	gf_cuda *cu = gf_cu(be);
	TRY(check("ada_forward", n, c, h, w));
	TRY(gf_cu_enter(cu));
	int rc = GF_CU_SIG(cu, GF_CU_OP_ADA_FWD, GF_CU_P(y), GF_CU_P(x), GF_CU_P(m), (uint64_t)n, (uint64_t)c,
	                   (uint64_t)h, (uint64_t)w, (uint64_t)affine);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_ada_fwd_launch(cu->stream, y, x, m, n, c, h, w, affine));
	return 0;
}

int gf_cu_ada_backward(gf_backend *be, float *dx, const float *dy, const float *m, int n, int c, int h, int w)
{
	gf_cuda *cu = gf_cu(be);
	TRY(check("ada_backward", n, c, h, w));
	TRY(gf_cu_enter(cu));
	int rc = GF_CU_SIG(cu, GF_CU_OP_ADA_BWD, GF_CU_P(dx), GF_CU_P(dy), GF_CU_P(m), (uint64_t)n, (uint64_t)c,
	                   (uint64_t)h, (uint64_t)w);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_ada_bwd_launch(cu->stream, dx, dy, m, n, c, h, w));
	return 0;
}
