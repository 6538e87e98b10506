/* StyleGAN2-ADA's augmentation (Karras et al. 2020, pipeline "bgc"): the
 * per-sample transform from its uniforms and the probability p, and the
 * resampling geometry, shared by the CPU kernels (cpu/ada_cpu.c) and the
 * CUDA kernels (cuda/ada.cu) so both derive the same transforms
 * (<ganflow/backend.h>, ada_params, says what the ops compute). Plain C
 * that nvcc compiles too; the parameters are composed in double.
 *
 * Distributions and order are StyleGAN2-ADA's (training/augment.py of
 * stylegan2-ada-pytorch), each transform on with probability p:
 *   blit:  x-flip (i ~ {0, 1}), quarter turns (k ~ {0..3}), integer
 *          translation round(U(-1/8, 1/8) x size) in x and y;
 *   geom:  isotropic scale 2^N(0, 0.2); rotation U(-pi, pi) (before and
 *          after the anisotropic scale, each with probability
 *          1 - sqrt(1 - p), so that one of them happens with p);
 *          anisotropic scale 2^N(0, 0.2) (x by s, y by 1/s); fractional
 *          translation N(0, 1/8) x size in x and y;
 *   color: brightness + N(0, 0.2); contrast x 2^N(0, 0.5); luma flip (the
 *          Householder reflection about the luma axis (1, 1, 1)/sqrt 3,
 *          i ~ {0, 1}); hue rotation U(-pi, pi) about the luma axis;
 *          saturation 2^N(0, 1) away from the luma axis (hue and
 *          saturation on 3 channels only, as StyleGAN2-ADA).
 * The geometric transforms compose into one inverse map G (output pixel ->
 * input point, pixel units, origin at the image centre), applied by one
 * resampling; the colour ones into one 4x4 matrix C (for 1 channel: the
 * mean of its first three rows, a gain and an offset). */
#ifndef GF_NN_ADA_PARAMS_H
#define GF_NN_ADA_PARAMS_H

#include <math.h>
#include <stddef.h>

#include <ganflow/backend.h>

#ifdef __CUDACC__
#define GF_ADA_FN __host__ __device__ static inline
#else
#define GF_ADA_FN static inline
#endif

#define GF_ADA_PI 3.14159265358979323846

/* Which uniform of a sample's GF_ADA_U feeds what: values, then the gates
 * (u < p: the transform is on). Normals are Box-Muller pairs. */
enum {
	ADA_U_XFLIP = 0, ADA_U_ROT90 = 1, ADA_U_XINT = 2 /* 2, 3 */, ADA_U_ROT_PRE = 4, ADA_U_ROT_POST = 5,
	ADA_U_LUMA = 6, ADA_U_N_SCALE_ANISO = 7 /* 7, 8 */, ADA_U_N_FRAC = 9 /* 9, 10 */,
	ADA_U_N_BRIGHT_CONTRAST = 11 /* 11, 12 */, ADA_U_N_SAT = 13 /* 13, 14 */, ADA_U_HUE = 15,
	ADA_U_GATE = 16 /* 16..28: the 13 transforms in the order of gf_ada_draw */
};

/* Matrix layout of one sample (GF_ADA_M floats): m[0..5] the rows of the
 * 2x3 inverse map, m[6] 1 when it is not the identity, m[7] 1 when the
 * colour matrix is not, m[8..19] the 3x4 colour matrix (rows; 1 channel:
 * m[8] the gain, m[11] the offset). */
enum { ADA_M_GEOM = 0, ADA_M_GEOM_ON = 6, ADA_M_COLOR_ON = 7, ADA_M_COLOR = 8 };

/* One sample's transforms; an off transform holds its identity value. */
typedef struct gf_ada_draw {
	double xflip;            /* 0 or 1 */
	double rot90;            /* quarter turns, 0..3 */
	double tx, ty;           /* integer translation (pixels; x: columns, y: rows) */
	double scale;            /* isotropic scale */
	double rot_pre;          /* radians */
	double aniso;            /* x scaled by it, y by its inverse */
	double rot_post;         /* radians */
	double fx, fy;           /* fractional translation (pixels) */
	double bright, contrast; /* added; factor */
	double lumaflip;         /* 0 or 1 */
	double hue;              /* radians */
	double sat;              /* factor */
} gf_ada_draw;

