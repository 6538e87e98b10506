/* The FID Inception's input pipeline (gf_fid_resize, <ganflow/evaluate.h>):
 * pytorch-fid's resize_input, F.interpolate(x, (299, 299), mode =
 * "bilinear", align_corners = False) without antialiasing, then the affine
 * map to [-1, 1]; grey images are repeated to three channels first, as
 * PIL's convert("RGB") does. Source coordinates follow PyTorch's
 * area_pixel_compute_source_index: s = (d + 0.5) * in / out - 0.5,
 * clamped at 0, the scale computed in float as PyTorch does for f32. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/evaluate.h>

/* Taps of one output coordinate: i0, i1 and the weight of i1. */
struct tap {
	int i0, i1;
	float l1;
};

static void taps(struct tap *t, int out, int in)
{
	float scale = (float)in / (float)out;
	for (int d = 0; d < out; d++) {
		float s = scale * ((float)d + 0.5f) - 0.5f;
		if (s < 0)
			s = 0;
		int i0 = (int)s;
		t[d].i0 = i0;
		t[d].i1 = i0 + 1 < in ? i0 + 1 : in - 1;
		t[d].l1 = s - (float)i0;
	}
}

int gf_fid_resize(float *dst, const float *src, int n, int c, int h, int w, int oh, int ow, float scale,
                  float shift)
{
	if (n < 0 || (c != 1 && c != 3) || h < 1 || w < 1 || oh < 1 || ow < 1 || oh > 16384 || ow > 16384)
		return gf_seterr(GF_EPARAM, "fid input: cannot resize %d images of %dx%dx%d to 3x%dx%d", n, c, h, w, oh, ow);
	struct tap *ty = malloc(((size_t)oh + (size_t)ow) * sizeof(*ty)), *tx = ty + oh;
	if (!ty)
		return -ENOMEM;
	taps(ty, oh, h);
	taps(tx, ow, w);
	for (int i = 0; i < n; i++) {
		for (int ch = 0; ch < 3; ch++) {
			const float *p = src + ((size_t)i * c + (c == 3 ? ch : 0)) * h * w;
			float *q = dst + ((size_t)i * 3 + ch) * oh * ow;
			for (int y = 0; y < oh; y++) {
				const float *r0 = p + (size_t)ty[y].i0 * w, *r1 = p + (size_t)ty[y].i1 * w;
				float ly1 = ty[y].l1, ly0 = 1.0f - ly1;
				for (int x = 0; x < ow; x++) {
					float lx1 = tx[x].l1, lx0 = 1.0f - lx1;
					float v = ly0 * (lx0 * r0[tx[x].i0] + lx1 * r0[tx[x].i1]) +
					          ly1 * (lx0 * r1[tx[x].i0] + lx1 * r1[tx[x].i1]);
					q[(size_t)y * ow + x] = v * scale + shift;
				}
			}
		}
	}
	free(ty);
	return 0;
}

/* ---- clean-fid's resize ----
 *
 * clean-fid ("clean" mode) resizes each channel as a float image with
 * PIL's Image.resize(BICUBIC) and clips to [0, 255]. PIL's resampling
 * (Resample.c) is separable, horizontal pass first, the intermediate
 * stored as float: output coordinate d of a pass covers source positions
 * around centre = (d + 0.5) * scale (scale = in / out), with the bicubic
 * kernel (a = -0.5) stretched by max(scale, 1) (antialiasing when
 * shrinking), its weights normalised to sum 1, sums in double. */

/* Taps of one pass: for each output d, first[d] and count[d] source
 * positions with weights w[d * ksize + k]. */
struct pil_taps {
	int ksize;
	int *first, *count;
	double *w;
};

static double pil_bicubic(double x)
{
	const double a = -0.5;
	x = x < 0 ? -x : x;
	if (x < 1.0)
		return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
	if (x < 2.0)
		return (((x - 5) * x + 8) * x - 4) * a;
	return 0.0;
}

static int pil_taps_make(struct pil_taps *t, int in, int out)
{
	double scale = (double)in / out, fs = scale < 1.0 ? 1.0 : scale, support = 2.0 * fs;
	t->ksize = (int)ceil(support) * 2 + 1;
	t->first = malloc(2 * (size_t)out * sizeof(int));
	t->w = malloc((size_t)out * t->ksize * sizeof(double));
	if (!t->first || !t->w) {
		free(t->first);
		free(t->w);
		return -ENOMEM;
	}
	t->count = t->first + out;
	for (int d = 0; d < out; d++) {
		double centre = (d + 0.5) * scale, sum = 0;
		int lo = (int)(centre - support + 0.5), hi = (int)(centre + support + 0.5);
		lo = lo < 0 ? 0 : lo;
		hi = hi > in ? in : hi;
		double *w = t->w + (size_t)d * t->ksize;
		for (int k = 0; k < hi - lo; k++) {
			w[k] = pil_bicubic((k + lo - centre + 0.5) / fs);
			sum += w[k];
		}
		for (int k = 0; k < hi - lo; k++)
			w[k] = sum != 0.0 ? w[k] / sum : w[k];
		t->first[d] = lo;
		t->count[d] = hi - lo;
	}
	return 0;
}

int gf_fid_resize_clean(float *dst, const float *src, int n, int c, int h, int w, int oh, int ow, float scale,
                        float shift)
{
	if (n < 0 || (c != 1 && c != 3) || h < 1 || w < 1 || oh < 1 || ow < 1 || oh > 16384 || ow > 16384)
		return gf_seterr(GF_EPARAM, "fid input: cannot resize %d images of %dx%dx%d to 3x%dx%d", n, c, h, w, oh, ow);
	struct pil_taps tx = { 0 }, ty = { 0 };
	float *mid = malloc((size_t)h * ow * sizeof(float));
	if (!mid || pil_taps_make(&tx, w, ow) || pil_taps_make(&ty, h, oh)) {
		free(mid);
		free(tx.first);
		free(tx.w);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		for (int ch = 0; ch < 3; ch++) {
			float *q = dst + ((size_t)i * 3 + ch) * oh * ow;
			if (c == 1 && ch > 0) {   /* grey: the same plane three times */
				memcpy(q, q - (size_t)oh * ow, (size_t)oh * ow * sizeof(float));
				continue;
			}
			const float *p = src + ((size_t)i * c + ch) * h * w;
			for (int y = 0; y < h; y++)
				for (int x = 0; x < ow; x++) {
					const double *k = tx.w + (size_t)x * tx.ksize;
					const float *r = p + (size_t)y * w + tx.first[x];
					double s = 0;
					for (int j = 0; j < tx.count[x]; j++)
						s += r[j] * k[j];
					mid[(size_t)y * ow + x] = (float)s;
				}
			for (int y = 0; y < oh; y++) {
				const double *k = ty.w + (size_t)y * ty.ksize;
				for (int x = 0; x < ow; x++) {
					const float *col = mid + (size_t)ty.first[y] * ow + x;
					double s = 0;
					for (int j = 0; j < ty.count[y]; j++)
						s += col[(size_t)j * ow] * k[j];
					/* clean-fid clips to [0, 255]: [-1, 1] after the map */
					float v = (float)s * scale + shift;
					q[(size_t)y * ow + x] = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
				}
			}
		}
	}
	free(mid);
	free(tx.first);
	free(tx.w);
	free(ty.first);
	free(ty.w);
	return 0;
}
