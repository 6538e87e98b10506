/* CUDA kernels and launchers for every op that is neither a convolution
 * nor a batchnorm: fills and vector ops, bias, activations, upsampling,
 * dropout, pooling, softmax, embedding, random fills, losses, optimiser
 * updates (with fp16 loss scaling), sums of squares. The CPU versions of
 * the same ops are core/nn/cpu/ops_cpu.c; each kernel computes what its
 * CPU loop computes, in the same formula, so results agree to rounding
 * (and exactly where the CPU's result is a single rounding of the same
 * operations: random numbers, dropout masks, pooling indices).
 *
 * Every launcher takes the stream first and returns the launch error. */
#include <math.h>

#include "kernels.cuh"

/* ==== fills and vector ops ==== */

static __global__ void fill_kernel(float *x, size_t n, float v)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		x[i] = v;
}

static __global__ void axpy_kernel(float *y, const float *x, size_t n, float a)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		y[i] = a == 1.0f ? y[i] + x[i] : y[i] + a * x[i];
}

static __global__ void scale_kernel(float *x, size_t n, float a)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		x[i] *= a;
}

/* scale_kernel then axpy_kernel in one pass, rounded as they round (and as
 * the CPU's loops: -fmad=false, two products and a sum, no fused
 * multiply-add), so the CPU's bits */
static __global__ void ema_kernel(float *avg, const float *w, size_t n, float decay, float rest, const gf_cu_dyn *dyn)
{
	float d = GF_CU_DYN(dyn, ema.decay, decay), r = GF_CU_DYN(dyn, ema.rest, rest);
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		avg[i] = __fadd_rn(__fmul_rn(avg[i], d), __fmul_rn(r, w[i]));
}

static __global__ void copy2d_kernel(float *dst, size_t ldd, const float *src, size_t lds, size_t rows,
                                     size_t cols, int acc)
{
	size_t n = rows * cols;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		size_t r = i / cols, c = i - r * cols;
		float v = src[r * lds + c];
		dst[r * ldd + c] = acc ? dst[r * ldd + c] + v : v;
	}
}

extern "C" cudaError_t gf_cu_fill(cudaStream_t s, float *x, size_t n, float v)
{
	if (!n)
		return cudaSuccess;
	if (v == 0.0f)
		return cudaMemsetAsync(x, 0, n * sizeof(float), s);
	fill_kernel<<<gf_cu_grid(n, 4), GF_CU_THREADS, 0, s>>>(x, n, v);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_axpy_launch(cudaStream_t s, float *y, const float *x, size_t n, float a)
{
	if (!n)
		return cudaSuccess;
	axpy_kernel<<<gf_cu_grid(n, 4), GF_CU_THREADS, 0, s>>>(y, x, n, a);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_scale_launch(cudaStream_t s, float *x, size_t n, float a)
{
	if (!n)
		return cudaSuccess;
	scale_kernel<<<gf_cu_grid(n, 4), GF_CU_THREADS, 0, s>>>(x, n, a);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_ema_launch(cudaStream_t s, float *avg, const float *w, size_t n, float decay, float rest,
                                        const gf_cu_dyn *dyn)
{
	if (!n)
		return cudaSuccess;
	ema_kernel<<<gf_cu_grid(n, 4), GF_CU_THREADS, 0, s>>>(avg, w, n, decay, rest, dyn);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_copy2d_launch(cudaStream_t s, float *dst, size_t ldd, const float *src, size_t lds,
                                           size_t rows, size_t cols, int acc)
{
	if (!rows || !cols)
		return cudaSuccess;
	if (!acc)
		return cudaMemcpy2DAsync(dst, ldd * sizeof(float), src, lds * sizeof(float), cols * sizeof(float), rows,
		                         cudaMemcpyDeviceToDevice, s);
	copy2d_kernel<<<gf_cu_grid(rows * cols, 4), GF_CU_THREADS, 0, s>>>(dst, ldd, src, lds, rows, cols, acc);
	return cudaGetLastError();
}

/* ==== bias ==== */

static __global__ void bias_add_kernel(float *y, const float *b, size_t total, gf_cu_div hw, gf_cu_div c)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		uint32_t plane = gf_cu_divq(hw, (uint32_t)i);   /* i < 2^31: checked by the launcher */
		uint32_t ch = plane - gf_cu_divq(c, plane) * c.d;
		y[i] += b[ch];
	}
}

static __global__ void bias_add_kernel64(float *y, const float *b, size_t total, size_t hw, size_t c)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
		y[i] += b[(i / hw) % c];
}

extern "C" cudaError_t gf_cu_bias_add_launch(cudaStream_t s, float *y, const float *b, int n, int c, int hw)
{
	size_t total = (size_t)n * c * hw;
	if (!total)
		return cudaSuccess;
	if (total < ((size_t)1 << 31))
		bias_add_kernel<<<gf_cu_grid(total, 4), GF_CU_THREADS, 0, s>>>(y, b, total, gf_cu_div_make((uint32_t)hw),
		                                                               gf_cu_div_make((uint32_t)c));
	else
		bias_add_kernel64<<<gf_cu_grid(total, 4), GF_CU_THREADS, 0, s>>>(y, b, total, (size_t)hw, (size_t)c);
	return cudaGetLastError();
}

/* ---- per-channel sums in a fixed order ----
 * Channel ch of x (n, c, hw) has n*hw values; they are cut into chunks of
 * GF_CU_CHUNK consecutive values (in (sample, position) order); block
 * (chunk, ch) sums its chunk in double (each thread a fixed strided subset,
 * then the block tree), and a second kernel adds the chunks in order. */
extern "C" size_t gf_cu_chunks(size_t per_channel)
{
	size_t k = (per_channel + GF_CU_CHUNK - 1) / GF_CU_CHUNK;
	return k ? k : 1;
}

static __global__ void channel_part_kernel(double *part, const float *x, int c, uint32_t per, gf_cu_div hw)
{
	int ch = blockIdx.y;
	uint32_t e0 = blockIdx.x * GF_CU_CHUNK, e1 = min(per, e0 + GF_CU_CHUNK);
	double acc = 0;
	for (uint32_t e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
		uint32_t smp = gf_cu_divq(hw, e), pos = e - smp * hw.d;
		acc += x[((size_t)smp * c + ch) * hw.d + pos];
	}
	acc = gf_cu_block_sum(acc);
	if (threadIdx.x == 0)
		part[(size_t)ch * gridDim.x + blockIdx.x] = acc;
}

static __global__ void channel_final_kernel(float *out, const double *part, int c, int chunks, int acc)
{
	int ch = blockIdx.x * blockDim.x + threadIdx.x;
	if (ch >= c)
		return;
	double s = 0;
	for (int k = 0; k < chunks; k++)
		s += part[(size_t)ch * chunks + k];
	out[ch] = acc ? out[ch] + (float)s : (float)s;
}

extern "C" cudaError_t gf_cu_channel_sum(cudaStream_t s, float *out, double *part, const float *x, int n, int c,
                                         int hw, int acc)
{
	size_t per = (size_t)n * hw;
	if (per >= ((size_t)1 << 31) || c > 65535)
		return cudaErrorInvalidValue;
	unsigned chunks = (unsigned)gf_cu_chunks(per);
	dim3 grid(chunks, (unsigned)c);
	channel_part_kernel<<<grid, GF_CU_THREADS, 0, s>>>(part, x, c, (uint32_t)per, gf_cu_div_make((uint32_t)hw));
	channel_final_kernel<<<(c + 127) / 128, 128, 0, s>>>(out, part, c, (int)chunks, acc);
	return cudaGetLastError();
}

/* ==== activations ==== */

static __global__ void act_fwd_kernel(float *y, const float *x, size_t n, int act, float p)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		float v = x[i];
		switch (act) {
		case GF_ACT_RELU: v = v > 0.0f ? v : 0.0f; break;
		case GF_ACT_LRELU: v = v > 0.0f ? v : v * p; break;
		case GF_ACT_TANH: v = tanhf(v); break;
		case GF_ACT_SIGMOID: v = 1.0f / (1.0f + expf(-v)); break;
		default: break;
		}
		y[i] = v;
	}
}