GF_ADA_FN void gf_ada_identity(gf_ada_draw *d)
{
	d->xflip = d->rot90 = d->tx = d->ty = d->rot_pre = d->rot_post = d->fx = d->fy = 0.0;
	d->bright = d->lumaflip = d->hue = 0.0;
	d->scale = d->aniso = d->contrast = d->sat = 1.0;
}

/* Box-Muller on uniforms u[k], u[k + 1] (1 - u in (0, 1]): the cosine or
 * the sine one. */
GF_ADA_FN double gf_ada_normal(const float *u, int k, int second)
{
	double r = sqrt(-2.0 * log(1.0 - (double)u[k])), a = 2.0 * GF_ADA_PI * (double)u[k + 1];
	return r * (second ? sin(a) : cos(a));
}

/* The transforms of one sample from its uniforms u (GF_ADA_U) and p. */
GF_ADA_FN void gf_ada_draw_of(gf_ada_draw *d, const float *u, float p, int h, int w, unsigned what)
{
	const float *g = u + ADA_U_GATE;
	double pr = 1.0 - sqrt(fmax(0.0, 1.0 - (double)p)); /* P(pre or post rotation) = p */
	gf_ada_identity(d);
	if (what & GF_ADA_BLIT) {
		if (g[0] < p)
			d->xflip = floor((double)u[ADA_U_XFLIP] * 2.0);
		if (g[1] < p)
			d->rot90 = floor((double)u[ADA_U_ROT90] * 4.0);
		if (g[2] < p) {
			d->tx = rint(((double)u[ADA_U_XINT] * 2.0 - 1.0) * 0.125 * w);
			d->ty = rint(((double)u[ADA_U_XINT + 1] * 2.0 - 1.0) * 0.125 * h);
		}
	}
	if (what & GF_ADA_GEOM) {
		if (g[3] < p)
			d->scale = exp2(gf_ada_normal(u, ADA_U_N_SCALE_ANISO, 0) * 0.2);
		if (g[4] < pr)
			d->rot_pre = ((double)u[ADA_U_ROT_PRE] * 2.0 - 1.0) * GF_ADA_PI;
		if (g[5] < p)
			d->aniso = exp2(gf_ada_normal(u, ADA_U_N_SCALE_ANISO, 1) * 0.2);
		if (g[6] < pr)
			d->rot_post = ((double)u[ADA_U_ROT_POST] * 2.0 - 1.0) * GF_ADA_PI;
		if (g[7] < p) {
			d->fx = gf_ada_normal(u, ADA_U_N_FRAC, 0) * 0.125 * w;
			d->fy = gf_ada_normal(u, ADA_U_N_FRAC, 1) * 0.125 * h;
		}
	}
	if (what & GF_ADA_COLOR) {
		if (g[8] < p)
			d->bright = gf_ada_normal(u, ADA_U_N_BRIGHT_CONTRAST, 0) * 0.2;
		if (g[9] < p)
			d->contrast = exp2(gf_ada_normal(u, ADA_U_N_BRIGHT_CONTRAST, 1) * 0.5);
		if (g[10] < p)
			d->lumaflip = floor((double)u[ADA_U_LUMA] * 2.0);
		if (g[11] < p)
			d->hue = ((double)u[ADA_U_HUE] * 2.0 - 1.0) * GF_ADA_PI;
		if (g[12] < p)
			d->sat = exp2(gf_ada_normal(u, ADA_U_N_SAT, 0) * 1.0);
	}
}

/* a = a b for 3x3 (n = 3) or 4x4 (n = 4) row-major matrices. */
GF_ADA_FN void gf_ada_mul(double *a, const double *b, int n)
{
	double t[16];
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			double s = 0;
			for (int k = 0; k < n; k++)
				s += a[i * n + k] * b[k * n + j];
			t[i * n + j] = s;
		}
	for (int i = 0; i < n * n; i++)
		a[i] = t[i];
}

/* a = b a (colour transforms are applied on the left). */
GF_ADA_FN void gf_ada_lmul(double *a, const double *b, int n)
{
	double t[16];
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			double s = 0;
			for (int k = 0; k < n; k++)
				s += b[i * n + k] * a[k * n + j];
			t[i * n + j] = s;
		}
	for (int i = 0; i < n * n; i++)
		a[i] = t[i];
}

