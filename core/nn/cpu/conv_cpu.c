/* CPU convolutions: im2col + one OpenBLAS GEMM per chunk of samples, the
 * sub-pixel form of "nearest upsample x2 + 3x3 conv", and direct kernels
 * for convolutions with very few output channels.
 *
 * Generic path. The batch is cut into chunks whose im2col matrix fits a
 * fixed budget (so it stays in cache and the chunking never depends on the
 * thread count); per chunk: col (cin*kh*kw, bc*P) from x, one GEMM
 * tmp (cout, bc*P) = w (cout, K) col, then a scatter into NCHW y with the
 * bias. Backward gathers dy into (cout, bc*P), dw += dy col^T (GEMM over the
 * chunk, chunks added in order), dcol = w^T dy (GEMM) and col2im into dx.
 *
 * Sub-pixel path (up = 2, 3x3, stride 1, pad 1). Output pixel (2i+a, 2j+b)
 * of conv(upsample(x)) only sees low-resolution rows i-1..i (a = 0) or
 * i..i+1 (a = 1), and likewise columns, so each of the four phases (a, b)
 * is a 2x2 convolution of x with weights summed from the 3x3 kernel:
 * rows {w0, w1+w2} for a = 0 and {w0+w1, w2} for a = 1. That is 4 taps per
 * output instead of 9 (2.25x fewer FLOPs) and no upsampled tensor. Each
 * phase is the generic machinery with a 2x2 kernel, stride 1 and padding
 * (1 - a, 1 - b); the backward runs the same phases and folds the phase
 * weight gradients back onto the 3x3 kernel by the same summation pattern.
 *
 * "Same" 3x3 convolutions (stride 1, padding 1, 8 or more channels in and
 * out) go to Winograd F(2x2, 3x3) in winograd_cpu.c.
 *
 * Direct path (cout <= 4, stride 1, no upsample): the final RGB/grey conv
 * of a generator. im2col would write 9*cin values per output pixel to
 * feed a GEMM with one or three rows; plain vectorised loops are faster.
 *
 * Grouped convolutions (groups = g): the im2col matrix of the whole input
 * holds each group's rows (cin/g kh kw of them) one after the other, as
 * the weight holds each group's cout/g rows, so a chunk runs g GEMMs, one
 * strided batch (gemm_batched_cpu.c), on the same col; the backward's
 * products likewise, and Winograd's 16 per chunk become 16 g. Groups of at
 * most 4 channels in and out (depthwise: 1 and 1) take the direct path. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <ganflow/err.h>

#include "cpu.h"

#define COL_BUDGET ((size_t)1 << 20)   /* floats of im2col per chunk: 4 MiB */
#define DIRECT_MAX_COUT 4

/* Geometry of one im2col problem: input (cin, h, w) per sample, a kh x kw
 * kernel with stride and top/left padding, output (hout, wout). */
struct geom {
	int cin, h, w, kh, kw, sh, sw, ph, pw, hout, wout;
};

static struct geom geom_of(const gf_conv_desc *d)
{
	struct geom g = { d->cin, d->h, d->w, d->kh, d->kw, d->sh, d->sw, d->ph, d->pw, d->hout, d->wout };
	return g;
}

/* Phase (a, b) of the sub-pixel form: a 2x2 stride-1 conv over the
 * low-resolution input, output the low-resolution size. */
static struct geom geom_phase(const gf_conv_desc *d, int a, int b)
{
	struct geom g = { d->cin, d->h, d->w, 2, 2, 1, 1, 1 - a, 1 - b, d->h, d->w };
	return g;
}

static int chunk_samples(size_t per_sample, int n)
{
	size_t c = per_sample ? COL_BUDGET / per_sample : (size_t)n;
	if (c < 1)
		c = 1;
	return c > (size_t)n ? n : (int)c;
}

static int check_desc(const gf_conv_desc *d)
{
	int g = gf_conv_groups(d);
	if (d->dtype != GF_F32 || d->layout != GF_NCHW)
		return gf_seterr(GF_EUNSUPPORTED, "cpu conv: only f32 NCHW");
	if (g > 1 && (d->cin % g || d->cout % g || d->up != 1))
		return gf_seterr(GF_EUNSUPPORTED, "cpu conv: %d groups of %d -> %d channels%s", g, d->cin, d->cout,
		                 d->up != 1 ? " with a fused upsample" : "");
	if (d->up == 2 && !(d->kh == 3 && d->kw == 3 && d->sh == 1 && d->sw == 1 && d->ph == 1 && d->pw == 1 &&
	                    d->hout == 2 * d->h && d->wout == 2 * d->w))
		return gf_seterr(GF_EUNSUPPORTED, "cpu conv: fused upsample needs a 3x3 stride-1 pad-1 conv");
	if (d->up != 1 && d->up != 2)
		return gf_seterr(GF_EUNSUPPORTED, "cpu conv: upsample factor %d", d->up);
	return 0;
}

/* ---- im2col and col2im over a chunk ---- */

struct col_args {
	const struct geom *g;
	float *col;          /* (K, ldcol) */
	size_t ldcol;        /* bc * P */
	float *xmut;         /* col2im target (n, cin, h, w) */
	const float *x;      /* im2col source */
	int b0, bc;
	int zero;            /* col2im: zero each plane first */
};

/* One row segment: out[0..wout) = src row iy sampled at ox*sw - pw + kx.
 * Rows are short (8 to 32 values in the DC-GAN), so plain loops beat
 * memcpy/memset calls. */
static inline void im2col_row(float *restrict out, const float *restrict src, const struct geom *g, int kx)
{
	if (g->sw == 1) {
		int lo = g->pw - kx, hi = g->w + g->pw - kx;   /* valid ox: [lo, hi) */
		if (lo < 0)
			lo = 0;
		if (hi > g->wout)
			hi = g->wout;
		if (hi < lo)
			hi = lo;
		int ox = 0, shift = kx - g->pw;
		for (; ox < lo; ox++)
			out[ox] = 0.0f;
		for (; ox < hi; ox++)
			out[ox] = src[ox + shift];
		for (; ox < g->wout; ox++)
			out[ox] = 0.0f;
		return;
	}
	for (int ox = 0; ox < g->wout; ox++) {
		int ix = ox * g->sw - g->pw + kx;
		out[ox] = ix >= 0 && ix < g->w ? src[ix] : 0.0f;
	}
}

GF_NO_MEMCPY GF_CLONES static void im2col_part(void *p, size_t b, size_t e)
{
	struct col_args *a = p;
	const struct geom *g = a->g;
	size_t P = (size_t)g->hout * g->wout, khw = (size_t)g->kh * g->kw;
	for (size_t item = b; item < e; item++) {
		size_t r = item / (size_t)a->bc;
		int bb = (int)(item % (size_t)a->bc);
		int c = (int)(r / khw), ky = (int)(r / g->kw % g->kh), kx = (int)(r % g->kw);
		float *dst = a->col + r * a->ldcol + (size_t)bb * P;
		const float *src = a->x + ((size_t)(a->b0 + bb) * g->cin + c) * g->h * g->w;
		for (int oy = 0; oy < g->hout; oy++) {
			int iy = oy * g->sh - g->ph + ky;
			if (iy < 0 || iy >= g->h)
				memset(dst + (size_t)oy * g->wout, 0, (size_t)g->wout * sizeof(float));
			else
				im2col_row(dst + (size_t)oy * g->wout, src + (size_t)iy * g->w, g, kx);
		}
	}
}

