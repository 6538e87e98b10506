/* CUDA kernels and launchers around cuDNN's convolutions: moving operands
 * between the engine's f32 NCHW and the format a convolution runs in
 * (f32/bf16/f16, NCHW or NHWC with channels padded to a multiple of 8 for
 * the tensor cores), and the sub-pixel form of "nearest upsample x2 + 3x3
 * stride-1 pad-1 conv" (conv_cuda.c explains the choices).
 *
 * The NHWC moves are tiled transposes (32x32 tiles through shared memory,
 * coalesced on both sides) that cast on the way, so mixed precision and
 * NHWC together cost one pass over each operand. Sub-pixel form: the four
 * phase kernels of core/nn/cpu/conv_cpu.c stacked into one 2x2 conv with
 * 4k outputs and padding 1 over (h, w), whose (h+1, w+1) output holds
 * phase (a, b) in the window starting at (a, b). */
#include "kernels.cuh"

typedef long long i64;

/* ---- index maps between a channels-last operand (n, P, C) and f32 NCHW ---- */

/* Plain NCHW (n, c, P): channels >= c are padding. */
struct plain_map {
	int c;
	__device__ __forceinline__ i64 operator()(int n, int p, int ch, int P) const
	{
		return ch < c ? ((i64)n * c + ch) * P + p : -1;
	}
	__device__ __forceinline__ int bias_ch(int ch) const { return ch; }
};

/* The stacked phase output (P = (h+1)(w+1) positions, 4k channels,
 * phase-major) and y (n, k, 2h, 2w): channel ph*k + co at (oi, oj) is
 * y[co][2(oi-a)+a][2(oj-b)+b], ph = 2a + b, inside the phase's window. */
struct phase_map {
	int k, h, w;
	__device__ __forceinline__ i64 operator()(int n, int p, int ch, int P) const
	{
		(void)P;
		if (ch >= 4 * k)
			return -1;
		int ph = ch / k, co = ch - ph * k, a = ph >> 1, b = ph & 1;
		int oi = p / (w + 1), oj = p - oi * (w + 1);
		int i = oi - a, j = oj - b;
		if (i < 0 || i >= h || j < 0 || j >= w)
			return -1;
		return (((i64)n * k + co) * 2 * h + 2 * i + a) * (2 * w) + 2 * j + b;
	}
	__device__ __forceinline__ int bias_ch(int ch) const { return ch % k; }
};

/* cf[map] (+)= cl (n, P, C) + bias: the tile is read along C, written along P. */
template <typename T, typename M>
static __global__ void cl_to_cf_kernel(float *cf, const T *cl, int P, int C, M map, const float *bias, int acc)
{
	__shared__ float tile[32][33];
	int n = blockIdx.z, p0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
	const T *src = cl + (size_t)n * P * C;
	for (int r = threadIdx.y; r < 32; r += blockDim.y) {
		int p = p0 + r, ch = c0 + threadIdx.x;
		tile[r][threadIdx.x] = p < P && ch < C ? gf_cu_type<T>::to(src[(size_t)p * C + ch]) : 0.0f;
	}
	__syncthreads();
	for (int r = threadIdx.y; r < 32; r += blockDim.y) {
		int ch = c0 + r, p = p0 + threadIdx.x;
		if (p >= P || ch >= C)
			continue;
		i64 o = map(n, p, ch, P);
		if (o < 0)
			continue;
		float v = tile[threadIdx.x][r];
		if (bias)
			v += bias[map.bias_ch(ch)];
		cf[o] = acc ? cf[o] + v : v;
	}
}

/* cl (n, P, C) = cf[map], zero where the map has nothing. */
template <typename T, typename M>
static __global__ void cf_to_cl_kernel(T *cl, const float *cf, int P, int C, M map)
{
	__shared__ float tile[32][33];
	int n = blockIdx.z, p0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
	for (int r = threadIdx.y; r < 32; r += blockDim.y) {
		int ch = c0 + r, p = p0 + threadIdx.x;
		i64 o = p < P && ch < C ? map(n, p, ch, P) : -1;
		tile[r][threadIdx.x] = o >= 0 ? cf[o] : 0.0f;
	}
	__syncthreads();
	T *dst = cl + (size_t)n * P * C;
	for (int r = threadIdx.y; r < 32; r += blockDim.y) {
		int p = p0 + r, ch = c0 + threadIdx.x;
		if (p < P && ch < C)
			dst[(size_t)p * C + ch] = gf_cu_type<T>::from(tile[threadIdx.x][r]);
	}
}

