/* The FID Inception's input pipeline (gf_fid_resize, <ganflow/evaluate.h>):
 * pytorch-fid's resize_input, F.interpolate(x, (299, 299), mode =
 * "bilinear", align_corners = False) without antialiasing, then the affine
 * map to [-1, 1]; grey images are repeated to three channels first, as
 * PIL's convert("RGB") does. Source coordinates follow PyTorch's
 * area_pixel_compute_source_index: s = (d + 0.5) * in / out - 0.5,
 * clamped at 0, the scale computed in float as PyTorch does for f32. */
#include <errno.h>
#include <stdlib.h>

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
