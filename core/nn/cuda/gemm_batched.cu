// The batch sum of gemm_batched (gemm_batched_cuda.c): C = beta C + the
// sum of batch products, each element in batch order by one thread.
#include "cuda.h"

static __global__ void batch_sum_kernel(float *c, int ldc, const float *s, int m, int n, int batch, float beta)
{
	size_t total = (size_t)m * n;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		size_t r = i / n, j = i - r * n;
		float *cr = c + r * (size_t)ldc + j;
		float acc = beta == 0.0f ? 0.0f : beta * *cr;
		for (int b = 0; b < batch; b++)
			acc += s[(size_t)b * total + i];
		*cr = acc;
	}
}

extern "C" cudaError_t gf_cu_batch_sum_launch(cudaStream_t s, float *c, int ldc, const float *part, int m, int n,
                                              int batch, float beta)
{
	size_t total = (size_t)m * n;
	if (!total)
		return cudaSuccess;
	size_t blocks = (total + 255) / 256;
	batch_sum_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, 0, s>>>(c, ldc, part, m, n, batch, beta);
	return cudaGetLastError();
}
