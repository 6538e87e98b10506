/* CUDA DiffAugment (the vtable side; kernels in augment.cu). The CPU
 * version is core/nn/cpu/augment_cpu.c. Parameters stay on the device, so
 * a captured step may contain it. augment_linear (the map without its
 * brightness shift) is the double backward's. */
#include <ganflow/err.h>

#include "dbwd.h"

static int check(int n, int c, int h, int w)
{
	if (n < 1 || c < 1 || h < 1 || w < 1)
		return gf_seterr(GF_EPARAM, "augment: empty tensor (%d, %d, %d, %d)", n, c, h, w);
	return 0;
}

int gf_cu_augment_forward(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int h, int w,
                          unsigned what)
{
	gf_cuda *cu = gf_cu(be);
	TRY(check(n, c, h, w));
	TRY(gf_cu_enter(cu));
	int rc = GF_CU_SIG(cu, GF_CU_OP_AUG_FWD, GF_CU_P(y), GF_CU_P(x), GF_CU_P(u), (uint64_t)n, (uint64_t)c,
	                   (uint64_t)h, (uint64_t)w, (uint64_t)what);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_aug_fwd_launch(cu->stream, y, x, u, n, c, h, w, what));
	return 0;
}

int gf_cu_augment_linear(gf_backend *be, float *y, const float *x, const float *u, int n, int c, int h, int w,
                         unsigned what)
{
	gf_cuda *cu = gf_cu(be);
	TRY(check(n, c, h, w));
	TRY(gf_cu_enter(cu));
	int rc = GF_CU_SIG(cu, GF_CU_OP_AUG_LIN, GF_CU_P(y), GF_CU_P(x), GF_CU_P(u), (uint64_t)n, (uint64_t)c,
	                   (uint64_t)h, (uint64_t)w, (uint64_t)what);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_aug_lin_launch(cu->stream, y, x, u, n, c, h, w, what));
	return 0;
}

int gf_cu_augment_backward(gf_backend *be, float *dx, const float *dy, const float *u, int n, int c, int h, int w,
                           unsigned what)
{
	gf_cuda *cu = gf_cu(be);
	TRY(check(n, c, h, w));
	TRY(gf_cu_enter(cu));
	int rc = GF_CU_SIG(cu, GF_CU_OP_AUG_BWD, GF_CU_P(dx), GF_CU_P(dy), GF_CU_P(u), (uint64_t)n, (uint64_t)c,
	                   (uint64_t)h, (uint64_t)w, (uint64_t)what);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_aug_bwd_launch(cu->stream, dx, dy, u, n, c, h, w, what));
	return 0;
}
