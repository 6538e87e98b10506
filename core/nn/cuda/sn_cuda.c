/* CUDA spectral normalisation (the vtable side; kernels in sn.cu): one
 * power iteration, sigma and w / sigma, and the weight gradient through
 * sigma. The CPU version is core/nn/cpu/sn_cpu.c. Everything stays on the
 * device (sigma too), so a captured step may contain it. */
#include <errno.h>

#include <ganflow/err.h>

#include "cuda.h"

static int check(int a, int m, int k)
{
	if (a < 1 || m < 1 || k < 1)
		return gf_seterr(GF_EPARAM, "spectral norm: empty weight (%d, %d, %d)", a, m, k);
	return 0;
}

int gf_cu_sn_forward(gf_backend *be, float *w_sn, float *sigma, float *u, float *v, const float *w, int a, int m,
                     int k, float eps, int iterate)
{
	gf_cuda *c = gf_cu(be);
	TRY(check(a, m, k));
	TRY(gf_cu_enter(c));
	int rc = GF_CU_SIG(c, GF_CU_OP_SN_FWD, GF_CU_P(w_sn), GF_CU_P(sigma), GF_CU_P(u), GF_CU_P(v), GF_CU_P(w),
	                   (uint64_t)a, (uint64_t)m, (uint64_t)k, gf_cu_fbits(eps), (uint64_t)iterate);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	size_t n = (size_t)a * (size_t)k;
	double *t = gf_cu_scratch(c, (n > (size_t)m ? n : (size_t)m) * sizeof(double));
	if (!t)
		return -ENOMEM;
	CU_LAUNCH(gf_cu_sn_fwd_launch(c->stream, w_sn, sigma, u, v, w, t, a, m, k, eps, iterate));
	return 0;
}

int gf_cu_sn_backward(gf_backend *be, float *dw, const float *g, const float *w, const float *sigma, const float *u,
                      const float *v, int a, int m, int k, int accumulate)
{
	gf_cuda *c = gf_cu(be);
	TRY(check(a, m, k));
	TRY(gf_cu_enter(c));
	int rc = GF_CU_SIG(c, GF_CU_OP_SN_BWD, GF_CU_P(dw), GF_CU_P(g), GF_CU_P(w), GF_CU_P(sigma), GF_CU_P(u),
	                   GF_CU_P(v), (uint64_t)a, (uint64_t)m, (uint64_t)k, (uint64_t)accumulate);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	CU_LAUNCH(gf_cu_sn_bwd_launch(c->stream, dw, g, w, sigma, u, v, a, m, k, accumulate));
	return 0;
}