/* G = G [[a, b, e], [c, d, f], [0, 0, 1]]. */
GF_ADA_FN void gf_ada_geo(double *G, double a, double b, double e, double c, double d, double f)
{
	const double t[9] = { a, b, e, c, d, f, 0, 0, 1 };
	gf_ada_mul(G, t, 3);
}

/* G = G rotate2d(theta) (StyleGAN2-ADA's rotate2d_inv(-theta)). */
GF_ADA_FN void gf_ada_rot(double *G, double theta)
{
	double c = cos(theta), s = sin(theta);
	gf_ada_geo(G, c, -s, 0, s, c, 0);
}

/* The matrices of one sample (m: GF_ADA_M floats) for an image of c
 * channels, h x w. */
GF_ADA_FN void gf_ada_matrix(float *m, const gf_ada_draw *d, int c, int h, int w)
{
	(void)h, (void)w;
	/* geometric: G_inv = G_inv X for each, as StyleGAN2-ADA composes them */
	double G[9] = { 1, 0, 0, 0, 1, 0, 0, 0, 1 };
	double f = 1.0 - 2.0 * d->xflip;
	gf_ada_geo(G, f, 0, 0, 0, 1, 0);                        /* scale2d_inv(1 - 2i, 1) */
	int k = (int)d->rot90 & 3;                              /* exact quarter turns */
	double qc = k == 0 ? 1.0 : k == 2 ? -1.0 : 0.0, qs = k == 1 ? 1.0 : k == 3 ? -1.0 : 0.0;
	gf_ada_geo(G, qc, -qs, 0, qs, qc, 0);                   /* rotate2d_inv(-pi/2 k) */
	gf_ada_geo(G, 1, 0, -d->tx, 0, 1, -d->ty);              /* translate2d_inv(tx, ty) */
	gf_ada_geo(G, 1.0 / d->scale, 0, 0, 0, 1.0 / d->scale, 0); /* scale2d_inv(s, s) */
	gf_ada_rot(G, d->rot_pre);                              /* rotate2d_inv(-theta) */
	gf_ada_geo(G, 1.0 / d->aniso, 0, 0, 0, d->aniso, 0);    /* scale2d_inv(s, 1/s) */
	gf_ada_rot(G, d->rot_post);
	gf_ada_geo(G, 1, 0, -d->fx, 0, 1, -d->fy);              /* translate2d_inv(fx, fy) */
	int geom = 0;
	for (int i = 0; i < 6; i++) {
		m[ADA_M_GEOM + i] = (float)G[i];
		geom |= G[i] != (i == 0 || i == 4 ? 1.0 : 0.0);
	}
	m[ADA_M_GEOM_ON] = (float)geom;

	/* colour: C = X C for each */
	double C[16] = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 };
	const double b = d->bright, s = d->contrast;
	const double T[16] = { 1, 0, 0, b, 0, 1, 0, b, 0, 0, 1, b, 0, 0, 0, 1 };
	const double S[16] = { s, 0, 0, 0, 0, s, 0, 0, 0, 0, s, 0, 0, 0, 0, 1 };
	gf_ada_lmul(C, T, 4);
	gf_ada_lmul(C, S, 4);
	double vv = 1.0 / 3.0;                                   /* v v^T, v = (1, 1, 1, 0)/sqrt 3 */
	double L[16] = { 0 };
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			L[i * 4 + j] = (i == j) - (i < 3 && j < 3 ? 2.0 * vv * d->lumaflip : 0.0);
	gf_ada_lmul(C, L, 4);                                   /* Householder reflection */
	if (c == 3) {
		double v = sqrt(vv), cs = cos(d->hue), sn = sin(d->hue), cc = 1.0 - cs;
		const double R[16] = { v * v * cc + cs, v * v * cc - v * sn, v * v * cc + v * sn, 0,
		                       v * v * cc + v * sn, v * v * cc + cs, v * v * cc - v * sn, 0,
		                       v * v * cc - v * sn, v * v * cc + v * sn, v * v * cc + cs, 0,
		                       0, 0, 0, 1 };
		gf_ada_lmul(C, R, 4);                               /* rotate3d(v, theta) */
		double Z[16] = { 0 };
		for (int i = 0; i < 4; i++)
			for (int j = 0; j < 4; j++) {
				double p = i < 3 && j < 3 ? vv : (i == 3 && j == 3 ? 1.0 : 0.0);
				Z[i * 4 + j] = p + ((i == j) - p) * d->sat;
			}
		gf_ada_lmul(C, Z, 4);                               /* v v^T + (I - v v^T) s */
	}
	int color = 0;
	for (int i = 0; i < 12; i++) {
		m[ADA_M_COLOR + i] = 0.0f;
		color |= C[i] != (i % 5 == 0 ? 1.0 : 0.0);
	}
	if (c == 3) {
		for (int i = 0; i < 12; i++)
			m[ADA_M_COLOR + i] = (float)C[i];
	} else { /* grey: the mean of the three rows: a gain and an offset */
		double gain = 0, off = 0;
		for (int r = 0; r < 3; r++) {
			gain += C[r * 4] + C[r * 4 + 1] + C[r * 4 + 2];
			off += C[r * 4 + 3];
		}
		m[ADA_M_COLOR] = (float)(gain / 3.0);
		m[ADA_M_COLOR + 3] = (float)(off / 3.0);
		m[ADA_M_COLOR + 1] = m[ADA_M_COLOR + 2] = 0.0f;
	}
	m[ADA_M_COLOR_ON] = (float)color;
}

