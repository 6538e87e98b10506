/* LeCam regularisation of D (Tseng et al. 2021): see gf_lecam in
 * <ganflow/train.h>. Host arithmetic on D's outputs, which d_step copies to
 * the host for it (a batch of D outputs is small; on a GPU that wait makes
 * a LeCam step run eagerly, docs/cuda.md). */
#include <ganflow/train.h>

double gf_lecam_grad(const gf_lecam *l, const float *out, size_t n, int fake, float scale, float *grad)
{
	if (!l->set || n == 0) {
		for (size_t i = 0; i < n; i++)
			grad[i] = 0.0f;
		return 0.0;
	}
	double sum = 0, c = 2.0 * l->lambda * scale / (double)n;
	for (size_t i = 0; i < n; i++) {
		/* real outputs above the fake average, fake ones below the real average */
		double r = fake ? l->ema[0] - out[i] : out[i] - l->ema[1];
		r = r > 0 ? r : 0;
		sum += r * r;
		grad[i] = (float)(fake ? -c * r : c * r);
	}
	return l->lambda * scale * sum / (double)n;
}

void gf_lecam_average(gf_lecam *l, double real, double fake)
{
	double d = l->set ? l->decay : 0.0;
	l->ema[0] = d * l->ema[0] + (1 - d) * real;
	l->ema[1] = d * l->ema[1] + (1 - d) * fake;
	l->set = 1;
}