/* ---- planes through a padded, phase-split copy ----
 *
 * When the padded plane fits a small stack buffer (every convolution of
 * the DC-GANs: the generators' stride-1 ones, the sub-pixel phases and the
 * discriminators' stride-2 ones), one item is a whole (sample, channel)
 * plane. It is copied once into a zero-bordered buffer split by stride
 * phase: padded pixel (py, px) goes to phase (py % sh, px % sw) at
 * (py / sh, px / sw), each phase an hs x ws plane. Kernel tap (ky, kx) at
 * output (oy, ox) reads padded (oy sh + ky, ox sw + kx), which is phase
 * (ky % sh, kx % sw) at (oy + ky / sh, ox + kx / sw): for every stride,
 * each tap is a plain copy (im2col) or add (col2im) of contiguous rows,
 * with no boundary tests (stride 1 has one phase, the padded plane
 * itself). Rows are short (2 to 32 values), so the row loops are kept as
 * loops rather than memcpy calls. */

#define PAD_MAX 8192   /* floats of the phase planes (32 KiB of stack) */

/* The size of one phase plane; whether all sh * sw of them fit. */
static int pad_dims(const struct geom *g, int *hs, int *ws)
{
	int hp = (g->hout - 1) * g->sh + g->kh, wp = (g->wout - 1) * g->sw + g->kw;
	if (hp < g->h + g->ph)
		hp = g->h + g->ph;
	if (wp < g->w + g->pw)
		wp = g->w + g->pw;
	*hs = (hp + g->sh - 1) / g->sh;
	*ws = (wp + g->sw - 1) / g->sw;
	return (size_t)g->sh * g->sw * (size_t)*hs * (size_t)*ws <= PAD_MAX;
}

static inline void copy_row(float *restrict dst, const float *restrict src, int n)
{
	for (int i = 0; i < n; i++)
		dst[i] = src[i];
}

static inline void add_row(float *restrict dst, const float *restrict src, int n)
{
	for (int i = 0; i < n; i++)
		dst[i] += src[i];
}

/* rows x n blocks: dst row r (stride ldd) = or += src row r (stride lds).
 * The DC-GANs' rows are 2 to 32 values long and there are hundreds of
 * thousands of them per im2col, so the usual widths get a loop of their
 * own whose row is a compile-time length (one or two vector moves, no
 * remainder handling per row). */
#define ROWS_N(N, OP)                                                     \
	for (int r_ = 0; r_ < rows; r_++, dst += ldd, src += lds)         \
		for (int i_ = 0; i_ < (N); i_++)                          \
			dst[i_] OP src[i_]
static inline void copy_rows(float *restrict dst, size_t ldd, const float *restrict src, size_t lds, int rows, int n)
{
	switch (n) {
	case 2: ROWS_N(2, =); break;
	case 4: ROWS_N(4, =); break;
	case 8: ROWS_N(8, =); break;
	case 16: ROWS_N(16, =); break;
	case 32: ROWS_N(32, =); break;
	default: ROWS_N(n, =); break;
	}
}

static inline void add_rows(float *restrict dst, size_t ldd, const float *restrict src, size_t lds, int rows, int n)
{
	switch (n) {
	case 2: ROWS_N(2, +=); break;
	case 4: ROWS_N(4, +=); break;
	case 8: ROWS_N(8, +=); break;
	case 16: ROWS_N(16, +=); break;
	case 32: ROWS_N(32, +=); break;
	default: ROWS_N(n, +=); break;
	}
}
#undef ROWS_N

/* The first of 0, 1, ... whose padded position (i + pad) falls in phase
 * p of stride s, and that position's index in the phase. */
static inline void phase_first(int p, int pad, int s, int *first, int *idx)
{
	*first = ((p - pad) % s + s) % s;
	*idx = (*first + pad) / s;
}

/* Input row r (w values) into the phases of one padded row, whose phase
 * b row is ph + b * hs * ws; stride 2 in one pass of pairs (x even to one
 * phase, x odd to the other: a loop the compiler vectorises). */
static inline void row_in(float *ph, size_t pstride, const struct geom *g, const float *restrict r)
{
	if (g->sw == 1) {
		copy_row(ph + g->pw, r, g->w);
	} else if (g->sw == 2) {
		int odd = g->pw & 1, k = 0;
		float *restrict de = ph + (odd ? pstride : 0) + (g->pw >> 1);
		float *restrict dd = ph + (odd ? 0 : pstride) + ((g->pw + 1) >> 1);
		for (; 2 * k + 1 < g->w; k++) {
			de[k] = r[2 * k];
			dd[k] = r[2 * k + 1];
		}
		if (2 * k < g->w)
			de[k] = r[2 * k];
	} else {
		for (int b = 0; b < g->sw; b++) {
			int x0, j0;
			phase_first(b, g->pw, g->sw, &x0, &j0);
			float *restrict d = ph + b * pstride + j0;
			for (int x = x0, j = 0; x < g->w; x += g->sw, j++)
				d[j] = r[x];
		}
	}
}

/* The phases of one padded row back into input row r: = or +=. */
static inline void row_out(float *restrict r, const float *ph, size_t pstride, const struct geom *g, int zero)
{
	if (g->sw == 1) {
		if (zero)
			copy_row(r, ph + g->pw, g->w);
		else
			add_row(r, ph + g->pw, g->w);
	} else if (g->sw == 2) {
		int odd = g->pw & 1, k = 0;
		const float *restrict se = ph + (odd ? pstride : 0) + (g->pw >> 1);
		const float *restrict sd = ph + (odd ? 0 : pstride) + ((g->pw + 1) >> 1);
		if (zero) {
			for (; 2 * k + 1 < g->w; k++) {
				r[2 * k] = se[k];
				r[2 * k + 1] = sd[k];
			}
			if (2 * k < g->w)
				r[2 * k] = se[k];
		} else {
			for (; 2 * k + 1 < g->w; k++) {
				r[2 * k] += se[k];
				r[2 * k + 1] += sd[k];
			}
			if (2 * k < g->w)
				r[2 * k] += se[k];
		}
	} else {
		for (int b = 0; b < g->sw; b++) {
			int x0, j0;
			phase_first(b, g->pw, g->sw, &x0, &j0);
			const float *restrict s = ph + b * pstride + j0;
			for (int x = x0, j = 0; x < g->w; x += g->sw, j++)
				r[x] = zero ? s[j] : r[x] + s[j];
		}
	}
}

/* The input plane `src` (h x w) into the phase planes, or (out) the phase
 * planes back into dst (= with zero, else +=): rows y = y0, y0 + sh, ...
 * go to row phase a from row i0 on, with no division per row or value. */