static __global__ void act_bwd_kernel(float *dx, const float *dy, const float *y, size_t n, int act, float p)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		float g = dy[i], v = act == GF_ACT_NONE ? 0.0f : y[i];
		switch (act) {
		case GF_ACT_RELU: g = v > 0.0f ? g : 0.0f; break;
		case GF_ACT_LRELU: g = v > 0.0f ? g : g * p; break;
		case GF_ACT_TANH: g = g * (1.0f - v * v); break;
		case GF_ACT_SIGMOID: g = g * v * (1.0f - v); break;
		default: break;
		}
		dx[i] = g;
	}
}

extern "C" cudaError_t gf_cu_act_fwd_launch(cudaStream_t s, float *y, const float *x, size_t n, int act, float p)
{
	if (!n)
		return cudaSuccess;
	if (act == GF_ACT_NONE)
		return y == x ? cudaSuccess : cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, s);
	act_fwd_kernel<<<gf_cu_grid(n, 4), GF_CU_THREADS, 0, s>>>(y, x, n, act, p);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_act_bwd_launch(cudaStream_t s, float *dx, const float *dy, const float *y, size_t n,
                                            int act, float p)
{
	if (!n)
		return cudaSuccess;
	if (act == GF_ACT_NONE)
		return dx == dy ? cudaSuccess : cudaMemcpyAsync(dx, dy, n * sizeof(float), cudaMemcpyDeviceToDevice, s);
	act_bwd_kernel<<<gf_cu_grid(n, 4), GF_CU_THREADS, 0, s>>>(dx, dy, y, n, act, p);
	return cudaGetLastError();
}

/* ==== nearest upsampling ==== */

/* y (planes, h*s, w*s): one thread per output value. */
static __global__ void up_fwd_kernel(float *y, const float *x, size_t total, int h, int w, int sc)
{
	size_t W = (size_t)w * sc, H = (size_t)h * sc;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		size_t X = i % W, r = i / W, Y = r % H, pl = r / H;
		y[i] = x[(pl * h + Y / sc) * w + X / sc];
	}
}

