/* Winograd F(2x2, 3x3) for the CPU backend's "same" 3x3 convolutions
 * (stride 1, padding 1, output as large as the input): the convolutions of
 * ResNet blocks (SNGAN, BigGAN), of Inception's 3x3 branches and of most
 * discriminators past their first layer.
 *
 * The output is cut into 2x2 tiles; tile t reads the 4x4 input patch
 * starting one pixel up and left of it. With the 4x4 transforms
 *
 *   V = B^T d B     (input patch d),   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
 *   U = G g G^T     (3x3 kernel g),    G   = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1]
 *   y = A^T M A     (2x2 output),      A^T = [1 1 1 0; 0 1 -1 -1]
 *
 * the convolution over channels becomes 16 independent GEMMs, one per
 * position xi of the 4x4 transformed tile: M[xi] (cout, tiles) =
 * U[xi] (cout, cin) V[xi] (cin, tiles). That is 16 multiplications per 4
 * outputs instead of 36: 2.25x fewer FLOPs than im2col, and the
 * transformed input (16 values per 4 pixels) is smaller than the im2col
 * matrix (9 per pixel).
 *
 * The backward is the exact adjoint of that computation, not a second
 * convolution: Z[xi] = (A dy A^T)[xi] per tile, then
 *   dU[xi] += Z[xi] V[xi]^T     weight gradient, folded back as dg = G^T dU G
 *   dV[xi]  = U[xi]^T Z[xi]     input gradient, then dx = sum over tiles of B dV B^T
 * so the weight gradient is a GEMM too (the im2col path's largest one).
 *
 * The batch is cut into chunks of samples whose transformed tiles fit a
 * fixed budget (independent of the thread count); the 16 GEMMs of a chunk
 * run as one strided batch (gemm_batched_cpu.c), each one SGEMM call over
 * the whole K, and every transform item (a sample's channel plane) is done
 * by one thread: results do not depend on the thread count. Compared with
 * im2col the results differ by float rounding only (the transforms add
 * and halve).
 *
 * Grouped convolutions (groups = g): the transformed input and output keep
 * their channels in order and U is (16, cout, cin/g), so group j's product
 * at position xi, M[xi][j's outputs] = U[xi][j's rows] V[xi][j's inputs],
 * is product b = xi g + j at b times one group's stride in U, V and M: one
 * batch of 16 g products. */
#include <errno.h>
#include <string.h>

#include <ganflow/err.h>

#include "cpu.h"

#define WG_BUDGET ((size_t)1 << 21)   /* floats of transformed tiles per chunk: 8 MiB */
#define WG_MAX_W 1024                 /* widest input: row buffers live on the stack */
#define WG_MIN_CH 8                   /* below, the transforms cost more than the GEMMs save */
#define WG_MAX_TW (WG_MAX_W / 2)

/* Where it pays (tests/bench/run layers, measured at batch 64, 2 threads):
 * planes of 12x12 and more; at 8x8 only with 256 channels or more (with
 * fewer the transforms and partial GEMMs cost what the FLOPs save). */
int gf_cpu_winograd_ok(const gf_conv_desc *d)
{
	/* channels: a group's (the GEMMs' sizes) */
	int g = gf_conv_groups(d), cg = d->cin / g, og = d->cout / g;
	int side = d->h < d->w ? d->h : d->w, ch = cg < og ? cg : og;
	return d->up == 1 && d->kh == 3 && d->kw == 3 && d->sh == 1 && d->sw == 1 && d->ph == 1 && d->pw == 1 &&
	       d->hout == d->h && d->wout == d->w && d->w <= WG_MAX_W && ch >= WG_MIN_CH &&
	       (side >= 12 || (side >= 8 && ch >= 256));
}

/* Tiles of one plane: th rows of tw. */
struct tiles {
	int h, w, th, tw;
	size_t T;
};

static struct tiles tiles_of(const gf_conv_desc *d)
{
	struct tiles t = { d->h, d->w, (d->h + 1) / 2, (d->w + 1) / 2, 0 };
	t.T = (size_t)t.th * t.tw;
	return t;
}