static inline void plane_in(float *pad, const struct geom *g, int hs, int ws, const float *restrict src)
{
	size_t pstride = (size_t)hs * ws;
	for (int a = 0; a < g->sh; a++) {
		int y0, i0;
		phase_first(a, g->ph, g->sh, &y0, &i0);
		float *ph = pad + (size_t)a * g->sw * pstride;
		for (int y = y0, i = i0; y < g->h; y += g->sh, i++)
			row_in(ph + (size_t)i * ws, pstride, g, src + (size_t)y * g->w);
	}
}

static inline void plane_out(float *restrict dst, const float *pad, const struct geom *g, int hs, int ws, int zero)
{
	size_t pstride = (size_t)hs * ws;
	for (int a = 0; a < g->sh; a++) {
		int y0, i0;
		phase_first(a, g->ph, g->sh, &y0, &i0);
		const float *ph = pad + (size_t)a * g->sw * pstride;
		for (int y = y0, i = i0; y < g->h; y += g->sh, i++)
			row_out(dst + (size_t)y * g->w, ph + (size_t)i * ws, pstride, g, zero);
	}
}

/* Tap (ky, kx)'s source: the phase row that output row 0 reads. */
static inline float *tap_base(float *pad, const struct geom *g, int hs, int ws, int ky, int kx)
{
	return pad + ((size_t)(ky % g->sh) * g->sw + kx % g->sw) * hs * ws + (size_t)(ky / g->sh) * ws + kx / g->sw;
}

GF_NO_MEMCPY GF_CLONES static void im2col_plane_part(void *p, size_t b, size_t e)
{
	struct col_args *a = p;
	const struct geom *g = a->g;
	size_t P = (size_t)g->hout * g->wout;
	int hs, ws;
	pad_dims(g, &hs, &ws);
	float pad[PAD_MAX];
	/* the same pixels are written for every plane: the borders stay 0 */
	memset(pad, 0, (size_t)g->sh * g->sw * hs * ws * sizeof(float));
	for (size_t item = b; item < e; item++) {   /* item = c * bc + bb */
		int c = (int)(item / (size_t)a->bc), bb = (int)(item % (size_t)a->bc);
		const float *src = a->x + ((size_t)(a->b0 + bb) * g->cin + c) * g->h * g->w;
		plane_in(pad, g, hs, ws, src);
		for (int ky = 0; ky < g->kh; ky++) {
			for (int kx = 0; kx < g->kw; kx++) {
				size_t r = ((size_t)c * g->kh + ky) * g->kw + kx;
				float *dst = a->col + r * a->ldcol + (size_t)bb * P;
				const float *base = tap_base(pad, g, hs, ws, ky, kx);
				copy_rows(dst, (size_t)g->wout, base, (size_t)ws, g->hout, g->wout);
			}
		}
	}
}

GF_NO_MEMCPY GF_CLONES static void col2im_plane_part(void *p, size_t b, size_t e)
{
	struct col_args *a = p;
	const struct geom *g = a->g;
	size_t P = (size_t)g->hout * g->wout;
	int hs, ws;
	pad_dims(g, &hs, &ws);
	float pad[PAD_MAX];
	for (size_t item = b; item < e; item++) {   /* item = bb * cin + c: one dx plane */
		int bb = (int)(item / (size_t)g->cin), c = (int)(item % (size_t)g->cin);
		memset(pad, 0, (size_t)g->sh * g->sw * hs * ws * sizeof(float));
		for (int ky = 0; ky < g->kh; ky++) {
			for (int kx = 0; kx < g->kw; kx++) {
				size_t r = ((size_t)c * g->kh + ky) * g->kw + kx;
				const float *src = a->col + r * a->ldcol + (size_t)bb * P;
				float *base = tap_base(pad, g, hs, ws, ky, kx);
				add_rows(base, (size_t)ws, src, (size_t)g->wout, g->hout, g->wout);
			}
		}
		float *plane = a->xmut + ((size_t)(a->b0 + bb) * g->cin + c) * g->h * g->w;
		plane_out(plane, pad, g, hs, ws, a->zero);
	}
}

/* ---- strided im2col and col2im of narrow outputs as gathers ----
 *
 * With a stride, the taps' contributions to one padded row overlap with a
 * shift (3x3 stride 2: taps kx = 0 and 2 land one value apart), and when
 * the output rows are narrower than a vector (the DC-GAN D's last two
 * convs: 4 and 2 values) adding them tap by tap stalls on loads that
 * straddle the previous tap's stores (L4's dx took 0.90 ms that way, 0.63
 * ms row by row, 0.48 ms gathered; one thread, batch 64). Instead each dx
 * value is summed once from the col entries that reach it, in tap order,
 * from a table made once per call: for input pixel (y, x) the taps with
 * ky = y + ph - oy sh and kx = x + pw - ox sw in the kernel, as offsets
 * from the (sample, channel) block of col. im2col likewise copies each
 * col entry of a (sample, channel) from its input pixel by a table made
 * once per call (-1: padding, 0), rather than through the phase planes
 * whose tap reads straddle the stores that filled them (L4's forward:
 * 0.64 ms by the planes, GEMM 0.43 of it). Wider rows keep the
 * phase-split planes, where vector copies and adds win. */

#define GATHER_MAX 2048    /* table entries: 8 KiB of offsets on the stack */
#define GATHER_WOUT 8      /* outputs narrower than this are gathered */

struct gather_args {
	const struct geom *g;
	const float *col;
	size_t ldcol;
	float *dx;
	int b0, bc, zero;
	const int *start;        /* (h w + 1): pixel p's entries are [start[p], start[p+1]) */
	const int *off;
};

/* Fills the table (when given) and returns its size. */
static size_t gather_table(const struct geom *g, size_t ldcol, int *start, int *off)
{
	size_t e = 0;
	for (int y = 0; y < g->h; y++) {
		for (int x = 0; x < g->w; x++) {
			if (start)
				start[y * g->w + x] = (int)e;
			for (int ky = (y + g->ph) % g->sh; ky < g->kh; ky += g->sh) {
				int oy = (y + g->ph - ky) / g->sh;
				if (oy < 0 || oy >= g->hout)
					continue;
				for (int kx = (x + g->pw) % g->sw; kx < g->kw; kx += g->sw) {
					int ox = (x + g->pw - kx) / g->sw;
					if (ox < 0 || ox >= g->wout)
						continue;
					if (off)
						off[e] = (int)((size_t)(ky * g->kw + kx) * ldcol + (size_t)oy * g->wout + ox);
					e++;
				}
			}
		}
	}
	if (start)
		start[g->h * g->w] = (int)e;
	return e;
}

GF_CLONES static void col2im_gather_part(void *p, size_t b, size_t e)
{
	struct gather_args *a = p;
	const struct geom *g = a->g;
	size_t P = (size_t)g->hout * g->wout, HW = (size_t)g->h * g->w, khw = (size_t)g->kh * g->kw;
	for (size_t item = b; item < e; item++) {   /* item = bb * cin + c: one dx plane */
		int bb = (int)(item / (size_t)g->cin), c = (int)(item % (size_t)g->cin);
		const float *base = a->col + (size_t)c * khw * a->ldcol + (size_t)bb * P;
		float *plane = a->dx + ((size_t)(a->b0 + bb) * g->cin + c) * HW;
		for (size_t q = 0; q < HW; q++) {
			float v = 0.0f;
			for (int k = a->start[q]; k < a->start[q + 1]; k++)
				v += base[a->off[k]];
			plane[q] = a->zero ? v : plane[q] + v;
		}
	}
}