/* dx (planes, h, w) = sum of each sc x sc block of dy, in the CPU's order. */
static __global__ void up_bwd_kernel(float *dx, const float *dy, size_t total, int h, int w, int sc)
{
	size_t W = (size_t)w * sc;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		size_t j = i % w, r = i / w, ii = r % h, pl = r / h;
		const float *d = dy + pl * (size_t)h * sc * W;
		float s = 0;
		for (int ki = 0; ki < sc; ki++)
			for (int kj = 0; kj < sc; kj++)
				s += d[(ii * sc + ki) * W + j * sc + kj];
		dx[i] = s;
	}
}

extern "C" cudaError_t gf_cu_up_fwd_launch(cudaStream_t s, float *y, const float *x, int planes, int h, int w, int sc)
{
	size_t total = (size_t)planes * h * w * sc * sc;
	if (!total)
		return cudaSuccess;
	up_fwd_kernel<<<gf_cu_grid(total, 4), GF_CU_THREADS, 0, s>>>(y, x, total, h, w, sc);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_up_bwd_launch(cudaStream_t s, float *dx, const float *dy, int planes, int h, int w, int sc)
{
	size_t total = (size_t)planes * h * w;
	if (!total)
		return cudaSuccess;
	up_bwd_kernel<<<gf_cu_grid(total, 2), GF_CU_THREADS, 0, s>>>(dx, dy, total, h, w, sc);
	return cudaGetLastError();
}

/* ==== dropout ==== */

/* mask[g] = keep_scale when gf_rng_u01(word g of the draw) >= p, else 0:
 * exactly the CPU's test on exactly the same Philox words. */
static __global__ void drop_mask_kernel(float *mask, size_t groups, float p, float keep, gf_rng r0,
                                        const gf_cu_dyn *dyn)
{
	gf_rng r = GF_CU_DYN(dyn, rng, r0);
	for (size_t g = blockIdx.x * (size_t)blockDim.x + threadIdx.x; g < groups; g += (size_t)gridDim.x * blockDim.x) {
		uint32_t w[4];
		gf_rng_block(w, r.seed, r.stream, r.offset + g / 4);
		mask[g] = gf_rng_u01(w[g % 4]) >= p ? keep : 0.0f;
	}
}

static __global__ void drop_apply_kernel(float *y, const float *x, const float *mask, size_t total, size_t group)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
		y[i] = x[i] * mask[group == 1 ? i : i / group];
}

extern "C" cudaError_t gf_cu_drop_fwd_launch(cudaStream_t s, float *y, float *mask, const float *x, size_t groups,
                                             size_t group, float p, float keep_scale, gf_rng rng,
                                             const gf_cu_dyn *dyn)
{
	if (!groups)
		return cudaSuccess;
	drop_mask_kernel<<<gf_cu_grid(groups, 2), GF_CU_THREADS, 0, s>>>(mask, groups, p, keep_scale, rng, dyn);
	drop_apply_kernel<<<gf_cu_grid(groups * group, 4), GF_CU_THREADS, 0, s>>>(y, x, mask, groups * group, group);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_drop_bwd_launch(cudaStream_t s, float *dx, const float *dy, const float *mask,
                                             size_t groups, size_t group)
{
	if (!groups)
		return cudaSuccess;
	drop_apply_kernel<<<gf_cu_grid(groups * group, 4), GF_CU_THREADS, 0, s>>>(dx, dy, mask, groups * group, group);
	return cudaGetLastError();
}

/* ==== pooling ==== */

static __global__ void pooling_fwd_kernel(float *y, int32_t *idx, const float *x, gf_pooling_desc d, size_t total)
{
	for (size_t o = blockIdx.x * (size_t)blockDim.x + threadIdx.x; o < total; o += (size_t)gridDim.x * blockDim.x) {
		int ox = (int)(o % d.wout), oy = (int)(o / d.wout % d.hout);
		size_t pl = o / ((size_t)d.wout * d.hout);
		const float *xp = x + pl * (size_t)d.h * d.w;
		float best = -INFINITY, sum = 0;
		int32_t arg = -1;
		int cnt = 0;
		for (int ky = 0; ky < d.kh; ky++) {
			int iy = oy * d.sh - d.ph + ky;
			if (iy < 0 || iy >= d.h)
				continue;
			for (int kx = 0; kx < d.kw; kx++) {
				int ix = ox * d.sw - d.pw + kx;
				if (ix < 0 || ix >= d.w)
					continue;
				float v = xp[iy * d.w + ix];
				sum += v;
				cnt++;
				if (arg < 0 || v > best || isnan(v)) {   /* PyTorch: a NaN wins */
					best = v;
					arg = iy * d.w + ix;
				}
			}
		}
		if (d.max) {
			y[o] = best;
			idx[o] = arg;
		} else {
			y[o] = sum / (float)(d.exclude_pad ? cnt : d.kh * d.kw);
		}
	}
}

/* Window positions of output (oy, ox) inside the input (count_include_pad = False). */
static __device__ int pool_count(const gf_pooling_desc &d, int oy, int ox)
{
	int y0 = oy * d.sh - d.ph, x0 = ox * d.sw - d.pw;
	int y1 = min(y0 + d.kh, d.h), x1 = min(x0 + d.kw, d.w);
	return (y1 - max(y0, 0)) * (x1 - max(x0, 0));
}

/* One thread per input value: the outputs whose window covers it, in
 * ascending order (the order in which the CPU adds them). */
static __global__ void pooling_bwd_kernel(float *dx, const float *dy, const int32_t *idx, gf_pooling_desc d, size_t total)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		int ix = (int)(i % d.w), iy = (int)(i / d.w % d.h);
		size_t pl = i / ((size_t)d.w * d.h);
		const float *g = dy + pl * (size_t)d.hout * d.wout;
		const int32_t *id = idx ? idx + pl * (size_t)d.hout * d.wout : NULL;
		/* oy*sh - ph <= iy <= oy*sh - ph + kh - 1 */
		int oy0 = iy + d.ph - d.kh + 1, oy1 = iy + d.ph;
		oy0 = oy0 <= 0 ? 0 : (oy0 + d.sh - 1) / d.sh;
		oy1 = oy1 < 0 ? -1 : oy1 / d.sh;
		int ox0 = ix + d.pw - d.kw + 1, ox1 = ix + d.pw;
		ox0 = ox0 <= 0 ? 0 : (ox0 + d.sw - 1) / d.sw;
		ox1 = ox1 < 0 ? -1 : ox1 / d.sw;
		if (oy1 >= d.hout)
			oy1 = d.hout - 1;
		if (ox1 >= d.wout)
			ox1 = d.wout - 1;
		float inv = 1.0f / (float)(d.kh * d.kw), s = 0;
		int self = iy * d.w + ix;
		for (int oy = oy0; oy <= oy1; oy++)
			for (int ox = ox0; ox <= ox1; ox++) {
				int o = oy * d.wout + ox;
				if (d.max) {
					if (id[o] == self)
						s += g[o];
				} else {
					s += g[o] * (d.exclude_pad ? 1.0f / (float)pool_count(d, oy, ox) : inv);
				}
			}
		dx[i] = s;
	}
}