/* Index n of an axis of the given size continued by reflection about its
 * first and last samples (x[-1] = x[1], x[size] = x[size - 2]), size >= 2. */
GF_ADA_FN int gf_ada_reflect(int n, int size)
{
	int period = 2 * (size - 1), r = n % period;
	if (r < 0)
		r += period;
	return r < size ? r : period - r;
}

/* The input point (column x, row y, pixels of the input) that output
 * pixel (r, col) reads under the map m. */
GF_ADA_FN void gf_ada_src(const float *m, int r, int col, int h, int w, float *x, float *y)
{
	float cx = 0.5f * (float)(w - 1), cy = 0.5f * (float)(h - 1);
	float ox = (float)col - cx, oy = (float)r - cy;
	*x = m[0] * ox + m[1] * oy + m[2] + cx;
	*y = m[3] * ox + m[4] * oy + m[5] + cy;
}

/* The four bilinear taps of output pixel (r, col) under map m: offsets
 * into a plane and their weights (x first: (1 - fx)(1 - fy), fx (1 - fy),
 * (1 - fx) fy, fx fy). */
GF_ADA_FN void gf_ada_taps(const float *m, int r, int col, int h, int w, int at[4], float wt[4])
{
	float sx, sy;
	gf_ada_src(m, r, col, h, w, &sx, &sy);
	float x0 = floorf(sx), y0 = floorf(sy), fx = sx - x0, fy = sy - y0;
	int ix0 = gf_ada_reflect((int)x0, w), ix1 = gf_ada_reflect((int)x0 + 1, w);
	int iy0 = gf_ada_reflect((int)y0, h), iy1 = gf_ada_reflect((int)y0 + 1, h);
	at[0] = iy0 * w + ix0, wt[0] = (1.0f - fx) * (1.0f - fy);
	at[1] = iy0 * w + ix1, wt[1] = fx * (1.0f - fy);
	at[2] = iy1 * w + ix0, wt[2] = (1.0f - fx) * fy;
	at[3] = iy1 * w + ix1, wt[3] = fx * fy;
}

/* The gradient that reaches the resampled image at pixel q of channel ch:
 * the colour matrix's transpose (cm, `color` on) applied to dy (c, h, w). */
GF_ADA_FN float gf_ada_colour_t(const float *dy, const float *cm, int color, int c, int ch, size_t hw, size_t q)
{
	if (!color)
		return dy[ch * hw + q];
	if (c == 1)
		return cm[0] * dy[q];
	return cm[ch] * dy[q] + cm[4 + ch] * dy[hw + q] + cm[8 + ch] * dy[2 * hw + q];
}

/* The first k with base + k period >= lo. */
GF_ADA_FN int gf_ada_first_k(int base, int lo, int period)
{
	int d = lo - base;
	return d > 0 ? (d + period - 1) / period : -((-d) / period);
}