template <typename M>
static cudaError_t cl_to_cf(cudaStream_t s, float *cf, const void *cl, gf_cu_dtype dt, int n, int P, int C, M map,
                            const float *bias, int acc)
{
	if (n > 65535)
		return cudaErrorInvalidValue;
	dim3 grid((unsigned)((P + 31) / 32), (unsigned)((C + 31) / 32), (unsigned)n), block(32, 8);
	switch (dt) {
	case GF_CU_F32:
		cl_to_cf_kernel<float, M><<<grid, block, 0, s>>>(cf, (const float *)cl, P, C, map, bias, acc);
		break;
	case GF_CU_BF16:
		cl_to_cf_kernel<__nv_bfloat16, M><<<grid, block, 0, s>>>(cf, (const __nv_bfloat16 *)cl, P, C, map, bias, acc);
		break;
	case GF_CU_F16:
		cl_to_cf_kernel<__half, M><<<grid, block, 0, s>>>(cf, (const __half *)cl, P, C, map, bias, acc);
		break;
	}
	return cudaGetLastError();
}

template <typename M>
static cudaError_t cf_to_cl(cudaStream_t s, void *cl, gf_cu_dtype dt, const float *cf, int n, int P, int C, M map)
{
	if (n > 65535)
		return cudaErrorInvalidValue;
	dim3 grid((unsigned)((P + 31) / 32), (unsigned)((C + 31) / 32), (unsigned)n), block(32, 8);
	switch (dt) {
	case GF_CU_F32:
		cf_to_cl_kernel<float, M><<<grid, block, 0, s>>>((float *)cl, cf, P, C, map);
		break;
	case GF_CU_BF16:
		cf_to_cl_kernel<__nv_bfloat16, M><<<grid, block, 0, s>>>((__nv_bfloat16 *)cl, cf, P, C, map);
		break;
	case GF_CU_F16:
		cf_to_cl_kernel<__half, M><<<grid, block, 0, s>>>((__half *)cl, cf, P, C, map);
		break;
	}
	return cudaGetLastError();
}

/* ---- NCHW in another precision: element-wise casts ---- */

template <typename T>
static __global__ void cast_kernel(T *dst, const float *src, size_t total)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
		dst[i] = gf_cu_type<T>::from(src[i]);
}

/* dst (n, c, hw) (+)= src + bias[ch]. */
template <typename T>
static __global__ void uncast_kernel(float *dst, const T *src, size_t total, gf_cu_div hw, gf_cu_div c,
                                     const float *bias, int acc)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		float v = gf_cu_type<T>::to(src[i]);
		if (bias) {
			uint32_t plane = gf_cu_divq(hw, (uint32_t)i);
			v += bias[plane - gf_cu_divq(c, plane) * c.d];
		}
		dst[i] = acc ? dst[i] + v : v;
	}
}