extern "C" cudaError_t gf_cu_pooling_fwd_launch(cudaStream_t s, float *y, int32_t *idx, const float *x, gf_pooling_desc d)
{
	size_t total = (size_t)d.n * d.c * d.hout * d.wout;
	if (!total)
		return cudaSuccess;
	pooling_fwd_kernel<<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>(y, idx, x, d, total);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_pooling_bwd_launch(cudaStream_t s, float *dx, const float *dy, const int32_t *idx,
                                             gf_pooling_desc d)
{
	size_t total = (size_t)d.n * d.c * d.h * d.w;
	if (!total)
		return cudaSuccess;
	pooling_bwd_kernel<<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>(dx, dy, d.max ? idx : NULL, d, total);
	return cudaGetLastError();
}

/* ==== softmax (one thread per row, the CPU's formula) ==== */

static __global__ void softmax_fwd_kernel(float *y, const float *x, int rows, int cols)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	if (r >= rows)
		return;
	const float *xr = x + (size_t)r * cols;
	float *yr = y + (size_t)r * cols;
	float m = -INFINITY;
	for (int j = 0; j < cols; j++)
		m = xr[j] > m ? xr[j] : m;
	double s = 0;
	for (int j = 0; j < cols; j++) {
		yr[j] = expf(xr[j] - m);
		s += yr[j];
	}
	float inv = (float)(1.0 / s);
	for (int j = 0; j < cols; j++)
		yr[j] *= inv;
}

static __global__ void softmax_bwd_kernel(float *dx, const float *dy, const float *y, int rows, int cols)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	if (r >= rows)
		return;
	size_t o = (size_t)r * cols;
	double s = 0;
	for (int j = 0; j < cols; j++)
		s += (double)dy[o + j] * y[o + j];
	for (int j = 0; j < cols; j++)
		dx[o + j] = y[o + j] * (dy[o + j] - (float)s);
}

extern "C" cudaError_t gf_cu_softmax_fwd_launch(cudaStream_t s, float *y, const float *x, int rows, int cols)
{
	if (rows <= 0 || cols <= 0)
		return cudaSuccess;
	softmax_fwd_kernel<<<(rows + 127) / 128, 128, 0, s>>>(y, x, rows, cols);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_softmax_bwd_launch(cudaStream_t s, float *dx, const float *dy, const float *y, int rows,
                                                int cols)
{
	if (rows <= 0 || cols <= 0)
		return cudaSuccess;
	softmax_bwd_kernel<<<(rows + 127) / 128, 128, 0, s>>>(dx, dy, y, rows, cols);
	return cudaGetLastError();
}

/* ==== embedding ==== */

static __global__ void emb_fwd_kernel(float *y, const float *table, const int32_t *idx, int n, int dim, int num,
                                      gf_cu_status *st)
{
	size_t total = (size_t)n * dim;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		size_t r = i / dim, j = i - r * dim;
		int k = idx[r];
		if (k < 0 || k >= num) {
			if (j == 0)
				gf_cu_record_err(st, r, GF_CU_ERR_EMB_LABEL);
			y[i] = 0.0f;
			continue;
		}
		y[i] = table[(size_t)k * dim + j];
	}
}