struct wg_args {
	struct tiles t;
	int ch;              /* channels of the plane kind this pass walks */
	int bc;              /* samples in the chunk */
	int b0;              /* first sample of the chunk */
	size_t nt;           /* bc * T: columns of every transformed matrix */
	size_t xi_stride;    /* floats between the 16 matrices: ch * nt */
	const float *src;    /* NCHW source (x or dy) or transformed (M or dV) */
	float *dst;          /* transformed (V or Z) or NCHW (y or dx) */
	const float *bias;
};

/* ---- input transform: V[xi][c][bb*T + t] = (B^T d B)[xi] ---- */

GF_NO_MEMCPY GF_CLONES static void input_part(void *p, size_t b, size_t e)
{
	const struct wg_args *a = p;
	const struct tiles *t = &a->t;
	int wp = 2 * t->tw + 2;   /* padded row: one zero left, one or two right */
	float r[4][WG_MAX_W + 4], q[4][WG_MAX_W + 4];
	for (size_t item = b; item < e; item++) {   /* item = bb * ch + c */
		int bb = (int)(item / (size_t)a->ch), c = (int)(item % (size_t)a->ch);
		const float *plane = a->src + ((size_t)(a->b0 + bb) * a->ch + c) * t->h * t->w;
		float *out = a->dst + (size_t)c * a->nt + (size_t)bb * t->T;
		for (int ty = 0; ty < t->th; ty++) {
			for (int k = 0; k < 4; k++) {   /* padded rows 2ty .. 2ty+3 = input rows 2ty-1 .. 2ty+2 */
				int iy = 2 * ty - 1 + k;
				float *row = r[k];
				if (iy < 0 || iy >= t->h) {
					for (int i = 0; i < wp; i++)
						row[i] = 0.0f;
					continue;
				}
				const float *s = plane + (size_t)iy * t->w;
				row[0] = 0.0f;
				for (int i = 0; i < t->w; i++)
					row[i + 1] = s[i];
				for (int i = t->w + 1; i < wp; i++)
					row[i] = 0.0f;
			}
			/* B^T along the rows */
			for (int i = 0; i < wp; i++) {
				q[0][i] = r[0][i] - r[2][i];
				q[1][i] = r[1][i] + r[2][i];
				q[2][i] = r[2][i] - r[1][i];
				q[3][i] = r[1][i] - r[3][i];
			}
			/* B along the columns of each tile, written per position xi */
			size_t base = (size_t)ty * t->tw;
			for (int k = 0; k < 4; k++) {
				const float *s = q[k];
				float *o0 = out + (size_t)(4 * k) * a->xi_stride + base, *o1 = o0 + a->xi_stride,
				      *o2 = o1 + a->xi_stride, *o3 = o2 + a->xi_stride;
				for (int tx = 0; tx < t->tw; tx++) {
					float s0 = s[2 * tx], s1 = s[2 * tx + 1], s2 = s[2 * tx + 2], s3 = s[2 * tx + 3];
					o0[tx] = s0 - s2;
					o1[tx] = s1 + s2;
					o2[tx] = s2 - s1;
					o3[tx] = s1 - s3;
				}
			}
		}
	}
}

/* ---- output transform: y = A^T M A (+ bias) ---- */

