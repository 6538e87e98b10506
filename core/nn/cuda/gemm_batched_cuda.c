/* CUDA strided batched GEMM (the vtable side of gemm_batched; the batch
 * sum kernel is in gemm_batched.cu). The CPU version is
 * core/nn/cpu/gemm_batched_cpu.c.
 *
 * cuBLAS's strided batched SGEMM, row-major through the transposition
 * trick of gf_cu_gemm. Summing over the batch (stride_c = 0) writes the
 * products to scratch and adds them up in batch order with one kernel, so
 * the result does not depend on how cuBLAS schedules the batch. Always f32
 * (TF32 where the instance allows it): the attention products are small
 * next to the convolutions that bf16/fp16 are for. */
#include <errno.h>

#include <ganflow/err.h>

#include "cuda.h"

int gf_cu_gemm_batched(gf_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                       int64_t stride_a, const float *b, int ldb, int64_t stride_b, float beta, float *c_, int ldc,
                       int64_t stride_c, int batch)
{
	gf_cuda *c = gf_cu(be);
	if (m < 0 || n < 0 || k < 0 || batch < 0)
		return gf_seterr(GF_EPARAM, "gemm_batched: negative size (m %d, n %d, k %d, batch %d)", m, n, k, batch);
	if (m == 0 || n == 0 || batch == 0)
		return 0;
	if (k == 0) {
		/* C = beta C (once when summing), as the plain GEMM does it */
		int items = stride_c ? batch : 1;
		for (int i = 0; i < items; i++)
			TRY(gf_cu_gemm(be, ta, tb, m, n, 0, alpha, a, lda, b, ldb, beta, c_ + (int64_t)i * stride_c, ldc));
		return 0;
	}
	TRY(gf_cu_enter(c));
	int rc = GF_CU_SIG(c, GF_CU_OP_GEMM_BATCHED, (uint64_t)ta, (uint64_t)tb, (uint64_t)m, (uint64_t)n, (uint64_t)k,
	                   gf_cu_fbits(alpha), GF_CU_P(a), (uint64_t)lda, (uint64_t)stride_a, GF_CU_P(b), (uint64_t)ldb,
	                   (uint64_t)stride_b, gf_cu_fbits(beta), GF_CU_P(c_), (uint64_t)ldc, (uint64_t)stride_c,
	                   (uint64_t)batch);
	if (rc)
		return rc == GF_CU_SKIP ? 0 : rc;
	/* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T */
	cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	if (stride_c != 0 || batch == 1) {
		BLAS_CHECK(cublasSgemmStridedBatched(c->cublas, ob, oa, n, m, k, &alpha, b, ldb, stride_b, a, lda, stride_a,
		                                     &beta, c_, ldc, stride_c, batch));
		return 0;
	}
	/* summed: the products into scratch (batch, m, n), then C = beta C + their sum */
	float *s = gf_cu_scratch(c, (size_t)batch * m * n * sizeof(float));
	if (!s)
		return -ENOMEM;
	float zero = 0.0f;
	BLAS_CHECK(cublasSgemmStridedBatched(c->cublas, ob, oa, n, m, k, &alpha, b, ldb, stride_b, a, lda, stride_a,
	                                     &zero, s, n, (long long)m * n, batch));
	CU_LAUNCH(gf_cu_batch_sum_launch(c->stream, c_, ldc, s, m, n, batch, beta));
	return 0;
}