/* dtable[r, j] (+)= dy[i, j] for every i with idx[i] == r, in index order
 * (each output gathers its rows: no atomics, the CPU's order). */
static __global__ void emb_bwd_kernel(float *dt, const float *dy, const int32_t *idx, int n, int dim, int num, int acc)
{
	size_t total = (size_t)num * dim;
	for (size_t o = blockIdx.x * (size_t)blockDim.x + threadIdx.x; o < total; o += (size_t)gridDim.x * blockDim.x) {
		int r = (int)(o / dim);
		size_t j = o - (size_t)r * dim;
		float s = acc ? dt[o] : 0.0f;
		for (int i = 0; i < n; i++)
			if (idx[i] == r)
				s += dy[(size_t)i * dim + j];
		dt[o] = s;
	}
}

extern "C" cudaError_t gf_cu_emb_fwd_launch(cudaStream_t s, float *y, const float *table, const int32_t *idx, int n,
                                            int dim, int num, gf_cu_status *st)
{
	size_t total = (size_t)n * dim;
	if (!total)
		return cudaSuccess;
	emb_fwd_kernel<<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>(y, table, idx, n, dim, num, st);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_emb_bwd_launch(cudaStream_t s, float *dtable, const float *dy, const int32_t *idx, int n,
                                            int dim, int num, int acc)
{
	size_t total = (size_t)num * dim;
	if (!total)
		return cudaSuccess;
	emb_bwd_kernel<<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>(dtable, dy, idx, n, dim, num, acc);
	return cudaGetLastError();
}

/* ==== random fills ==== */

/* <ganflow/rng.h>'s normal transform, in the same double operations
 * (rng.c's normal_lane). */
static __device__ __forceinline__ float normal_lane(const uint32_t w[4], unsigned lane)
{
	unsigned p = lane & 2u;
	double u1 = ((double)w[p] + 0.5) * (1.0 / 4294967296.0);
	double u2 = ((double)w[p + 1] + 0.5) * (1.0 / 4294967296.0);
	double r = sqrt(-2.0 * log(u1));
	double a = 6.283185307179586476925 * u2;
	return (float)((lane & 1u) ? r * sin(a) : r * cos(a));
}

/* One thread per Philox block (four consecutive elements). The final
 * scale-and-shift is rounded step by step (no fused multiply-add), as the
 * host computes it. */
static __global__ void rng_kernel(float *out, size_t n, float a, float b, int normal, gf_rng r0, const gf_cu_dyn *dyn)
{
	gf_rng r = GF_CU_DYN(dyn, rng, r0);
	size_t nb = (n + 3) / 4;
	for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < nb; k += (size_t)gridDim.x * blockDim.x) {
		uint32_t w[4];
		gf_rng_block(w, r.seed, r.stream, r.offset + k);
		for (unsigned l = 0; l < 4 && 4 * k + l < n; l++) {
			float v;
			if (normal)
				v = __fadd_rn(a, __fmul_rn(b, normal_lane(w, l)));
			else
				v = __fadd_rn(a, __fmul_rn(__fsub_rn(b, a), gf_rng_u01(w[l])));
			out[4 * k + l] = v;
		}
	}
}

extern "C" cudaError_t gf_cu_rng_launch(cudaStream_t s, float *out, size_t n, float a, float b, int normal, gf_rng rng,
                                        const gf_cu_dyn *dyn)
{
	if (!n)
		return cudaSuccess;
	rng_kernel<<<gf_cu_grid((n + 3) / 4), GF_CU_THREADS, 0, s>>>(out, n, a, b, normal, rng, dyn);
	return cudaGetLastError();
}

/* ==== losses ==== */

#define LOSS_BLOCKS_MAX 1024u

static unsigned loss_blocks(const gf_loss_desc *d)
{
	size_t items = d->kind == GF_LOSS_CE ? (size_t)d->n : (size_t)d->n * (size_t)d->k;
	size_t b = (items + GF_CU_THREADS - 1) / GF_CU_THREADS;
	if (b < 1)
		b = 1;
	return b > LOSS_BLOCKS_MAX ? LOSS_BLOCKS_MAX : (unsigned)b;
}

extern "C" size_t gf_cu_loss_parts(const gf_loss_desc *d)
{
	return loss_blocks(d);
}

static __device__ __forceinline__ float clamp_log(float v)
{
	float l = logf(v);
	return l < -100.0f ? -100.0f : l;
}