GF_NO_MEMCPY GF_CLONES static void output_part(void *p, size_t b, size_t e)
{
	const struct wg_args *a = p;
	const struct tiles *t = &a->t;
	float s[4][2][WG_MAX_TW], o[2][2][WG_MAX_TW];
	for (size_t item = b; item < e; item++) {   /* item = bb * ch + co */
		int bb = (int)(item / (size_t)a->ch), co = (int)(item % (size_t)a->ch);
		float *plane = a->dst + ((size_t)(a->b0 + bb) * a->ch + co) * t->h * t->w;
		const float *m = a->src + (size_t)co * a->nt + (size_t)bb * t->T;
		float bv = a->bias ? a->bias[co] : 0.0f;
		for (int ty = 0; ty < t->th; ty++) {
			size_t base = (size_t)ty * t->tw;
			for (int k = 0; k < 4; k++) {   /* A along the columns of row k */
				const float *m0 = m + (size_t)(4 * k) * a->xi_stride + base, *m1 = m0 + a->xi_stride,
				            *m2 = m1 + a->xi_stride, *m3 = m2 + a->xi_stride;
				for (int tx = 0; tx < t->tw; tx++) {
					s[k][0][tx] = m0[tx] + m1[tx] + m2[tx];
					s[k][1][tx] = m1[tx] - m2[tx] - m3[tx];
				}
			}
			for (int j = 0; j < 2; j++) {   /* A^T along the rows */
				for (int tx = 0; tx < t->tw; tx++) {
					o[0][j][tx] = s[0][j][tx] + s[1][j][tx] + s[2][j][tx] + bv;
					o[1][j][tx] = s[1][j][tx] - s[2][j][tx] - s[3][j][tx] + bv;
				}
			}
			for (int i = 0; i < 2 && 2 * ty + i < t->h; i++) {
				float *row = plane + (size_t)(2 * ty + i) * t->w;
				int full = t->w / 2;
				for (int tx = 0; tx < full; tx++) {
					row[2 * tx] = o[i][0][tx];
					row[2 * tx + 1] = o[i][1][tx];
				}
				if (t->w & 1)
					row[t->w - 1] = o[i][0][full];
			}
		}
	}
}

/* ---- output gradient transform: Z[xi][co][bb*T + t] = (A dy A^T)[xi] ---- */

GF_NO_MEMCPY GF_CLONES static void dy_part(void *p, size_t b, size_t e)
{
	const struct wg_args *a = p;
	const struct tiles *t = &a->t;
	float g[2][2][WG_MAX_TW], r[4][2][WG_MAX_TW];
	for (size_t item = b; item < e; item++) {   /* item = bb * ch + co */
		int bb = (int)(item / (size_t)a->ch), co = (int)(item % (size_t)a->ch);
		const float *plane = a->src + ((size_t)(a->b0 + bb) * a->ch + co) * t->h * t->w;
		float *out = a->dst + (size_t)co * a->nt + (size_t)bb * t->T;
		for (int ty = 0; ty < t->th; ty++) {
			for (int i = 0; i < 2; i++) {   /* g[i][j][tx] = dy[2ty+i][2tx+j], zero outside */
				if (2 * ty + i >= t->h) {
					memset(g[i][0], 0, (size_t)t->tw * sizeof(float));
					memset(g[i][1], 0, (size_t)t->tw * sizeof(float));
					continue;
				}
				const float *row = plane + (size_t)(2 * ty + i) * t->w;
				int full = t->w / 2;
				for (int tx = 0; tx < full; tx++) {
					g[i][0][tx] = row[2 * tx];
					g[i][1][tx] = row[2 * tx + 1];
				}
				if (t->w & 1) {
					g[i][0][full] = row[t->w - 1];
					g[i][1][full] = 0.0f;
				}
			}
			/* the rows of A g: (1,0), (1,1), (1,-1), (0,-1) */
			for (int j = 0; j < 2; j++) {
				for (int tx = 0; tx < t->tw; tx++) {
					float g0 = g[0][j][tx], g1 = g[1][j][tx];
					r[0][j][tx] = g0;
					r[1][j][tx] = g0 + g1;
					r[2][j][tx] = g0 - g1;
					r[3][j][tx] = -g1;
				}
			}
			/* then A along each row, written per position xi */
			size_t base = (size_t)ty * t->tw;
			for (int k = 0; k < 4; k++) {
				float *z0 = out + (size_t)(4 * k) * a->xi_stride + base, *z1 = z0 + a->xi_stride,
				      *z2 = z1 + a->xi_stride, *z3 = z2 + a->xi_stride;
				const float *c0 = r[k][0], *c1 = r[k][1];
				for (int tx = 0; tx < t->tw; tx++) {
					z0[tx] = c0[tx];
					z1[tx] = c0[tx] + c1[tx];
					z2[tx] = c0[tx] - c1[tx];
					z3[tx] = -c1[tx];
				}
			}
		}
	}
}