/* im2col's table: for tap r = ky kw + kx and output q = oy wout + ox, the
 * input pixel iy w + ix it reads, or -1 in the padding. */
static void im2col_table(const struct geom *g, int *src)
{
	for (int ky = 0; ky < g->kh; ky++)
		for (int kx = 0; kx < g->kw; kx++)
			for (int oy = 0; oy < g->hout; oy++)
				for (int ox = 0; ox < g->wout; ox++) {
					int iy = oy * g->sh - g->ph + ky, ix = ox * g->sw - g->pw + kx;
					*src++ = iy >= 0 && iy < g->h && ix >= 0 && ix < g->w ? iy * g->w + ix : -1;
				}
}

struct im2col_gather_args {
	const struct col_args *a;
	const int *src;
};

GF_CLONES static void im2col_gather_part(void *p, size_t b, size_t e)
{
	const struct im2col_gather_args *ga = p;
	const struct col_args *a = ga->a;
	const struct geom *g = a->g;
	size_t P = (size_t)g->hout * g->wout, khw = (size_t)g->kh * g->kw;
	for (size_t item = b; item < e; item++) {   /* item = c * bc + bb */
		int c = (int)(item / (size_t)a->bc), bb = (int)(item % (size_t)a->bc);
		const float *x = a->x + ((size_t)(a->b0 + bb) * g->cin + c) * g->h * g->w;
		for (size_t r = 0; r < khw; r++) {
			float *restrict dst = a->col + (c * khw + r) * a->ldcol + (size_t)bb * P;
			const int *s = ga->src + r * P;
			for (size_t q = 0; q < P; q++)
				dst[q] = s[q] >= 0 ? x[s[q]] : 0.0f;
		}
	}
}

/* Whether a geometry takes the gathers. */
static int use_gather(const struct geom *g, size_t ldcol)
{
	return (g->sh > 1 || g->sw > 1) && g->wout < GATHER_WOUT &&
	       (size_t)g->kh * g->kw * g->hout * g->wout <= GATHER_MAX && (size_t)g->h * g->w < GATHER_MAX &&
	       (size_t)g->kh * g->kw * ldcol < INT_MAX;
}

static void im2col(gf_cpu *c, const struct geom *g, float *col, size_t ldcol, const float *x, int b0, int bc)
{
	struct col_args a = { g, col, ldcol, NULL, x, b0, bc, 0 };
	int hp, wp;
	if (use_gather(g, ldcol)) {
		int src[GATHER_MAX];
		im2col_table(g, src);
		struct im2col_gather_args ga = { &a, src };
		gf_team_for(c->team, (size_t)g->cin * bc, 4, im2col_gather_part, &ga);
		return;
	}
	if (pad_dims(g, &hp, &wp)) {
		gf_team_for(c->team, (size_t)g->cin * bc, 4, im2col_plane_part, &a);
		return;
	}
	size_t rows = (size_t)g->cin * g->kh * g->kw * bc;
	gf_team_for(c->team, rows, 8, im2col_part, &a);
}

static inline void col2im_row(float *restrict dst, const float *restrict src, const struct geom *g, int kx)
{
	if (g->sw == 1) {
		int lo = g->pw - kx, hi = g->w + g->pw - kx;
		if (lo < 0)
			lo = 0;
		if (hi > g->wout)
			hi = g->wout;
		float *d = dst - g->pw + kx;
		for (int ox = lo; ox < hi; ox++)
			d[ox] += src[ox];
		return;
	}
	for (int ox = 0; ox < g->wout; ox++) {
		int ix = ox * g->sw - g->pw + kx;
		if (ix >= 0 && ix < g->w)
			dst[ix] += src[ox];
	}
}

GF_CLONES static void col2im_part(void *p, size_t b, size_t e)
{
	struct col_args *a = p;
	const struct geom *g = a->g;
	size_t P = (size_t)g->hout * g->wout;
	for (size_t item = b; item < e; item++) {   /* item = bb * cin + c: one dx plane */
		int bb = (int)(item / (size_t)g->cin), c = (int)(item % (size_t)g->cin);
		float *plane = a->xmut + ((size_t)(a->b0 + bb) * g->cin + c) * g->h * g->w;
		if (a->zero)
			memset(plane, 0, (size_t)g->h * g->w * sizeof(float));
		for (int ky = 0; ky < g->kh; ky++) {
			for (int kx = 0; kx < g->kw; kx++) {
				size_t r = ((size_t)c * g->kh + ky) * g->kw + kx;
				const float *src = a->col + r * a->ldcol + (size_t)bb * P;
				for (int oy = 0; oy < g->hout; oy++) {
					int iy = oy * g->sh - g->ph + ky;
					if (iy >= 0 && iy < g->h)
						col2im_row(plane + (size_t)iy * g->w, src + (size_t)oy * g->wout, g, kx);
				}
			}
		}
	}
}

static void col2im(gf_cpu *c, const struct geom *g, float *dx, const float *col, size_t ldcol, int b0,
                   int bc, int zero)
{
	struct col_args a = { g, (float *)col, ldcol, dx, NULL, b0, bc, zero };
	int hp, wp;
	if (use_gather(g, ldcol)) {   /* offsets are ints: within one channel's kh kw rows of col */
		size_t n = gather_table(g, ldcol, NULL, NULL);
		if (n <= GATHER_MAX) {
			int start[GATHER_MAX + 1], off[GATHER_MAX];
			gather_table(g, ldcol, start, off);
			struct gather_args ga = { g, col, ldcol, dx, b0, bc, zero, start, off };
			gf_team_for(c->team, (size_t)bc * g->cin, 4, col2im_gather_part, &ga);
			return;
		}
	}
	gf_team_for(c->team, (size_t)bc * g->cin, 4, pad_dims(g, &hp, &wp) ? col2im_plane_part : col2im_part, &a);
}

/* ---- layout moves between (cout, bc*P) matrices and NCHW ---- */

struct move_args {
	float *y;
	const float *tmp;      /* (cout, ld) or 4 phases of it */
	const float *bias;
	int b0, cout, h, w;    /* h, w: the size of one tmp plane (low-res for phases) */
	size_t ld, phase_stride;
	int bc;
};

/* y[b0+bb, co, :] = tmp[co, bb*P : (bb+1)*P] + bias[co] */
GF_CLONES static void scatter_part(void *p, size_t b, size_t e)
{
	struct move_args *a = p;
	size_t P = (size_t)a->h * a->w;
	for (size_t item = b; item < e; item++) {
		int bb = (int)(item / (size_t)a->cout), co = (int)(item % (size_t)a->cout);
		float *restrict y = a->y + ((size_t)(a->b0 + bb) * a->cout + co) * P;
		const float *restrict t = a->tmp + (size_t)co * a->ld + (size_t)bb * P;
		float bv = a->bias ? a->bias[co] : 0.0f;
		for (size_t i = 0; i < P; i++)
			y[i] = t[i] + bv;
	}
}