extern "C" cudaError_t gf_cu_pack_launch(cudaStream_t s, void *dst, gf_cu_fmt f, const float *src, int n, int c,
                                         int cp, int hw)
{
	if (f.nhwc)
		return cf_to_cl(s, dst, f.dt, src, n, hw, cp, plain_map{ c });
	size_t total = (size_t)n * c * hw;
	if (!total)
		return cudaSuccess;
	switch (f.dt) {
	case GF_CU_F32:
		return cudaMemcpyAsync(dst, src, total * sizeof(float), cudaMemcpyDeviceToDevice, s);
	case GF_CU_BF16:
		cast_kernel<__nv_bfloat16><<<gf_cu_grid(total, 4), GF_CU_THREADS, 0, s>>>((__nv_bfloat16 *)dst, src, total);
		break;
	case GF_CU_F16:
		cast_kernel<__half><<<gf_cu_grid(total, 4), GF_CU_THREADS, 0, s>>>((__half *)dst, src, total);
		break;
	}
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_unpack_launch(cudaStream_t s, float *dst, const void *src, gf_cu_fmt f, int n, int c,
                                           int cp, int hw, const float *bias, int acc)
{
	if (f.nhwc)
		return cl_to_cf(s, dst, src, f.dt, n, hw, cp, plain_map{ c }, bias, acc);
	size_t total = (size_t)n * c * hw;
	if (!total)
		return cudaSuccess;
	if (total >= ((size_t)1 << 31))
		return cudaErrorInvalidValue;
	gf_cu_div dh = gf_cu_div_make((uint32_t)hw), dc = gf_cu_div_make((uint32_t)c);
	unsigned g = gf_cu_grid(total, 4);
	switch (f.dt) {
	case GF_CU_F32:
		uncast_kernel<float><<<g, GF_CU_THREADS, 0, s>>>(dst, (const float *)src, total, dh, dc, bias, acc);
		break;
	case GF_CU_BF16:
		uncast_kernel<__nv_bfloat16><<<g, GF_CU_THREADS, 0, s>>>(dst, (const __nv_bfloat16 *)src, total, dh, dc, bias,
		                                                         acc);
		break;
	case GF_CU_F16:
		uncast_kernel<__half><<<g, GF_CU_THREADS, 0, s>>>(dst, (const __half *)src, total, dh, dc, bias, acc);
		break;
	}
	return cudaGetLastError();
}

/* ---- filters ---- */

/* Offset of filter element (ko, ci, y, x) in a (kp, cp, kh, kw) filter,
 * NCHW ("KCRS") or NHWC ("KRSC"). */
static __device__ __forceinline__ size_t filt_off(int nhwc, int ko, int ci, int y, int x, int cp, int kh, int kw)
{
	return nhwc ? (((size_t)ko * kh + y) * kw + x) * cp + ci : (((size_t)ko * cp + ci) * kh + y) * kw + x;
}

/* One thread per destination element (padding included). */
template <typename T>
static __global__ void pack_filter_kernel(T *dst, int nhwc, const float *w, int k, int c, int kp, int cp, int kh, int kw)
{
	size_t total = (size_t)kp * cp * kh * kw;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		int ko, ci, y, x;
		size_t r = i;
		if (nhwc) {
			ci = (int)(r % cp); r /= cp;
			x = (int)(r % kw); r /= kw;
			y = (int)(r % kh); r /= kh;
			ko = (int)r;
		} else {
			x = (int)(r % kw); r /= kw;
			y = (int)(r % kh); r /= kh;
			ci = (int)(r % cp); r /= cp;
			ko = (int)r;
		}
		float v = ko < k && ci < c ? w[(((size_t)ko * c + ci) * kh + y) * kw + x] : 0.0f;
		dst[i] = gf_cu_type<T>::from(v);
	}
}

template <typename T>
static __global__ void unpack_filter_kernel(float *dw, const T *src, int nhwc, int k, int c, int cp, int kh, int kw,
                                            int acc)
{
	size_t total = (size_t)k * c * kh * kw;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		size_t r = i;
		int x = (int)(r % kw); r /= kw;
		int y = (int)(r % kh); r /= kh;
		int ci = (int)(r % c); r /= c;
		int ko = (int)r;
		float v = gf_cu_type<T>::to(src[filt_off(nhwc, ko, ci, y, x, cp, kh, kw)]);
		dw[i] = acc ? dw[i] + v : v;
	}
}

/* Rows of the 3x3 kernel that phase row a, tap t sums (conv_cpu.c). */
__constant__ int tap_lo[2][2] = { { 0, 1 }, { 0, 2 } };
__constant__ int tap_hi[2][2] = { { 0, 2 }, { 1, 2 } };

/* Stacked phase filter (kp4, cp, 2, 2): channel ph*k + co, taps summed in
 * conv_cpu.c's order (so the phase weights are the CPU's bits). */