/* Element-wise losses: ops_cpu.c's gf_cpu_loss, element i. */
static __global__ void loss_kernel(double *part, float *dx, const float *x, const float *target, gf_loss_desc d0,
                                   const gf_cu_dyn *dyn, gf_cu_status *st, int scale_grad)
{
	float tconst = GF_CU_DYN(dyn, loss.target, d0.target), sc = GF_CU_DYN(dyn, loss.scale, d0.scale);
	size_t n = (size_t)d0.n * (size_t)d0.k;
	float inv = sc / (float)n;
	float lscale = scale_grad ? st->scale : 1.0f;
	double acc = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		float v = x[i];
		float t = target ? target[i] : tconst;
		double l = 0;
		float g = 0;
		switch (d0.kind) {
		case GF_LOSS_NONSAT:
			t = 1.0f;
			/* fall through */
		case GF_LOSS_BCE:
			/* recorded for the next sync, and a NaN loss for a reader that
			 * never syncs (loss_dev read later: the non-finite check) */
			if (isnan(v)) {
				gf_cu_record_err(st, i, GF_CU_ERR_BCE_NAN);
				l = __longlong_as_double(0x7ff8000000000000ll);
				break;
			}
			if (!(v >= 0.0f && v <= 1.0f)) {
				gf_cu_record_err(st, i, GF_CU_ERR_BCE_RANGE);
				l = __longlong_as_double(0x7ff8000000000000ll);
				break;
			}
			l = -((double)t * clamp_log(v) + (1.0 - t) * clamp_log(1.0f - v));
			{
				float den = (1.0f - v) * v;
				g = (v - t) / (den > 1e-12f ? den : 1e-12f);
			}
			break;
		case GF_LOSS_NONSAT_LOGITS:
			t = 1.0f;
			/* fall through */
		case GF_LOSS_BCE_LOGITS: {
			float mx = v < 0.0f ? -v : 0.0f;
			l = (1.0 - t) * v + mx + log(exp((double)-mx) + exp((double)(-v - mx)));
			g = 1.0f / (1.0f + expf(-v)) - t;
			break;
		}
		case GF_LOSS_HINGE_D: {
			float m = 1.0f - t * v;
			l = m > 0.0f ? m : 0.0f;
			g = m > 0.0f ? -t : 0.0f;
			break;
		}
		case GF_LOSS_HINGE_G:
			l = -v;
			g = -1.0f;
			break;
		case GF_LOSS_WGAN:
			l = -t * v;
			g = -t;
			break;
		case GF_LOSS_LS:
			l = (double)(v - t) * (v - t);
			g = 2.0f * (v - t);
			break;
		case GF_LOSS_L1:
			l = fabsf(v - t);
			g = v > t ? 1.0f : v < t ? -1.0f : 0.0f;
			break;
		default:
			break;
		}
		acc += l;
		if (dx)
			dx[i] = scale_grad ? (g * inv) * lscale : g * inv;
	}
	acc = gf_cu_block_sum(acc);
	if (threadIdx.x == 0)
		part[blockIdx.x] = acc;
}

/* Softmax cross-entropy, one thread per row. */
static __global__ void ce_kernel(double *part, float *dx, const float *x, const int32_t *labels, gf_loss_desc d0,
                                 const gf_cu_dyn *dyn, gf_cu_status *st, int scale_grad)
{
	float sc = GF_CU_DYN(dyn, loss.scale, d0.scale);
	float inv = sc / (float)d0.n;
	float lscale = scale_grad ? st->scale : 1.0f;
	double acc = 0;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < d0.n; i += gridDim.x * blockDim.x) {
		const float *r = x + (size_t)i * d0.k;
		int y = labels[i];
		if (y < 0 || y >= d0.k) {
			gf_cu_record_err(st, (unsigned long long)i, GF_CU_ERR_CE_LABEL);
			acc += __longlong_as_double(0x7ff8000000000000ll);   /* NaN: see loss_kernel */
			continue;
		}
		float m = -INFINITY;
		for (int j = 0; j < d0.k; j++)
			m = r[j] > m ? r[j] : m;
		double z = 0;
		for (int j = 0; j < d0.k; j++)
			z += exp((double)r[j] - m);
		double lse = m + log(z);
		acc += lse - r[y];
		if (dx) {
			for (int j = 0; j < d0.k; j++) {
				float sm = (float)exp((double)r[j] - lse);
				float g = (sm - (j == y ? 1.0f : 0.0f)) * inv;
				dx[(size_t)i * d0.k + j] = scale_grad ? g * lscale : g;
			}
		}
	}
	acc = gf_cu_block_sum(acc);
	if (threadIdx.x == 0)
		part[blockIdx.x] = acc;
}

/* R3GAN's relativistic pairs: ops_cpu.c's, pair i = (x_i, x_{i + h}). */
static __global__ void rp_kernel(double *part, float *dx, const float *x, size_t h, gf_loss_desc d0,
                                 const gf_cu_dyn *dyn, gf_cu_status *st, int scale_grad)
{
	float t = GF_CU_DYN(dyn, loss.target, d0.target), sc = GF_CU_DYN(dyn, loss.scale, d0.scale);
	float inv = sc / (float)h;
	float lscale = scale_grad ? st->scale : 1.0f;
	double acc = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < h; i += (size_t)gridDim.x * blockDim.x) {
		float z = -t * (x[i] - x[i + h]);
		acc += (z > 0 ? z : 0.0) + log1p(exp(-fabs((double)z)));
		if (dx) {
			float sg = 1.0f / (1.0f + expf(-z));
			float ga = -t * sg * inv, gb = t * sg * inv;
			dx[i] = scale_grad ? ga * lscale : ga;
			dx[i + h] = scale_grad ? gb * lscale : gb;
		}
	}
	acc = gf_cu_block_sum(acc);
	if (threadIdx.x == 0)
		part[blockIdx.x] = acc;
}

