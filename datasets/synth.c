/* ImageNet-like synthetic images for streaming benchmarks.
 *
 * Photographs compress to about 4 bits per pixel at JPEG quality 90
 * because they mix smooth regions with texture at every scale. These
 * images do the same: a two-colour gradient, value noise at four scales
 * (96, 24, 6 and 3 pixels), a few soft-edged shapes with their own
 * stripes, and per-pixel grain in luma and chroma. At 500 x 375 and quality 90 (4:2:0) they encode to
 * about 100 KB. Everything is a function of (seed, index): the same
 * command makes the same bytes.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>

#include "convert.h"

/* ---- noise ---- */

static inline uint32_t hash32(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (uint32_t)x;
}

/* Uniform in [-1, 1) from a hash. */
static inline float hunit(uint64_t x)
{
	return (float)(hash32(x) >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

typedef struct lattice {
	int gw, gh, cell;
	float *v; /* (gh, gw) */
} lattice;

static int lattice_make(lattice *l, int w, int h, int cell, uint64_t key)
{
	l->cell = cell;
	l->gw = w / cell + 2;
	l->gh = h / cell + 2;
	l->v = malloc((size_t)l->gw * l->gh * sizeof(float));
	if (!l->v)
		return -ENOMEM;
	for (int i = 0; i < l->gw * l->gh; i++)
		l->v[i] = hunit(key * 1000003ull + (uint64_t)i);
	return 0;
}

static inline float smooth(float t)
{
	return t * t * (3.0f - 2.0f * t);
}

/* Value noise at (x, y), in [-1, 1]. */
static inline float lattice_at(const lattice *l, int x, int y)
{
	float fx = (float)x / l->cell, fy = (float)y / l->cell;
	int ix = (int)fx, iy = (int)fy;
	float tx = smooth(fx - ix), ty = smooth(fy - iy);
	const float *r0 = l->v + (size_t)iy * l->gw + ix, *r1 = r0 + l->gw;
	float a = r0[0] + (r0[1] - r0[0]) * tx;
	float b = r1[0] + (r1[1] - r1[0]) * tx;
	return a + (b - a) * ty;
}

/* HSV (h in [0, 1)) to RGB in [0, 255]. */
static void hsv(float h, float s, float v, float *rgb)
{
	float r, g, b, f = h * 6.0f;
	int i = (int)f % 6;
	float p = v * (1 - s), q = v * (1 - s * (f - (int)f)), t = v * (1 - s * (1 - (f - (int)f)));
	switch (i) {
	case 0: r = v, g = t, b = p; break;
	case 1: r = q, g = v, b = p; break;
	case 2: r = p, g = v, b = t; break;
	case 3: r = p, g = q, b = v; break;
	case 4: r = t, g = p, b = v; break;
	default: r = v, g = p, b = q; break;
	}
	rgb[0] = r * 255.0f;
	rgb[1] = g * 255.0f;
	rgb[2] = b * 255.0f;
}

static inline uint8_t clamp8(float v)
{
	return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)(v + 0.5f);
}

/* ---- the image ---- */

void gf_synth_image(uint8_t *pix, int w, int h, uint64_t seed, uint64_t idx, uint32_t label)
{
	uint64_t s = gf_hash3(seed, idx, 0x5eedull);
	float hue = fmodf((float)label * 0.618034f + 0.08f * hunit(s + 1), 1.0f);
	if (hue < 0)
		hue += 1.0f;
	float c0[3], c1[3];
	hsv(hue, 0.35f + 0.3f * (hunit(s + 2) + 1) / 2, 0.35f + 0.4f * (hunit(s + 3) + 1) / 2, c0);
	hsv(fmodf(hue + 0.15f + 0.1f * hunit(s + 4) + 1.0f, 1.0f), 0.3f, 0.75f, c1);
	float gx = hunit(s + 5), gy = hunit(s + 6);
	float gn = sqrtf(gx * gx + gy * gy) + 1e-3f;
	gx /= gn;
	gy /= gn;
	lattice l1 = { 0 }, l2 = { 0 }, l3 = { 0 }, l4 = { 0 }, lc = { 0 };
	if (lattice_make(&l1, w, h, 96, s + 10) || lattice_make(&l2, w, h, 24, s + 11) ||
	    lattice_make(&l3, w, h, 6, s + 12) || lattice_make(&l4, w, h, 3, s + 14) ||
	    lattice_make(&lc, w, h, 48, s + 13)) {
		/* out of memory: a plain gradient still makes a valid image */
		free(l1.v);
		free(l2.v);
		free(l3.v);
		free(l4.v);
		free(lc.v);
		memset(pix, 128, (size_t)w * h * 3);
		return;
	}
	float diag = sqrtf((float)w * w + (float)h * h);
	for (int y = 0; y < h; y++) {
		uint8_t *row = pix + (size_t)y * w * 3;
		for (int x = 0; x < w; x++) {
			float t = 0.5f + ((x - w / 2) * gx + (y - h / 2) * gy) / diag;
			uint64_t px = (uint64_t)y << 32 | (uint64_t)x;
			float lum = 40.0f * lattice_at(&l1, x, y) + 22.0f * lattice_at(&l2, x, y) +
			            26.0f * lattice_at(&l3, x, y) + 26.0f * lattice_at(&l4, x, y) + 36.0f * hunit(s ^ px);
			float ch = 18.0f * lattice_at(&lc, x, y) + 10.0f * hunit(s ^ 0x777 ^ px);
			for (int k = 0; k < 3; k++) {
				float base = c0[k] + (c1[k] - c0[k]) * t;
				float chroma = k == 0 ? ch : k == 2 ? -ch : 0.0f;
				row[3 * x + k] = clamp8(base + lum + chroma);
			}
		}
	}
	/* shapes: soft ellipses with stripes */
	int nshapes = 3 + (int)(hash32(s + 20) % 5);
	for (int i = 0; i < nshapes; i++) {
		uint64_t k = s + 100 + 16 * (uint64_t)i;
		float cx = (hunit(k) + 1) / 2 * w, cy = (hunit(k + 1) + 1) / 2 * h;
		float rx = (0.05f + 0.2f * (hunit(k + 2) + 1) / 2) * w, ry = (0.05f + 0.2f * (hunit(k + 3) + 1) / 2) * h;
		float col[3];
		hsv(fmodf(hue + 0.5f * hunit(k + 4) + 1.0f, 1.0f), 0.6f, 0.3f + 0.6f * (hunit(k + 5) + 1) / 2, col);
		float freq = 0.15f + 0.35f * (hunit(k + 6) + 1) / 2, ang = 3.14159f * hunit(k + 7);
		float fx = cosf(ang) * freq, fy = sinf(ang) * freq;
		int x0 = (int)fmaxf(0, cx - rx - 2), x1 = (int)fminf((float)w - 1, cx + rx + 2);
		int y0 = (int)fmaxf(0, cy - ry - 2), y1 = (int)fminf((float)h - 1, cy + ry + 2);
		for (int y = y0; y <= y1; y++)
			for (int x = x0; x <= x1; x++) {
				float dx = (x - cx) / rx, dy = (y - cy) / ry;
				float d = sqrtf(dx * dx + dy * dy);
				if (d >= 1.0f)
					continue;
				float a = d > 0.85f ? (1.0f - d) / 0.15f : 1.0f;
				float stripe = 24.0f * sinf(x * fx + y * fy);
				uint8_t *p = pix + ((size_t)y * w + x) * 3;
				for (int c = 0; c < 3; c++)
					p[c] = clamp8(p[c] * (1 - a) + (col[c] + stripe + 0.6f * (p[c] - 128.0f)) * a);
			}
	}
	free(l1.v);
	free(l2.v);
	free(l3.v);
	free(l4.v);
	free(lc.v);
}