/* The backward as a gather (the CUDA kernel's; the CPU scatters): the
 * gradient of input pixel (qy, qx) of channel ch of one sample, from dy
 * (c, h, w) under map m with the geometric part on. Its taps' sources are
 * the output pixels whose sample point lies within one pixel of a
 * reflected copy of (qx, qy) (x + 2k(w - 1), and -x + 2k(w - 1) for an
 * interior x; likewise y), found through the inverse of the affine map,
 * weighted as the forward weights them, summed in a fixed order. */
GF_ADA_FN float gf_ada_gather(const float *m, const float *dy, int color, int c, int h, int w, int ch, int qy, int qx)
{
	const float *cm = m + ADA_M_COLOR;
	size_t hw = (size_t)h * w;
	/* the sample points of the output grid span the box of its corners' */
	float lo_x = 1e30f, hi_x = -1e30f, lo_y = 1e30f, hi_y = -1e30f;
	for (int k = 0; k < 4; k++) {
		float sx, sy;
		gf_ada_src(m, k & 1 ? h - 1 : 0, k & 2 ? w - 1 : 0, h, w, &sx, &sy);
		lo_x = fminf(lo_x, sx), hi_x = fmaxf(hi_x, sx), lo_y = fminf(lo_y, sy), hi_y = fmaxf(hi_y, sy);
	}
	int x_lo = (int)floorf(lo_x) - 1, x_hi = (int)ceilf(hi_x) + 1, y_lo = (int)floorf(lo_y) - 1,
	    y_hi = (int)ceilf(hi_y) + 1;
	int px = 2 * (w - 1), py = 2 * (h - 1);
	/* output offset from the centre = A^-1 (s - t - centre), A = [[m0, m1], [m3, m4]] */
	double a = m[0], b = m[1], cc = m[3], d = m[4], det = a * d - b * cc;
	double ia = d / det, ib = -b / det, ic = -cc / det, id = a / det;
	double cx = 0.5 * (w - 1), cy = 0.5 * (h - 1);
	float acc = 0.0f;
	for (int fxm = 0; fxm < 2; fxm++) { /* the copies qx + k px, then -qx + k px */
		int bx = fxm ? -qx : qx;
		if (fxm && (qx == 0 || qx == w - 1))
			continue; /* the same points as the first family */
		for (int nx = bx + gf_ada_first_k(bx, x_lo, px) * px; nx <= x_hi; nx += px)
			for (int fym = 0; fym < 2; fym++) {
				int by = fym ? -qy : qy;
				if (fym && (qy == 0 || qy == h - 1))
					continue;
				for (int ny = by + gf_ada_first_k(by, y_lo, py) * py; ny <= y_hi; ny += py) {
					/* the output pixels whose sample point is within one pixel of (nx, ny) */
					double r_lo = 1e30, r_hi = -1e30, c_lo = 1e30, c_hi = -1e30;
					for (int k = 0; k < 4; k++) {
						double sx = nx + (k & 1 ? 1.0 : -1.0) - m[2] - cx, sy = ny + (k & 2 ? 1.0 : -1.0) - m[5] - cy;
						double ox = ia * sx + ib * sy + cx, oy = ic * sx + id * sy + cy;
						c_lo = fmin(c_lo, ox), c_hi = fmax(c_hi, ox), r_lo = fmin(r_lo, oy), r_hi = fmax(r_hi, oy);
					}
					int r0 = (int)floor(r_lo) - 1, r1 = (int)ceil(r_hi) + 1;
					int c0 = (int)floor(c_lo) - 1, c1 = (int)ceil(c_hi) + 1;
					r0 = r0 < 0 ? 0 : r0, r1 = r1 > h - 1 ? h - 1 : r1;
					c0 = c0 < 0 ? 0 : c0, c1 = c1 > w - 1 ? w - 1 : c1;
					for (int r = r0; r <= r1; r++)
						for (int col = c0; col <= c1; col++) {
							float sx, sy;
							gf_ada_src(m, r, col, h, w, &sx, &sy);
							float wx = 1.0f - fabsf(sx - (float)nx), wy = 1.0f - fabsf(sy - (float)ny);
							if (wx > 0.0f && wy > 0.0f)
								acc += wx * wy * gf_ada_colour_t(dy, cm, color, c, ch, hw, (size_t)r * w + col);
						}
				}
			}
	}
	return acc;
}

#endif