template <typename T>
static __global__ void phase_filter_kernel(T *dst, int nhwc, const float *w, int k, int c, int kp4, int cp)
{
	size_t total = (size_t)kp4 * cp * 4;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		int kk, ci, ty, tx;
		size_t r = i;
		if (nhwc) {
			ci = (int)(r % cp); r /= cp;
			tx = (int)(r % 2); r /= 2;
			ty = (int)(r % 2); r /= 2;
			kk = (int)r;
		} else {
			tx = (int)(r % 2); r /= 2;
			ty = (int)(r % 2); r /= 2;
			ci = (int)(r % cp); r /= cp;
			kk = (int)r;
		}
		float s = 0;
		if (kk < 4 * k && ci < c) {
			int ph = kk / k, co = kk - ph * k, pa = ph >> 1, pb = ph & 1;
			const float *kw3 = w + ((size_t)co * c + ci) * 9;
			for (int ky = tap_lo[pa][ty]; ky <= tap_hi[pa][ty]; ky++)
				for (int kx = tap_lo[pb][tx]; kx <= tap_hi[pb][tx]; kx++)
					s += kw3[ky * 3 + kx];
		}
		dst[i] = gf_cu_type<T>::from(s);
	}
}

/* dw (k, c, 3, 3) (+)= stacked phase gradients folded back (conv_cpu.c's
 * fold_phase_grads, same order). */
template <typename T>
static __global__ void phase_fold_kernel(float *dw, const T *src, int nhwc, int k, int c, int cp, int acc)
{
	size_t total = (size_t)k * c * 9;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		int kx = (int)(i % 3), ky = (int)(i / 3 % 3);
		size_t r = i / 9;
		int ci = (int)(r % c), co = (int)(r / c);
		float s = 0;
		for (int ph = 0; ph < 4; ph++) {
			int pa = ph >> 1, pb = ph & 1;
			int ty = pa ? ky >= 2 : ky >= 1, tx = pb ? kx >= 2 : kx >= 1;
			s += gf_cu_type<T>::to(src[filt_off(nhwc, ph * k + co, ci, ty, tx, cp, 2, 2)]);
		}
		dw[i] = acc ? dw[i] + s : s;
	}
}