/* *out = (float)(sum / count) * scale, partials added in a fixed order. */
static __global__ void loss_final_kernel(float *out, const double *part, int nparts, double count, gf_loss_desc d0,
                                         const gf_cu_dyn *dyn)
{
	float sc = GF_CU_DYN(dyn, loss.scale, d0.scale);
	double s = 0;
	for (int i = threadIdx.x; i < nparts; i += blockDim.x)
		s += part[i];
	s = gf_cu_block_sum(s);
	if (threadIdx.x == 0)
		*out = (float)(s / count) * sc;
}

extern "C" cudaError_t gf_cu_loss_launch(cudaStream_t s, float *out, float *dx, double *part, const float *x,
                                         const float *target, const int32_t *labels, gf_loss_desc d,
                                         const gf_cu_dyn *dyn, gf_cu_status *st, int scale_grad)
{
	unsigned nb = loss_blocks(&d);
	double count;
	if (d.kind == GF_LOSS_CE) {
		ce_kernel<<<nb, GF_CU_THREADS, 0, s>>>(part, dx, x, labels, d, dyn, st, scale_grad);
		count = (double)d.n;
	} else if (d.kind == GF_LOSS_RELATIVISTIC) {
		size_t h = (size_t)d.n * (size_t)d.k / 2;
		rp_kernel<<<nb, GF_CU_THREADS, 0, s>>>(part, dx, x, h, d, dyn, st, scale_grad);
		count = (double)h;
	} else {
		loss_kernel<<<nb, GF_CU_THREADS, 0, s>>>(part, dx, x, target, d, dyn, st, scale_grad);
		count = (double)d.n * (double)d.k;
	}
	loss_final_kernel<<<1, GF_CU_THREADS, 0, s>>>(out, part, (int)nb, count, d, dyn);
	return cudaGetLastError();
}

/* ==== sums of squares (gradient norms) ==== */

#define SUMSQ_BLOCK 8192

extern "C" size_t gf_cu_sumsq_parts(size_t n)
{
	size_t b = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
	return b ? b : 1;
}

static __global__ void sumsq_part_kernel(double *part, const float *x, size_t n, int squares)
{
	size_t i0 = (size_t)blockIdx.x * SUMSQ_BLOCK, i1 = i0 + SUMSQ_BLOCK < n ? i0 + SUMSQ_BLOCK : n;
	double acc = 0;
	for (size_t i = i0 + threadIdx.x; i < i1; i += blockDim.x)
		acc += squares ? (double)x[i] * x[i] : (double)x[i];
	acc = gf_cu_block_sum(acc);
	if (threadIdx.x == 0)
		part[blockIdx.x] = acc;
}

static __global__ void sum_final_kernel(double *out, const double *part, size_t nparts)
{
	double s = 0;
	for (size_t i = threadIdx.x; i < nparts; i += blockDim.x)
		s += part[i];
	s = gf_cu_block_sum(s);
	if (threadIdx.x == 0)
		*out = s;
}

extern "C" cudaError_t gf_cu_reduce_launch(cudaStream_t s, double *out, double *part, const float *x, size_t n,
                                           int squares)
{
	size_t nb = gf_cu_sumsq_parts(n);
	if (nb > 0x7fffffffu)
		return cudaErrorInvalidValue;
	if (n)
		sumsq_part_kernel<<<(unsigned)nb, GF_CU_THREADS, 0, s>>>(part, x, n, squares);
	sum_final_kernel<<<1, GF_CU_THREADS, 0, s>>>(out, part, n ? nb : 0);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_sumsq_launch(cudaStream_t s, double *out, double *part, const float *x, size_t n)
{
	return gf_cu_reduce_launch(s, out, part, x, n, 1);
}

/* ==== optimisers (ops_cpu.c's adam_part and sgd_part, element i) ==== */

static __global__ void adam_kernel(float *w, const float *g, float *state, size_t n, gf_optim_args a0,
                                   const gf_cu_dyn *dyn, const gf_cu_status *st, int unscale)
{
	if (st && st->found_inf)
		return;   /* fp16: this update overflowed, skip it */
	gf_optim_args a = GF_CU_DYN(dyn, optim, a0);
	float inv = st && unscale ? 1.0f / st->scale : 1.0f;
	float *m = state, *v = state + n;
	float *gp = a.kind == GF_OPT_OADAM ? state + 2 * n : NULL;
	float b1 = a.beta1, b2 = a.beta2, c1 = 1.0f - b1, c2 = 1.0f - b2;
	float step = a.step_size, bc2s = a.bc2_sqrt, eps = a.eps, wd = a.weight_decay;
	float decay = a.decoupled ? 1.0f - a.lr * wd : 1.0f;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		float gi = st ? g[i] * inv : g[i];
		if (gp) {
			float cur = gi;
			gi = 2.0f * cur - gp[i];
			gp[i] = cur;
		}
		if (wd != 0.0f) {
			if (a.decoupled)
				w[i] *= decay;
			else
				gi += wd * w[i];
		}
		m[i] = m[i] * b1 + c1 * gi;
		v[i] = v[i] * b2 + c2 * gi * gi;
		float den = sqrtf(v[i]) / bc2s + eps;
		w[i] -= step * (m[i] / den);
	}
}

