/* Spectral normalisation kernels (launchers called from sn_cuda.c). The
 * CPU version is core/nn/cpu/sn_cpu.c; the formulas are its formulas, with
 * the sums in double over one block in a fixed order (a weight is small
 * next to the convolutions and GEMMs around it).
 *
 * w (a, m, k) is the matrix W (m, a*k), W[r][i*k + s] = w[i][r][s]. */
#include <math.h>

#include "kernels.cuh"

#define SN_THREADS 256

/* max(sqrt(sum of the block's q), eps), in every thread (normalize's divisor) */
static __device__ float sn_denominator(double q, float eps)
{
	__shared__ float d;
	q = gf_cu_block_sum(q);
	if (threadIdx.x == 0)
		d = fmaxf((float)sqrt(q), eps);
	__syncthreads();
	return d;
}

/* One block: [v = W^T u / |.|, u = W v / |.|], sigma = u . W v, w_sn = w / sigma.
 * t: max(m, a*k) doubles of scratch. */
static __global__ void sn_fwd_kernel(float *w_sn, float *sigma, float *u, float *v, const float *w, double *t, int a,
                                     int m, int k, float eps, int iterate)
{
	__shared__ float bc;
	size_t n = (size_t)a * (size_t)k, rows = (size_t)m, kk = (size_t)k;
	if (iterate) {
		double q = 0;
		for (size_t j = threadIdx.x; j < n; j += blockDim.x) {
			size_t i = j / kk, s = j % kk;
			double acc = 0;
			for (size_t r = 0; r < rows; r++)
				acc += (double)w[(i * rows + r) * kk + s] * (double)u[r];
			t[j] = acc;
			q += acc * acc;
		}
		float d = sn_denominator(q, eps);
		for (size_t j = threadIdx.x; j < n; j += blockDim.x)
			v[j] = (float)t[j] / d;
		__syncthreads();
	}
	double q = 0;
	for (size_t r = threadIdx.x; r < rows; r += blockDim.x) {
		double acc = 0;
		for (size_t i = 0; i < (size_t)a; i++)
			for (size_t s = 0; s < kk; s++)
				acc += (double)w[(i * rows + r) * kk + s] * (double)v[i * kk + s];
		t[r] = acc;
		q += acc * acc;
	}
	if (iterate) {
		float d = sn_denominator(q, eps);
		for (size_t r = threadIdx.x; r < rows; r += blockDim.x)
			u[r] = (float)t[r] / d;
	}
	double sg = 0;
	for (size_t r = threadIdx.x; r < rows; r += blockDim.x)
		sg += (double)u[r] * (double)(float)t[r];
	sg = gf_cu_block_sum(sg);
	if (threadIdx.x == 0) {
		*sigma = (float)sg;
		bc = (float)sg;
	}
	__syncthreads();
	for (size_t e = threadIdx.x; e < n * rows; e += blockDim.x)
		w_sn[e] = w[e] / bc;
}

/* One block: dw (+)= g / sigma + (-sum(g * w) / sigma^2) u v^T. */
static __global__ void sn_bwd_kernel(float *dw, const float *g, const float *w, const float *sigma, const float *u,
                                     const float *v, int a, int m, int k, int acc)
{
	__shared__ float dsig;
	size_t rows = (size_t)m, kk = (size_t)k, total = (size_t)a * rows * kk;
	double q = 0;
	for (size_t e = threadIdx.x; e < total; e += blockDim.x)
		q += (double)g[e] * (double)w[e];
	q = gf_cu_block_sum(q);
	double sf = *sigma;
	if (threadIdx.x == 0)
		dsig = (float)(-q / (sf * sf));
	__syncthreads();
	float sg = *sigma;
	for (size_t e = threadIdx.x; e < total; e += blockDim.x) {
		size_t i = e / (rows * kk), r = (e / kk) % rows, s = e % kk;
		float du = dsig * u[r];
		float d = g[e] / sg + du * v[i * kk + s];
		dw[e] = acc ? dw[e] + d : d;
	}
}

extern "C" cudaError_t gf_cu_sn_fwd_launch(cudaStream_t s, float *w_sn, float *sigma, float *u, float *v,
                                           const float *w, double *t, int a, int m, int k, float eps, int iterate)
{
	sn_fwd_kernel<<<1, SN_THREADS, 0, s>>>(w_sn, sigma, u, v, w, t, a, m, k, eps, iterate);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_sn_bwd_launch(cudaStream_t s, float *dw, const float *g, const float *w,
                                           const float *sigma, const float *u, const float *v, int a, int m, int k,
                                           int acc)
{
	sn_bwd_kernel<<<1, SN_THREADS, 0, s>>>(dw, g, w, sigma, u, v, a, m, k, acc);
	return cudaGetLastError();
}