/* ---- input gradient transform: dx = sum over tiles of B dV B^T ----
 *
 * Tile row ty adds into padded rows 2ty .. 2ty+3; rows 2ty and 2ty+1 are
 * complete once it is done, so four accumulator rows roll down the plane. */

GF_NO_MEMCPY GF_CLONES static void dx_part(void *p, size_t b, size_t e)
{
	const struct wg_args *a = p;
	const struct tiles *t = &a->t;
	int wp = 2 * t->tw + 2;
	float acc[4][WG_MAX_W + 4], cq[4][4][WG_MAX_TW];
	for (size_t item = b; item < e; item++) {   /* item = bb * ch + c */
		int bb = (int)(item / (size_t)a->ch), c = (int)(item % (size_t)a->ch);
		float *plane = a->dst + ((size_t)(a->b0 + bb) * a->ch + c) * t->h * t->w;
		const float *dv = a->src + (size_t)c * a->nt + (size_t)bb * t->T;
		for (int q = 0; q < 4; q++)
			memset(acc[q], 0, (size_t)wp * sizeof(float));
		for (int ty = 0; ty < t->th; ty++) {
			size_t base = (size_t)ty * t->tw;
			/* B along the columns of each row k: cq[k][col][tx] */
			for (int k = 0; k < 4; k++) {
				const float *d0 = dv + (size_t)(4 * k) * a->xi_stride + base, *d1 = d0 + a->xi_stride,
				            *d2 = d1 + a->xi_stride, *d3 = d2 + a->xi_stride;
				for (int tx = 0; tx < t->tw; tx++) {
					cq[k][0][tx] = d0[tx];
					cq[k][1][tx] = d1[tx] - d2[tx] + d3[tx];
					cq[k][2][tx] = d2[tx] + d1[tx] - d0[tx];
					cq[k][3][tx] = -d3[tx];
				}
			}
			/* B along the rows, added into the patch; within one column of
			 * the patch, neighbouring tiles never touch the same value */
			for (int col = 0; col < 4; col++) {
				const float *k0 = cq[0][col], *k1 = cq[1][col], *k2 = cq[2][col], *k3 = cq[3][col];
				float *a0 = acc[0] + col, *a1 = acc[1] + col, *a2 = acc[2] + col, *a3 = acc[3] + col;
				for (int tx = 0; tx < t->tw; tx++) {
					a0[2 * tx] += k0[tx];
					a1[2 * tx] += k1[tx] - k2[tx] + k3[tx];
					a2[2 * tx] += k2[tx] + k1[tx] - k0[tx];
					a3[2 * tx] -= k3[tx];
				}
			}
			/* padded rows 2ty, 2ty+1 (input rows 2ty-1, 2ty) are complete */
			for (int i = 0; i < 2; i++) {
				int iy = 2 * ty - 1 + i;
				if (iy >= 0 && iy < t->h)
					memcpy(plane + (size_t)iy * t->w, acc[i] + 1, (size_t)t->w * sizeof(float));
			}
			memcpy(acc[0], acc[2], (size_t)wp * sizeof(float));
			memcpy(acc[1], acc[3], (size_t)wp * sizeof(float));
			memset(acc[2], 0, (size_t)wp * sizeof(float));
			memset(acc[3], 0, (size_t)wp * sizeof(float));
		}
		/* the rows below the last tile row: input row 2th - 1 when h is even */
		for (int i = 0; i < 2; i++) {
			int iy = 2 * t->th - 1 + i;
			if (iy < t->h)
				memcpy(plane + (size_t)iy * t->w, acc[i] + 1, (size_t)t->w * sizeof(float));
		}
	}
}

