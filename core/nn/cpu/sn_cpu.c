/* Spectral normalisation on the CPU (torch.nn.utils.spectral_norm's
 * arithmetic): one power iteration, sigma and w / sigma, and the weight
 * gradient through sigma. The CUDA version is core/nn/cuda/sn.cu.
 *
 * The weight w (a, m, k) is the matrix W (m, a*k), W[r][i*k + s] =
 * w[i][r][s] (a = 1 except for a transposed conv, which PyTorch normalises
 * along dim 1). These are passes over one weight tensor, small next to the
 * layer's GEMMs or convolutions, so they run in one thread; sums are in
 * double in a fixed order. */
#include <errno.h>
#include <math.h>

#include <ganflow/err.h>

#include "cpu.h"

static int check(int a, int m, int k)
{
	if (a < 1 || m < 1 || k < 1)
		return gf_seterr(GF_EPARAM, "spectral norm: empty weight (%d, %d, %d)", a, m, k);
	return 0;
}

int gf_cpu_sn_forward(gf_backend *be, float *w_sn, float *sigma, float *u, float *v, const float *w, int a,
                      int m, int k, float eps, int iterate)
{
	int rc = check(a, m, k);
	if (rc)
		return rc;
	size_t n = (size_t)a * (size_t)k, rows = (size_t)m;
	double *t = (double *)(void *)gf_cpu_scratch(gf_cpu_of(be), 2 * (n > rows ? n : rows));
	if (!t)
		return -ENOMEM;
	if (iterate) {
		/* v = W^T u / max(|W^T u|, eps) */
		for (size_t j = 0; j < n; j++)
			t[j] = 0;
		for (size_t i = 0; i < (size_t)a; i++)
			for (size_t r = 0; r < rows; r++) {
				const float *row = w + (i * rows + r) * (size_t)k;
				double ur = u[r];
				for (size_t s = 0; s < (size_t)k; s++)
					t[i * (size_t)k + s] += row[s] * ur;
			}
		double nrm = 0;
		for (size_t j = 0; j < n; j++)
			nrm += t[j] * t[j];
		float d = fmaxf((float)sqrt(nrm), eps);
		for (size_t j = 0; j < n; j++)
			v[j] = (float)t[j] / d;
	}
	/* W v, then (iterating) u = W v / max(|W v|, eps); sigma = u . W v */
	for (size_t r = 0; r < rows; r++) {
		double acc = 0;
		for (size_t i = 0; i < (size_t)a; i++) {
			const float *row = w + (i * rows + r) * (size_t)k, *vi = v + i * (size_t)k;
			for (size_t s = 0; s < (size_t)k; s++)
				acc += (double)row[s] * vi[s];
		}
		t[r] = acc;
	}
	if (iterate) {
		double nrm = 0;
		for (size_t r = 0; r < rows; r++)
			nrm += t[r] * t[r];
		float d = fmaxf((float)sqrt(nrm), eps);
		for (size_t r = 0; r < rows; r++)
			u[r] = (float)t[r] / d;
	}
	double sig = 0;
	for (size_t r = 0; r < rows; r++)
		sig += (double)u[r] * (float)t[r];
	float sf = (float)sig;
	*sigma = sf;
	for (size_t e = 0; e < n * rows; e++)
		w_sn[e] = w[e] / sf;
	return 0;
}

int gf_cpu_sn_backward(gf_backend *be, float *dw, const float *g, const float *w, const float *sigma,
                       const float *u, const float *v, int a, int m, int k, int accumulate)
{
	(void)be;
	int rc = check(a, m, k);
	if (rc)
		return rc;
	size_t rows = (size_t)m, total = (size_t)a * rows * (size_t)k;
	double gw = 0, sf = *sigma;
	for (size_t e = 0; e < total; e++)
		gw += (double)g[e] * w[e];
	/* d sigma = -sum(g * w) / sigma^2, and d sigma / dW = u v^T */
	float dsig = (float)(-gw / (sf * sf));
	for (size_t i = 0; i < (size_t)a; i++)
		for (size_t r = 0; r < rows; r++) {
			size_t at = (i * rows + r) * (size_t)k;
			float du = dsig * u[r];
			for (size_t s = 0; s < (size_t)k; s++) {
				float d = g[at + s] / *sigma + du * v[i * (size_t)k + s];
				dw[at + s] = accumulate ? dw[at + s] + d : d;
			}
		}
	return 0;
}