/* Interleaves the four phase outputs into y (n, cout, 2h, 2w) with the bias. */
GF_CLONES static void scatter4_part(void *p, size_t b, size_t e)
{
	struct move_args *a = p;
	size_t P = (size_t)a->h * a->w, W = 2 * (size_t)a->w;
	for (size_t item = b; item < e; item++) {
		int bb = (int)(item / (size_t)a->cout), co = (int)(item % (size_t)a->cout);
		float *y = a->y + ((size_t)(a->b0 + bb) * a->cout + co) * 4 * P;
		float bv = a->bias ? a->bias[co] : 0.0f;
		for (int i = 0; i < a->h; i++) {
			for (int pa = 0; pa < 2; pa++) {
				float *restrict row = y + (2 * (size_t)i + pa) * W;
				const float *restrict t0 = a->tmp + (size_t)(2 * pa) * a->phase_stride +
				                           (size_t)co * a->ld + (size_t)bb * P + (size_t)i * a->w;
				const float *restrict t1 = t0 + a->phase_stride;
				for (int j = 0; j < a->w; j++) {
					row[2 * j] = t0[j] + bv;
					row[2 * j + 1] = t1[j] + bv;
				}
			}
		}
	}
}

/* tmp[co, bb*P ...] = dy[b0+bb, co, :] */
static void gather_part(void *p, size_t b, size_t e)
{
	struct move_args *a = p;
	size_t P = (size_t)a->h * a->w;
	for (size_t item = b; item < e; item++) {
		int bb = (int)(item / (size_t)a->cout), co = (int)(item % (size_t)a->cout);
		memcpy((float *)a->tmp + (size_t)co * a->ld + (size_t)bb * P,
		       a->y + ((size_t)(a->b0 + bb) * a->cout + co) * P, P * sizeof(float));
	}
}

/* The four phases of dy (n, cout, 2h, 2w) into tmp[phase][co, bb*P ...]. */
GF_CLONES static void gather4_part(void *p, size_t b, size_t e)
{
	struct move_args *a = p;
	size_t P = (size_t)a->h * a->w, W = 2 * (size_t)a->w;
	for (size_t item = b; item < e; item++) {
		int bb = (int)(item / (size_t)a->cout), co = (int)(item % (size_t)a->cout);
		const float *dy = a->y + ((size_t)(a->b0 + bb) * a->cout + co) * 4 * P;
		for (int i = 0; i < a->h; i++) {
			for (int pa = 0; pa < 2; pa++) {
				const float *restrict row = dy + (2 * (size_t)i + pa) * W;
				float *restrict t0 = (float *)a->tmp + (size_t)(2 * pa) * a->phase_stride +
				                     (size_t)co * a->ld + (size_t)bb * P + (size_t)i * a->w;
				float *restrict t1 = t0 + a->phase_stride;
				for (int j = 0; j < a->w; j++) {
					t0[j] = row[2 * j];
					t1[j] = row[2 * j + 1];
				}
			}
		}
	}
}

/* ---- sub-pixel weights ---- */

/* Rows of the 3x3 kernel that phase row a, tap t sums (see the top). */
static const int tap_lo[2][2] = { { 0, 1 }, { 0, 2 } };
static const int tap_hi[2][2] = { { 0, 2 }, { 1, 2 } };

/* wp[phase][co][(c*2 + ty)*2 + tx] from w (cout, cin, 3, 3). */
static void phase_weights(float *wp, const float *w, int cout, int cin)
{
	size_t k4 = (size_t)cin * 4;
	for (int ph = 0; ph < 4; ph++) {
		int pa = ph >> 1, pb = ph & 1;
		for (int co = 0; co < cout; co++) {
			for (int c = 0; c < cin; c++) {
				const float *k = w + ((size_t)co * cin + c) * 9;
				float *o = wp + (size_t)ph * cout * k4 + (size_t)co * k4 + (size_t)c * 4;
				for (int ty = 0; ty < 2; ty++) {
					for (int tx = 0; tx < 2; tx++) {
						float s = 0;
						for (int ky = tap_lo[pa][ty]; ky <= tap_hi[pa][ty]; ky++)
							for (int kx = tap_lo[pb][tx]; kx <= tap_hi[pb][tx]; kx++)
								s += k[ky * 3 + kx];
						o[ty * 2 + tx] = s;
					}
				}
			}
		}
	}
}

/* dw (cout, cin, 3, 3) (+)= the phase gradients dwp folded back. */
static void fold_phase_grads(float *dw, const float *dwp, int cout, int cin, int accumulate)
{
	size_t k4 = (size_t)cin * 4;
	for (int co = 0; co < cout; co++) {
		for (int c = 0; c < cin; c++) {
			float *k = dw + ((size_t)co * cin + c) * 9;
			for (int ky = 0; ky < 3; ky++) {
				for (int kx = 0; kx < 3; kx++) {
					float s = 0;
					for (int ph = 0; ph < 4; ph++) {
						int pa = ph >> 1, pb = ph & 1;
						int ty = pa ? ky >= 2 : ky >= 1, tx = pb ? kx >= 2 : kx >= 1;
						s += dwp[(size_t)ph * cout * k4 + (size_t)co * k4 + (size_t)c * 4 + ty * 2 + tx];
					}
					k[ky * 3 + kx] = accumulate ? k[ky * 3 + kx] + s : s;
				}
			}
		}
	}
}

/* ---- direct kernels (few output channels, stride 1) ---- */

struct direct_args {
	const gf_conv_desc *d;
	float *out;
	const float *x, *w, *b, *dy;
	int acc;
};

/* acc[0..n) += v * src[0..n) */
static inline void axpy_row(float *restrict acc, const float *restrict src, float v, int n)
{
	for (int i = 0; i < n; i++)
		acc[i] += v * src[i];
}

/* Valid output columns for tap kx: ox in [lo, hi) reads column ox - pw + kx. */
static void tap_range(const gf_conv_desc *d, int kx, int *lo, int *hi)
{
	*lo = d->pw - kx > 0 ? d->pw - kx : 0;
	*hi = d->w + d->pw - kx < d->wout ? d->w + d->pw - kx : d->wout;
}

/* The common case of the direct kernels: a 3-wide kernel row, stride 1,
 * pad 1, output as wide as the input (n = w = wout). out[i] += w0 x[i-1] +
 * w1 x[i] + w2 x[i+1], with x[-1] = x[n] = 0. */
static inline void axpy3_row(float *restrict out, const float *restrict x, float w0, float w1, float w2, int n)
{
	if (n == 1) {
		out[0] += w1 * x[0];
		return;
	}
	out[0] += w1 * x[0] + w2 * x[1];
	for (int i = 1; i < n - 1; i++)
		out[i] += w0 * x[i - 1] + w1 * x[i] + w2 * x[i + 1];
	out[n - 1] += w0 * x[n - 2] + w1 * x[n - 1];
}

/* s[k] += sum_i dy[i] x[i - 1 + k], k = 0..2, x[-1] = x[n] = 0: the three
 * taps of one kernel row in one pass, 16 float lanes each, then double. */