/* ---- kernel transforms ---- */

struct kernel_args {
	float *u;          /* (16, cout, cin) */
	float *w;          /* (cout, cin, 3, 3) */
	int cout, cin, acc;
};

/* U[xi][co][c] = (G g G^T)[xi] */
static void kernel_part(void *p, size_t b, size_t e)
{
	const struct kernel_args *a = p;
	size_t stride = (size_t)a->cout * a->cin;
	for (size_t item = b; item < e; item++) {   /* item = co * cin + c */
		const float *g = a->w + item * 9;
		float r[4][3], u[4][4];
		for (int j = 0; j < 3; j++) {
			r[0][j] = g[j];
			r[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
			r[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
			r[3][j] = g[6 + j];
		}
		for (int k = 0; k < 4; k++) {
			u[k][0] = r[k][0];
			u[k][1] = 0.5f * (r[k][0] + r[k][1] + r[k][2]);
			u[k][2] = 0.5f * (r[k][0] - r[k][1] + r[k][2]);
			u[k][3] = r[k][2];
		}
		for (int xi = 0; xi < 16; xi++)
			a->u[(size_t)xi * stride + item] = u[xi / 4][xi % 4];
	}
}

/* dw[co][c] (+)= G^T dU G */
static void kernel_grad_part(void *p, size_t b, size_t e)
{
	const struct kernel_args *a = p;
	size_t stride = (size_t)a->cout * a->cin;
	for (size_t item = b; item < e; item++) {
		float du[4][4], r[3][4];
		for (int xi = 0; xi < 16; xi++)
			du[xi / 4][xi % 4] = a->u[(size_t)xi * stride + item];
		for (int j = 0; j < 4; j++) {
			r[0][j] = du[0][j] + 0.5f * (du[1][j] + du[2][j]);
			r[1][j] = 0.5f * (du[1][j] - du[2][j]);
			r[2][j] = 0.5f * (du[1][j] + du[2][j]) + du[3][j];
		}
		float *g = a->w + item * 9;
		for (int k = 0; k < 3; k++) {
			float v[3] = { r[k][0] + 0.5f * (r[k][1] + r[k][2]), 0.5f * (r[k][1] - r[k][2]),
				       0.5f * (r[k][1] + r[k][2]) + r[k][3] };
			for (int j = 0; j < 3; j++)
				g[k * 3 + j] = a->acc ? g[k * 3 + j] + v[j] : v[j];
		}
	}
}

/* ---- the two ops ---- */

static int chunk_of(size_t per_sample, int n)
{
	size_t c = per_sample ? WG_BUDGET / per_sample : (size_t)n;
	if (c < 1)
		c = 1;
	return c > (size_t)n ? n : (int)c;
}

int gf_cpu_winograd_forward(gf_backend *be, float *y, const float *x, const float *w, const float *bias,
                            const gf_conv_desc *d)
{
	gf_cpu *c = gf_cpu_of(be);
	struct tiles t = tiles_of(d);
	int G = gf_conv_groups(d), cg = d->cin / G, og = d->cout / G;
	size_t nu = 16 * (size_t)d->cout * cg;
	int bc = chunk_of(16 * t.T * (size_t)(d->cin + d->cout), d->n);
	size_t nt_max = (size_t)bc * t.T;
	float *s = gf_cpu_scratch(c, nu + 16 * nt_max * (size_t)(d->cin + d->cout));
	if (!s)
		return -ENOMEM;
	float *u = s, *v = u + nu, *m = v + 16 * nt_max * d->cin;
	struct kernel_args ka = { u, (float *)w, d->cout, cg, 0 };
	gf_team_for(c->team, (size_t)d->cout * cg, 256, kernel_part, &ka);
	for (int b0 = 0; b0 < d->n; b0 += bc) {
		int nb = d->n - b0 < bc ? d->n - b0 : bc;
		size_t nt = (size_t)nb * t.T;
		struct wg_args in = { t, d->cin, nb, b0, nt, (size_t)d->cin * nt, x, v, NULL };
		gf_team_for(c->team, (size_t)nb * d->cin, 2, input_part, &in);
		int rc = gf_cpu_gemm_batched(be, 0, 0, og, (int)nt, cg, 1.0f, u, cg, (int64_t)og * cg, v, (int)nt,
		                             (int64_t)cg * nt, 0.0f, m, (int)nt, (int64_t)og * nt, 16 * G);
		if (rc)
			return rc;
		struct wg_args out = { t, d->cout, nb, b0, nt, (size_t)d->cout * nt, m, y, bias };
		gf_team_for(c->team, (size_t)nb * d->cout, 2, output_part, &out);
	}
	return 0;
}

int gf_cpu_winograd_backward(gf_backend *be, float *dx, float *dw, const float *dy, const float *x,
                             const float *w, const gf_conv_desc *d, int accumulate)
{
	gf_cpu *c = gf_cpu_of(be);
	struct tiles t = tiles_of(d);
	int G = gf_conv_groups(d), cg = d->cin / G, og = d->cout / G;
	size_t nu = 16 * (size_t)d->cout * cg;
	/* per sample: Z, plus V for the weight gradient, plus dV for the input's */
	size_t per = (size_t)d->cout + (dw ? (size_t)d->cin : 0) + (dx ? (size_t)d->cin : 0);
	int bc = chunk_of(16 * t.T * per, d->n);
	size_t nt_max = (size_t)bc * t.T;
	float *s = gf_cpu_scratch(c, (dx ? nu : 0) + (dw ? nu : 0) + 16 * nt_max * per);
	if (!s)
		return -ENOMEM;
	float *u = s, *du = u + (dx ? nu : 0), *z = du + (dw ? nu : 0);
	float *v = z + 16 * nt_max * d->cout, *dv = v + (dw ? 16 * nt_max * d->cin : 0);
	if (dx) {
		struct kernel_args ka = { u, (float *)w, d->cout, cg, 0 };
		gf_team_for(c->team, (size_t)d->cout * cg, 256, kernel_part, &ka);
	}
	for (int b0 = 0; b0 < d->n; b0 += bc) {
		int nb = d->n - b0 < bc ? d->n - b0 : bc;
		size_t nt = (size_t)nb * t.T;
		struct wg_args zt = { t, d->cout, nb, b0, nt, (size_t)d->cout * nt, dy, z, NULL };
		gf_team_for(c->team, (size_t)nb * d->cout, 2, dy_part, &zt);
		int rc = 0;
		if (dw) {
			struct wg_args in = { t, d->cin, nb, b0, nt, (size_t)d->cin * nt, x, v, NULL };
			gf_team_for(c->team, (size_t)nb * d->cin, 2, input_part, &in);
			rc = gf_cpu_gemm_batched(be, 0, 1, og, cg, (int)nt, 1.0f, z, (int)nt, (int64_t)og * nt, v, (int)nt,
			                         (int64_t)cg * nt, b0 ? 1.0f : 0.0f, du, cg, (int64_t)og * cg, 16 * G);
			if (rc)
				return rc;
		}
		if (dx) {
			rc = gf_cpu_gemm_batched(be, 1, 0, cg, (int)nt, og, 1.0f, u, cg, (int64_t)og * cg, z, (int)nt,
			                         (int64_t)og * nt, 0.0f, dv, (int)nt, (int64_t)cg * nt, 16 * G);
			if (rc)
				return rc;
			struct wg_args back = { t, d->cin, nb, b0, nt, (size_t)d->cin * nt, dv, dx, NULL };
			gf_team_for(c->team, (size_t)nb * d->cin, 2, dx_part, &back);
		}
	}
	if (dw) {
		struct kernel_args kg = { du, dw, d->cout, cg, accumulate };
		gf_team_for(c->team, (size_t)d->cout * cg, 256, kernel_grad_part, &kg);
	}
	return 0;
}
