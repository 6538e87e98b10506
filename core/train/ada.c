/* The augmentation probability of StyleGAN2-ADA (Karras et al. 2020,
 * section 3, "adaptive discriminator augmentation"): see gf_ada in
 * <ganflow/train.h>. Host arithmetic on D's real outputs, which d_step
 * copies to the host after each real half-step when D has an ada layer
 * (so such a D steps eagerly); the layer that uses p is
 * core/nn/layers/ada.c, d_step writes p into its buffer. */
#include <math.h>
#include <string.h>

#include <ganflow/train.h>

void gf_ada_observe(gf_ada *a, const float *out, size_t n, int sigmoid)
{
	const float mid = sigmoid ? 0.5f : 0.0f;
	for (size_t i = 0; i < n; i++)
		a->signs += (out[i] > mid) - (out[i] < mid); /* torch.sign: 0 at 0 */
	a->count += (int64_t)n;
}

int gf_ada_step(gf_ada *a, int64_t images, float *p)
{
	a->images += images;
	if (++a->steps < a->interval)
		return 0;
	a->rt = a->count ? (double)a->signs / (double)a->count : 0.0;
	if (a->kimg > 0) {
		double dir = (a->rt > a->target) - (a->rt < a->target);
		double v = (double)*p + dir * (double)a->images / (a->kimg * 1000.0);
		*p = (float)(v < 0 ? 0 : v > 1 ? 1 : v);
	}
	a->signs = a->count = a->images = a->steps = 0;
	return 1;
}

void gf_ada_save(const gf_ada *a, int64_t v[5])
{
	v[0] = a->signs, v[1] = a->count, v[2] = a->images, v[3] = a->steps;
	memcpy(&v[4], &a->rt, sizeof(double));
}

void gf_ada_load(gf_ada *a, const int64_t v[5])
{
	a->signs = v[0], a->count = v[1], a->images = v[2], a->steps = v[3];
	memcpy(&a->rt, &v[4], sizeof(double));
}