static __global__ void sgd_kernel(float *w, const float *g, float *buf, size_t n, gf_optim_args a0,
                                  const gf_cu_dyn *dyn, const gf_cu_status *st, int unscale)
{
	if (st && st->found_inf)
		return;
	gf_optim_args a = GF_CU_DYN(dyn, optim, a0);
	float inv = st && unscale ? 1.0f / st->scale : 1.0f;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		float d = st ? g[i] * inv : g[i];
		if (a.weight_decay != 0.0f)
			d += a.weight_decay * w[i];
		if (a.momentum != 0.0f) {
			buf[i] = a.step <= 1 ? d : a.momentum * buf[i] + (1.0f - a.dampening) * d;
			d = a.nesterov ? d + a.momentum * buf[i] : buf[i];
		}
		w[i] -= a.lr * d;
	}
}

extern "C" cudaError_t gf_cu_optim_launch(cudaStream_t s, float *p, const float *g, float *state, size_t n,
                                          gf_optim_args a, const gf_cu_dyn *dyn, gf_cu_status *st, int unscale)
{
	if (!n)
		return cudaSuccess;
	if (a.kind == GF_OPT_SGD)
		sgd_kernel<<<gf_cu_grid(n, 4), GF_CU_THREADS, 0, s>>>(p, g, state, n, a, dyn, st, unscale);
	else
		adam_kernel<<<gf_cu_grid(n, 4), GF_CU_THREADS, 0, s>>>(p, g, state, n, a, dyn, st, unscale);
	return cudaGetLastError();
}

/* ==== fp16 dynamic loss scaling ==== */

static __global__ void check_inf_kernel(float *g, size_t n, gf_cu_status *st, int scale_in_place)
{
	float inv = 1.0f / st->scale;
	int bad = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		float v = g[i];
		bad |= !isfinite(v);
		if (scale_in_place)
			g[i] = v * inv;
	}
	/* every writer stores the same 1: the result does not depend on order */
	if (__syncthreads_or(bad) && threadIdx.x == 0)
		st->found_inf = 1;
}

extern "C" cudaError_t gf_cu_check_inf_launch(cudaStream_t s, float *g, size_t n, gf_cu_status *st,
                                              int scale_in_place)
{
	cudaError_t e = cudaMemsetAsync(&st->found_inf, 0, sizeof(st->found_inf), s);
	if (e != cudaSuccess || !n)
		return e;
	check_inf_kernel<<<gf_cu_grid(n, 4), GF_CU_THREADS, 0, s>>>(g, n, st, scale_in_place);
	return cudaGetLastError();
}

/* GradScaler's update: backoff 0.5 on overflow, growth 2 after
 * growth_interval good updates. */
static __global__ void scaler_update_kernel(gf_cu_status *st)
{
	if (st->found_inf) {
		st->scale *= 0.5f;
		st->good = 0;
		st->skipped++;
	} else {
		st->applied++;
		if (++st->good >= st->growth_interval) {
			st->scale *= 2.0f;
			st->good = 0;
		}
	}
}

extern "C" cudaError_t gf_cu_scaler_update_launch(cudaStream_t s, gf_cu_status *st)
{
	scaler_update_kernel<<<1, 1, 0, s>>>(st);
	return cudaGetLastError();
}

/* ==== rows (the projection head): one block per row, fixed-order sums ==== */

static __global__ void row_dot_kernel(float *out, const float *a, const float *b, int k, int acc)
{
	size_t r = blockIdx.x;
	const float *x = a + r * (size_t)k, *y = b + r * (size_t)k;
	double s = 0;
	for (int j = threadIdx.x; j < k; j += blockDim.x)
		s += (double)x[j] * y[j];
	s = gf_cu_block_sum(s);
	if (threadIdx.x == 0)
		out[r] = acc ? out[r] + (float)s : (float)s;
}

static __global__ void row_scale_kernel(float *y, const float *sc, const float *x, int n, gf_cu_div k, int acc)
{
	size_t total = (size_t)n * k.d;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		float v = sc[gf_cu_divq(k, (uint32_t)i)] * x[i];
		y[i] = acc ? y[i] + v : v;
	}
}

extern "C" cudaError_t gf_cu_row_dot_launch(cudaStream_t s, float *out, const float *a, const float *b, int n, int k,
                                            int acc)
{
	if (n <= 0)
		return cudaSuccess;
	if (n > 0x7fffffff / 2)
		return cudaErrorInvalidValue;
	row_dot_kernel<<<(unsigned)n, k >= 256 ? 256 : 64, 0, s>>>(out, a, b, k, acc);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_row_scale_launch(cudaStream_t s, float *y, const float *sc, const float *x, int n, int k,
                                              int acc)
{
	size_t total = (size_t)n * k;
	if (!total)
		return cudaSuccess;
	if (total >= ((size_t)1 << 31))
		return cudaErrorInvalidValue;
	row_scale_kernel<<<gf_cu_grid(total, 4), GF_CU_THREADS, 0, s>>>(y, sc, x, n, gf_cu_div_make((uint32_t)k), acc);
	return cudaGetLastError();
}