extern "C" cudaError_t gf_cu_pack_filter_launch(cudaStream_t s, void *dst, gf_cu_fmt f, const float *w, int k, int c,
                                                int kp, int cp, int kh, int kw)
{
	size_t total = (size_t)kp * cp * kh * kw;
	if (!total)
		return cudaSuccess;
	switch (f.dt) {
	case GF_CU_F32:
		pack_filter_kernel<float><<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>((float *)dst, f.nhwc, w, k, c, kp, cp,
		                                                                      kh, kw);
		break;
	case GF_CU_BF16:
		pack_filter_kernel<__nv_bfloat16><<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>((__nv_bfloat16 *)dst, f.nhwc, w,
		                                                                              k, c, kp, cp, kh, kw);
		break;
	case GF_CU_F16:
		pack_filter_kernel<__half><<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>((__half *)dst, f.nhwc, w, k, c, kp, cp,
		                                                                       kh, kw);
		break;
	}
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_unpack_filter_launch(cudaStream_t s, float *dw, const void *src, gf_cu_fmt f, int k, int c,
                                                  int kp, int cp, int kh, int kw, int acc)
{
	(void)kp;
	size_t total = (size_t)k * c * kh * kw;
	if (!total)
		return cudaSuccess;
	switch (f.dt) {
	case GF_CU_F32:
		unpack_filter_kernel<float><<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>(dw, (const float *)src, f.nhwc, k, c,
		                                                                        cp, kh, kw, acc);
		break;
	case GF_CU_BF16:
		unpack_filter_kernel<__nv_bfloat16><<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>(
			dw, (const __nv_bfloat16 *)src, f.nhwc, k, c, cp, kh, kw, acc);
		break;
	case GF_CU_F16:
		unpack_filter_kernel<__half><<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>(dw, (const __half *)src, f.nhwc, k,
		                                                                         c, cp, kh, kw, acc);
		break;
	}
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_phase_filter_launch(cudaStream_t s, void *dst, gf_cu_fmt f, const float *w, int k, int c,
                                                 int kp4, int cp)
{
	size_t total = (size_t)kp4 * cp * 4;
	switch (f.dt) {
	case GF_CU_F32:
		phase_filter_kernel<float><<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>((float *)dst, f.nhwc, w, k, c, kp4, cp);
		break;
	case GF_CU_BF16:
		phase_filter_kernel<__nv_bfloat16><<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>((__nv_bfloat16 *)dst, f.nhwc, w,
		                                                                               k, c, kp4, cp);
		break;
	case GF_CU_F16:
		phase_filter_kernel<__half><<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>((__half *)dst, f.nhwc, w, k, c, kp4,
		                                                                        cp);
		break;
	}
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_phase_fold_launch(cudaStream_t s, float *dw, const void *dws, gf_cu_fmt f, int k, int c,
                                               int kp4, int cp, int acc)
{
	(void)kp4;
	size_t total = (size_t)k * c * 9;
	switch (f.dt) {
	case GF_CU_F32:
		phase_fold_kernel<float><<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>(dw, (const float *)dws, f.nhwc, k, c, cp,
		                                                                     acc);
		break;
	case GF_CU_BF16:
		phase_fold_kernel<__nv_bfloat16><<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>(dw, (const __nv_bfloat16 *)dws,
		                                                                             f.nhwc, k, c, cp, acc);
		break;
	case GF_CU_F16:
		phase_fold_kernel<__half><<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>(dw, (const __half *)dws, f.nhwc, k, c,
		                                                                      cp, acc);
		break;
	}
	return cudaGetLastError();
}

/* ---- sub-pixel output and gradient, NCHW ---- */

/* One thread per low-resolution pixel of one (sample, channel) plane: its
 * 2x2 block of y from the four phase planes. */
template <typename T>
static __global__ void phase_gather_nchw_kernel(float *y, const T *ys, int k, int kp4, int h, int w, size_t total,
                                                gf_cu_div hw, gf_cu_div wd, gf_cu_div kd, const float *bias)
{
	for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < total; t += (size_t)gridDim.x * blockDim.x) {
		uint32_t plane = gf_cu_divq(hw, (uint32_t)t), q = (uint32_t)t - plane * hw.d;
		uint32_t i = gf_cu_divq(wd, q), j = q - i * wd.d;
		uint32_t n = gf_cu_divq(kd, plane), co = plane - n * kd.d;
		float bv = bias ? bias[co] : 0.0f;
		float *yp = y + (size_t)plane * 4 * h * w;
		for (int a = 0; a < 2; a++)
			for (int b = 0; b < 2; b++) {
				int ph = 2 * a + b;
				const T *src = ys + (((size_t)n * kp4 + ph * k + co) * (h + 1) + i + a) * (w + 1) + j + b;
				yp[(2 * i + a) * (size_t)(2 * w) + 2 * j + b] = gf_cu_type<T>::to(*src) + bv;
			}
	}
}

/* One thread per element of dys (n, kp4, h+1, w+1). */
template <typename T>
static __global__ void phase_scatter_nchw_kernel(T *dys, const float *dy, int k, int kp4, int h, int w, size_t total,
                                                 gf_cu_div pd, gf_cu_div w1d, gf_cu_div kp4d)
{
	for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < total; t += (size_t)gridDim.x * blockDim.x) {
		uint32_t plane = gf_cu_divq(pd, (uint32_t)t), q = (uint32_t)t - plane * pd.d;
		uint32_t oi = gf_cu_divq(w1d, q), oj = q - oi * w1d.d;
		uint32_t n = gf_cu_divq(kp4d, plane), ch = plane - n * kp4d.d;
		float v = 0.0f;
		if (ch < 4u * k) {
			int ph = ch / k, co = ch - ph * k, a = ph >> 1, b = ph & 1;
			int i = (int)oi - a, j = (int)oj - b;
			if (i >= 0 && i < h && j >= 0 && j < w)
				v = dy[(((size_t)n * k + co) * 2 * h + 2 * i + a) * (size_t)(2 * w) + 2 * j + b];
		}
		dys[t] = gf_cu_type<T>::from(v);
	}
}

extern "C" cudaError_t gf_cu_phase_gather_launch(cudaStream_t s, float *y, const void *ys, gf_cu_fmt f, int n, int k,
                                                 int kp4, int h, int w, const float *bias)
{
	if (f.nhwc)
		return cl_to_cf(s, y, ys, f.dt, n, (h + 1) * (w + 1), kp4, phase_map{ k, h, w }, bias, 0);
	size_t total = (size_t)n * k * h * w;
	if (!total)
		return cudaSuccess;
	if (total * 4 >= ((size_t)1 << 31))
		return cudaErrorInvalidValue;
	gf_cu_div hw = gf_cu_div_make((uint32_t)(h * w)), wd = gf_cu_div_make((uint32_t)w), kd = gf_cu_div_make((uint32_t)k);
	unsigned g = gf_cu_grid(total);
	switch (f.dt) {
	case GF_CU_F32:
		phase_gather_nchw_kernel<float><<<g, GF_CU_THREADS, 0, s>>>(y, (const float *)ys, k, kp4, h, w, total, hw, wd,
		                                                            kd, bias);
		break;
	case GF_CU_BF16:
		phase_gather_nchw_kernel<__nv_bfloat16><<<g, GF_CU_THREADS, 0, s>>>(y, (const __nv_bfloat16 *)ys, k, kp4, h, w,
		                                                                    total, hw, wd, kd, bias);
		break;
	case GF_CU_F16:
		phase_gather_nchw_kernel<__half><<<g, GF_CU_THREADS, 0, s>>>(y, (const __half *)ys, k, kp4, h, w, total, hw, wd,
		                                                             kd, bias);
		break;
	}
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_phase_scatter_launch(cudaStream_t s, void *dys, gf_cu_fmt f, const float *dy, int n, int k,
                                                  int kp4, int h, int w)
{
	if (f.nhwc)
		return cf_to_cl(s, dys, f.dt, dy, n, (h + 1) * (w + 1), kp4, phase_map{ k, h, w });
	size_t total = (size_t)n * kp4 * (h + 1) * (w + 1);
	if (!total)
		return cudaSuccess;
	if (total >= ((size_t)1 << 31))
		return cudaErrorInvalidValue;
	gf_cu_div pd = gf_cu_div_make((uint32_t)((h + 1) * (w + 1))), w1d = gf_cu_div_make((uint32_t)(w + 1)),
	          kp4d = gf_cu_div_make((uint32_t)kp4);
	unsigned g = gf_cu_grid(total);
	switch (f.dt) {
	case GF_CU_F32:
		phase_scatter_nchw_kernel<float><<<g, GF_CU_THREADS, 0, s>>>((float *)dys, dy, k, kp4, h, w, total, pd, w1d,
		                                                             kp4d);
		break;
	case GF_CU_BF16:
		phase_scatter_nchw_kernel<__nv_bfloat16><<<g, GF_CU_THREADS, 0, s>>>((__nv_bfloat16 *)dys, dy, k, kp4, h, w,
		                                                                     total, pd, w1d, kp4d);
		break;
	case GF_CU_F16:
		phase_scatter_nchw_kernel<__half><<<g, GF_CU_THREADS, 0, s>>>((__half *)dys, dy, k, kp4, h, w, total, pd, w1d,
		                                                              kp4d);
		break;
	}
	return cudaGetLastError();
}

/* ---- GEMM operands in bf16/f16 ---- */

template <typename T>
static __global__ void cast2d_kernel(T *dst, const float *src, int rows, int cols, int ld)
{
	size_t total = (size_t)rows * cols;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		size_t r = i / cols, c = i - r * cols;
		dst[i] = gf_cu_type<T>::from(src[r * ld + c]);
	}
}

extern "C" cudaError_t gf_cu_cast2d_launch(cudaStream_t s, void *dst, gf_cu_dtype dt, const float *src, int rows,
                                           int cols, int ld)
{
	size_t total = (size_t)rows * cols;
	if (!total)
		return cudaSuccess;
	switch (dt) {
	case GF_CU_F32:
		cast2d_kernel<float><<<gf_cu_grid(total, 4), GF_CU_THREADS, 0, s>>>((float *)dst, src, rows, cols, ld);
		break;
	case GF_CU_BF16:
		cast2d_kernel<__nv_bfloat16><<<gf_cu_grid(total, 4), GF_CU_THREADS, 0, s>>>((__nv_bfloat16 *)dst, src, rows,
		                                                                            cols, ld);
		break;
	case GF_CU_F16:
		cast2d_kernel<__half><<<gf_cu_grid(total, 4), GF_CU_THREADS, 0, s>>>((__half *)dst, src, rows, cols, ld);
		break;
	}
	return cudaGetLastError();
}