static inline void dot3_row(const float *restrict dy, const float *restrict x, int n, double s[3])
{
	float a0[16] = { 0 }, a1[16] = { 0 }, a2[16] = { 0 };
	double t0 = 0, t1 = 0, t2 = 0;
	int i = 1;
	for (; i + 16 <= n - 1; i += 16)
		for (int l = 0; l < 16; l++) {
			a0[l] += dy[i + l] * x[i + l - 1];
			a1[l] += dy[i + l] * x[i + l];
			a2[l] += dy[i + l] * x[i + l + 1];
		}
	for (; i < n - 1; i++) {
		t0 += (double)dy[i] * x[i - 1];
		t1 += (double)dy[i] * x[i];
		t2 += (double)dy[i] * x[i + 1];
	}
	for (int l = 0; l < 16; l++) {
		t0 += a0[l];
		t1 += a1[l];
		t2 += a2[l];
	}
	/* the edges: i = 0 has no left neighbour, i = n - 1 no right one */
	t1 += (double)dy[0] * x[0];
	if (n > 1) {
		t2 += (double)dy[0] * x[1];
		t0 += (double)dy[n - 1] * x[n - 2];
		t1 += (double)dy[n - 1] * x[n - 1];
	}
	s[0] += t0;
	s[1] += t1;
	s[2] += t2;
}

static int three_same(const gf_conv_desc *d)
{
	return d->kw == 3 && d->pw == 1 && d->sw == 1 && d->w == d->wout;
}

GF_CLONES static void direct_fwd_part(void *p, size_t b, size_t e)
{
	struct direct_args *a = p;
	const gf_conv_desc *d = a->d;
	size_t P = (size_t)d->hout * d->wout, HW = (size_t)d->h * d->w;
	int cg = d->cin / gf_conv_groups(d), og = d->cout / gf_conv_groups(d);   /* channels per group */
	for (size_t item = b; item < e; item++) {
		int n = (int)(item / (size_t)d->cout), co = (int)(item % (size_t)d->cout);
		int c0 = co / og * cg;   /* the group's first input channel */
		float *y = a->out + item * P;
		float bv = a->b ? a->b[co] : 0.0f;
		for (size_t i = 0; i < P; i++)
			y[i] = bv;
		for (int c = 0; c < cg; c++) {
			const float *x = a->x + ((size_t)n * d->cin + c0 + c) * HW;
			const float *k = a->w + ((size_t)co * cg + c) * d->kh * d->kw;
			if (three_same(d)) {
				for (int ky = 0; ky < d->kh; ky++) {
					const float *kr = k + ky * 3;
					for (int oy = 0; oy < d->hout; oy++) {
						int iy = oy - d->ph + ky;
						if (iy >= 0 && iy < d->h)
							axpy3_row(y + (size_t)oy * d->wout, x + (size_t)iy * d->w, kr[0], kr[1], kr[2], d->w);
					}
				}
				continue;
			}
			for (int ky = 0; ky < d->kh; ky++) {
				for (int kx = 0; kx < d->kw; kx++) {
					int lo, hi;
					tap_range(d, kx, &lo, &hi);
					if (hi <= lo)
						continue;
					float v = k[ky * d->kw + kx];
					for (int oy = 0; oy < d->hout; oy++) {
						int iy = oy - d->ph + ky;
						if (iy < 0 || iy >= d->h)
							continue;
						axpy_row(y + (size_t)oy * d->wout + lo, x + (size_t)iy * d->w + lo - d->pw + kx, v, hi - lo);
					}
				}
			}
		}
	}
}

GF_CLONES static void direct_bwd_data_part(void *p, size_t b, size_t e)
{
	struct direct_args *a = p;
	const gf_conv_desc *d = a->d;
	size_t P = (size_t)d->hout * d->wout, HW = (size_t)d->h * d->w;
	int cg = d->cin / gf_conv_groups(d), og = d->cout / gf_conv_groups(d);
	for (size_t item = b; item < e; item++) {   /* item = n * cin + c */
		int n = (int)(item / (size_t)d->cin), c = (int)(item % (size_t)d->cin);
		int o0 = c / cg * og, ci = c % cg;   /* the group's outputs; c's place in the weight */
		float *dx = a->out + item * HW;
		memset(dx, 0, HW * sizeof(float));
		for (int co = o0; co < o0 + og; co++) {
			const float *dy = a->dy + ((size_t)n * d->cout + co) * P;
			const float *k = a->w + ((size_t)co * cg + ci) * d->kh * d->kw;
			if (three_same(d)) {
				/* dx[i] += sum_k w[k] dy[i + 1 - k]: the same 3-tap form, kernel reversed */
				for (int ky = 0; ky < d->kh; ky++) {
					const float *kr = k + ky * 3;
					for (int oy = 0; oy < d->hout; oy++) {
						int iy = oy - d->ph + ky;
						if (iy >= 0 && iy < d->h)
							axpy3_row(dx + (size_t)iy * d->w, dy + (size_t)oy * d->wout, kr[2], kr[1], kr[0], d->w);
					}
				}
				continue;
			}
			for (int ky = 0; ky < d->kh; ky++) {
				for (int kx = 0; kx < d->kw; kx++) {
					int lo, hi;
					tap_range(d, kx, &lo, &hi);
					if (hi <= lo)
						continue;
					float v = k[ky * d->kw + kx];
					for (int oy = 0; oy < d->hout; oy++) {
						int iy = oy - d->ph + ky;
						if (iy < 0 || iy >= d->h)
							continue;
						axpy_row(dx + (size_t)iy * d->w + lo - d->pw + kx, dy + (size_t)oy * d->wout + lo, v, hi - lo);
					}
				}
			}
		}
	}
}

/* Dot product of two rows in a fixed order (16 float lanes, then double). */
static inline double dot_row(const float *restrict a, const float *restrict b, int n)
{
	float acc[16] = { 0 };
	int i = 0;
	for (; i + 16 <= n; i += 16)
		for (int l = 0; l < 16; l++)
			acc[l] += a[i + l] * b[i + l];
	double s = 0;
	for (int l = 0; l < 16; l++)
		s += acc[l];
	for (; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

GF_CLONES static void direct_bwd_filter_part(void *p, size_t b, size_t e)
{
	struct direct_args *a = p;
	const gf_conv_desc *d = a->d;
	size_t P = (size_t)d->hout * d->wout, HW = (size_t)d->h * d->w;
	int cg = d->cin / gf_conv_groups(d), og = d->cout / gf_conv_groups(d);
	for (size_t item = b; item < e; item++) {   /* item = co * cin/g + c: one kernel of the weight */
		int co = (int)(item / (size_t)cg), c = co / og * cg + (int)(item % (size_t)cg);   /* c: x's channel */
		float *k = a->out + item * d->kh * d->kw;
		if (three_same(d)) {
			for (int ky = 0; ky < d->kh; ky++) {
				double s[3] = { 0, 0, 0 };
				for (int n = 0; n < d->n; n++) {
					const float *dy = a->dy + ((size_t)n * d->cout + co) * P;
					const float *x = a->x + ((size_t)n * d->cin + c) * HW;
					for (int oy = 0; oy < d->hout; oy++) {
						int iy = oy - d->ph + ky;
						if (iy >= 0 && iy < d->h)
							dot3_row(dy + (size_t)oy * d->wout, x + (size_t)iy * d->w, d->w, s);
					}
				}
				for (int kx = 0; kx < 3; kx++) {
					float *o = &k[ky * 3 + kx];
					*o = a->acc ? *o + (float)s[kx] : (float)s[kx];
				}
			}
			continue;
		}
		for (int ky = 0; ky < d->kh; ky++) {
			for (int kx = 0; kx < d->kw; kx++) {
				int lo, hi;
				tap_range(d, kx, &lo, &hi);
				double s = 0;
				for (int n = 0; n < d->n && hi > lo; n++) {
					const float *dy = a->dy + ((size_t)n * d->cout + co) * P;
					const float *x = a->x + ((size_t)n * d->cin + c) * HW;
					for (int oy = 0; oy < d->hout; oy++) {
						int iy = oy - d->ph + ky;
						if (iy >= 0 && iy < d->h)
							s += dot_row(dy + (size_t)oy * d->wout + lo,
							             x + (size_t)iy * d->w + lo - d->pw + kx, hi - lo);
					}
				}
				float *o = &k[ky * d->kw + kx];
				*o = a->acc ? *o + (float)s : (float)s;
			}
		}
	}
}

static int use_direct(const gf_conv_desc *d)
{
	int g = gf_conv_groups(d);
	return d->up == 1 && d->sh == 1 && d->sw == 1 &&
	       (d->cout <= DIRECT_MAX_COUT || (d->cout / g <= DIRECT_MAX_COUT && d->cin / g <= DIRECT_MAX_COUT));
}

/* ---- grouped products ---- */

/* The products C_j = op(A_j) op(B_j) + beta C_j of the g groups, X_j = X +
 * j sx: the dense convolution's one GEMM when g = 1 (its bits unchanged),
 * else one strided batch. */
static void group_gemm(gf_backend *be, int g, int ta, int tb, int m, int n, int k, const float *a, int lda, size_t sa,
                       const float *b, int ldb, size_t sb, float beta, float *c, int ldc, size_t sc)
{
	if (g == 1)
		(void)gf_cpu_gemm(be, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
	else
		(void)gf_cpu_gemm_batched(be, ta, tb, m, n, k, 1.0f, a, lda, (int64_t)sa, b, ldb, (int64_t)sb, beta, c, ldc,
		                          (int64_t)sc, g);
}

/* ---- forward ---- */

static int conv_forward_up2(gf_cpu *c, float *y, const float *x, const float *w, const float *b,
                            const gf_conv_desc *d)
{
	size_t P = (size_t)d->h * d->w, k4 = (size_t)d->cin * 4;
	int bc = chunk_samples(k4 * P, d->n);
	size_t ld = (size_t)bc * P;
	size_t nwp = 4 * (size_t)d->cout * k4, ncol = k4 * ld, ntmp = 4 * (size_t)d->cout * ld;
	float *s = gf_cpu_scratch(c, nwp + ncol + ntmp);
	if (!s)
		return -ENOMEM;
	float *wp = s, *col = wp + nwp, *tmp = col + ncol;
	phase_weights(wp, w, d->cout, d->cin);
	for (int b0 = 0; b0 < d->n; b0 += bc) {
		int nb = d->n - b0 < bc ? d->n - b0 : bc;
		size_t ldc = (size_t)nb * P;
		for (int ph = 0; ph < 4; ph++) {
			struct geom g = geom_phase(d, ph >> 1, ph & 1);
			im2col(c, &g, col, ldc, x, b0, nb);
			gf_cpu_gemm(&c->be, 0, 0, d->cout, (int)ldc, (int)k4, 1.0f, wp + (size_t)ph * d->cout * k4,
			            (int)k4, col, (int)ldc, 0.0f, tmp + (size_t)ph * d->cout * ldc, (int)ldc);
		}
		struct move_args m = { y, tmp, b, b0, d->cout, d->h, d->w, ldc, (size_t)d->cout * ldc, nb };
		gf_team_for(c->team, (size_t)nb * d->cout, 4, scatter4_part, &m);
	}
	return 0;
}

int gf_cpu_conv2d_forward(gf_backend *be, float *y, const float *x, const float *w, const float *b,
                          const gf_conv_desc *d)
{
	gf_cpu *c = gf_cpu_of(be);
	int rc = check_desc(d);
	if (rc)
		return rc;
	if (d->up == 2)
		return conv_forward_up2(c, y, x, w, b, d);
	if (use_direct(d)) {
		struct direct_args a = { d, y, x, w, b, NULL, 0 };
		gf_team_for(c->team, (size_t)d->n * d->cout, 1, direct_fwd_part, &a);
		return 0;
	}
	if (gf_cpu_winograd_ok(d))
		return gf_cpu_winograd_forward(be, y, x, w, b, d);
	struct geom g = geom_of(d);
	int G = gf_conv_groups(d), og = d->cout / G;
	size_t P = (size_t)d->hout * d->wout, K = (size_t)d->cin * d->kh * d->kw, Kg = K / (size_t)G;
	int pointwise = d->kh == 1 && d->kw == 1 && d->sh == 1 && d->sw == 1 && d->ph == 0 && d->pw == 0;
	if (pointwise && G == 1) {
		/* 1x1: x itself is the column matrix of each sample */
		for (int n = 0; n < d->n; n++)
			gf_cpu_gemm(be, 0, 0, d->cout, (int)P, d->cin, 1.0f, w, d->cin, x + (size_t)n * d->cin * P,
			            (int)P, 0.0f, y + (size_t)n * d->cout * P, (int)P);
		if (b)
			gf_cpu_bias_add(be, y, b, d->n, d->cout, (int)P);
		return 0;
	}
	int bc = chunk_samples(K * P, d->n);
	size_t ld = (size_t)bc * P;
	float *s = gf_cpu_scratch(c, K * ld + (bc > 1 ? (size_t)d->cout * ld : 0));
	if (!s)
		return -ENOMEM;
	float *col = s, *tmp = s + K * ld;
	for (int b0 = 0; b0 < d->n; b0 += bc) {
		int nb = d->n - b0 < bc ? d->n - b0 : bc;
		size_t ldc = (size_t)nb * P;
		im2col(c, &g, col, ldc, x, b0, nb);
		if (nb == 1) {
			/* one sample: the GEMM writes NCHW directly */
			float *yb = y + (size_t)b0 * d->cout * P;
			group_gemm(be, G, 0, 0, og, (int)P, (int)Kg, w, (int)Kg, og * Kg, col, (int)ldc, Kg * ldc, 0.0f, yb,
			           (int)P, og * P);
			if (b)
				gf_cpu_bias_add(be, yb, b, 1, d->cout, (int)P);
			continue;
		}
		group_gemm(be, G, 0, 0, og, (int)ldc, (int)Kg, w, (int)Kg, og * Kg, col, (int)ldc, Kg * ldc, 0.0f, tmp,
		           (int)ldc, og * ldc);
		struct move_args m = { y, tmp, b, b0, d->cout, d->hout, d->wout, ldc, 0, nb };
		gf_team_for(c->team, (size_t)nb * d->cout, 4, scatter_part, &m);
	}
	return 0;
}

/* ---- backward ---- */

static int conv_backward_up2(gf_cpu *c, float *dx, float *dw, const float *dy, const float *x,
                             const float *w, const gf_conv_desc *d, int accumulate)
{
	size_t P = (size_t)d->h * d->w, k4 = (size_t)d->cin * 4;
	int bc = chunk_samples(k4 * P, d->n);
	size_t ld = (size_t)bc * P;
	size_t nwp = 4 * (size_t)d->cout * k4, ncol = k4 * ld, ndy = 4 * (size_t)d->cout * ld;
	float *s = gf_cpu_scratch(c, 2 * nwp + ncol + ndy);
	if (!s)
		return -ENOMEM;
	float *wp = s, *dwp = wp + nwp, *col = dwp + nwp, *dyc = col + ncol;
	if (dx)
		phase_weights(wp, w, d->cout, d->cin);
	for (int b0 = 0; b0 < d->n; b0 += bc) {
		int nb = d->n - b0 < bc ? d->n - b0 : bc;
		size_t ldc = (size_t)nb * P;
		struct move_args m = { (float *)dy, dyc, NULL, b0, d->cout, d->h, d->w, ldc, (size_t)d->cout * ldc, nb };
		gf_team_for(c->team, (size_t)nb * d->cout, 4, gather4_part, &m);
		for (int ph = 0; ph < 4; ph++) {
			struct geom g = geom_phase(d, ph >> 1, ph & 1);
			const float *dyp = dyc + (size_t)ph * d->cout * ldc;
			if (dw) {
				im2col(c, &g, col, ldc, x, b0, nb);
				gf_cpu_gemm(&c->be, 0, 1, d->cout, (int)k4, (int)ldc, 1.0f, dyp, (int)ldc, col, (int)ldc,
				            b0 ? 1.0f : 0.0f, dwp + (size_t)ph * d->cout * k4, (int)k4);
			}
			if (dx) {
				gf_cpu_gemm(&c->be, 1, 0, (int)k4, (int)ldc, d->cout, 1.0f, wp + (size_t)ph * d->cout * k4,
				            (int)k4, dyp, (int)ldc, 0.0f, col, (int)ldc);
				col2im(c, &g, dx, col, ldc, b0, nb, ph == 0);
			}
		}
	}
	if (dw)
		fold_phase_grads(dw, dwp, d->cout, d->cin, accumulate);
	return 0;
}

/* dw (cout, K) (+)= dwt^T group by group, dwt (groups, K, og) with og =
 * cout / groups output channels and K kernel values per group: one item
 * per row of dw */
struct transpose_args {
	float *dw;
	const float *dwt;
	int og, K, acc;
};

static void transpose_add_part(void *p, size_t b, size_t e)
{
	struct transpose_args *t = p;
	for (size_t co = b; co < e; co++) {
		float *restrict row = t->dw + co * (size_t)t->K;
		const float *restrict col = t->dwt + co / (size_t)t->og * t->K * t->og + co % (size_t)t->og;
		for (int k = 0; k < t->K; k++)
			row[k] = t->acc ? row[k] + col[(size_t)k * t->og] : col[(size_t)k * t->og];
	}
}

int gf_cpu_conv2d_backward(gf_backend *be, float *dx, float *dw, float *db, const float *dy,
                           const float *x, const float *w, const gf_conv_desc *d, int accumulate)
{
	gf_cpu *c = gf_cpu_of(be);
	int rc = check_desc(d);
	if (rc)
		return rc;
	size_t P = (size_t)d->hout * d->wout, K = (size_t)d->cin * d->kh * d->kw;
	if (db)
		gf_cpu_bias_grad(be, db, dy, d->n, d->cout, (int)P, accumulate);
	if (!dx && !dw)
		return 0;
	if (d->up == 2)
		return conv_backward_up2(c, dx, dw, dy, x, w, d, accumulate);
	if (use_direct(d)) {
		struct direct_args a = { d, dx, x, w, NULL, dy, accumulate };
		if (dx)
			gf_team_for(c->team, (size_t)d->n * d->cin, 1, direct_bwd_data_part, &a);
		if (dw) {
			a.out = dw;
			gf_team_for(c->team, (size_t)d->cout * (d->cin / gf_conv_groups(d)), 1, direct_bwd_filter_part, &a);
		}
		return 0;
	}
	if (gf_cpu_winograd_ok(d))
		return gf_cpu_winograd_backward(be, dx, dw, dy, x, w, d, accumulate);
	struct geom g = geom_of(d);
	int G = gf_conv_groups(d), og = d->cout / G;
	size_t Kg = K / (size_t)G;   /* a group's kernel values: the weight's row length */
	int bc = chunk_samples(K * P, d->n);
	size_t ld = (size_t)bc * P;
	/* dW^T (K, cout) = col dy^T when K > cout: OpenBLAS runs the tall form
	 * of these thin products faster (the DC-GAN D's stride-2 convs: 0.49
	 * vs 0.73 ms at K = 144, cout = 32, N = 4096, one thread), then one
	 * transpose into dw (per group likewise) */
	int wt = dw && Kg > (size_t)og;
	size_t ndyc = bc > 1 ? (size_t)d->cout * ld : 0, nwt = wt ? Kg * d->cout : 0;
	float *s = gf_cpu_scratch(c, K * ld + ndyc + nwt);
	if (!s)
		return -ENOMEM;
	float *col = s, *dyc = s + K * ld, *dwt = dyc + ndyc;
	for (int b0 = 0; b0 < d->n; b0 += bc) {
		int nb = d->n - b0 < bc ? d->n - b0 : bc;
		size_t ldc = (size_t)nb * P;
		const float *dym;   /* (cout, ldc) */
		if (nb == 1) {
			dym = dy + (size_t)b0 * d->cout * P;   /* NCHW of one sample is already that */
		} else {
			struct move_args m = { (float *)dy, dyc, NULL, b0, d->cout, d->hout, d->wout, ldc, 0, nb };
			gf_team_for(c->team, (size_t)nb * d->cout, 16, gather_part, &m);
			dym = dyc;
		}
		if (dw) {
			im2col(c, &g, col, ldc, x, b0, nb);
			if (wt)
				group_gemm(be, G, 0, 1, (int)Kg, og, (int)ldc, col, (int)ldc, Kg * ldc, dym, (int)ldc, og * ldc,
				           b0 ? 1.0f : 0.0f, dwt, og, Kg * og);
			else
				group_gemm(be, G, 0, 1, og, (int)Kg, (int)ldc, dym, (int)ldc, og * ldc, col, (int)ldc, Kg * ldc,
				           b0 || accumulate ? 1.0f : 0.0f, dw, (int)Kg, og * Kg);
		}
		if (dx) {
			group_gemm(be, G, 1, 0, (int)Kg, (int)ldc, og, w, (int)Kg, og * Kg, dym, (int)ldc, og * ldc, 0.0f, col,
			           (int)ldc, Kg * ldc);
			col2im(c, &g, dx, col, ldc, b0, nb, 1);
		}
	}
	if (wt) {
		struct transpose_args t = { dw, dwt, og, (int)Kg, accumulate };
		gf_team_for(c->team, (size_t)d->cout, 8, transpose_add_part, &t);
	}
	return 0;
}
