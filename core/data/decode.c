/* Record decoding and image transforms (see <ganflow/decode.h>).
 *
 * The hot path of jpeg_decode: TurboJPEG decode at a reduced DCT scale,
 * then one separable resampling pass from the crop window straight into
 * the normalised float output (C, H, W), with flip and channel conversion
 * folded in. Weight tables and scratch buffers live in the decoder and
 * only grow, so after the first records nothing is allocated.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <turbojpeg.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GF_X86_SIMD 1
#endif

#include <ganflow/decode.h>
#include <ganflow/err.h>

struct gf_decoder {
	tjhandle dec, enc;
	uint8_t *pix;    /* decoded pixels */
	size_t pix_cap;
	float *tmp;      /* horizontal pass: (c, rows, ow) */
	size_t tmp_cap;
	int *lo;         /* taps: first source index per output index */
	int *cnt;        /* taps per output index */
	float *wt;       /* (n, maxtap) weights */
	size_t lo_cap, wt_cap; /* lo_cap: entries of lo and cnt */
	struct taps_key { /* what lo, cnt and wt were made for (fixed-size data repeats it) */
		double wx, wy, ww, wh;
		int sw, sh, ow, oh, mode, tx, ty;
	} taps;
	uint8_t *enc_buf;/* JPEG encoder output (tjAlloc'ed) */
	unsigned long enc_cap;
	int avx2;        /* the CPU has AVX2: vector u8 -> f32 rows and resampling */
};

/* ---- buffers ---- */

static int grow(void **p, size_t *cap, size_t bytes)
{
	if (bytes <= *cap)
		return 0;
	size_t n = bytes + bytes / 4 + 64;
	void *q = realloc(*p, n);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

int gf_decoder_create(gf_decoder **out)
{
	gf_decoder *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->dec = tjInitDecompress();
	if (!d->dec) {
		free(d);
		return gf_seterr(-ENOMEM, "TurboJPEG: cannot create a decompressor");
	}
#ifdef GF_X86_SIMD
	/* GF_DECODE_SCALAR=1: the scalar paths (tests compare the two) */
	const char *scalar = getenv("GF_DECODE_SCALAR");
	d->avx2 = __builtin_cpu_supports("avx2") && !(scalar && scalar[0] == '1');
#endif
	*out = d;
	return 0;
}

void gf_decoder_destroy(gf_decoder *d)
{
	if (!d)
		return;
	if (d->dec)
		tjDestroy(d->dec);
	if (d->enc)
		tjDestroy(d->enc);
	if (d->enc_buf)
		tjFree(d->enc_buf);
	free(d->pix);
	free(d->tmp);
	free(d->lo);
	free(d->cnt);
	free(d->wt);
	free(d);
}

/* ---- JPEG ---- */

/* After a failed call TurboJPEG 2.1 can leave its decompressor mid-header
 * (tjDecompressHeader3 returns without aborting it), and the next image
 * then fails too: records the error, then replaces the handle. */
static int tj_fail(gf_decoder *d, const char *what)
{
	int rc = gf_seterr(GF_ECORRUPT, "%s: %s", what, tjGetErrorStr2(d->dec));
	tjhandle fresh = tjInitDecompress();
	if (fresh) {
		tjDestroy(d->dec);
		d->dec = fresh;
	}
	return rc;
}

int gf_jpeg_info(gf_decoder *d, const uint8_t *jpeg, size_t len, int *w, int *h, int *c)
{
	int sub, cs;
	if (len > 0x7fffffff)
		return gf_seterr(GF_ECORRUPT, "corrupt JPEG: %zu bytes", len);
	if (tjDecompressHeader3(d->dec, jpeg, (unsigned long)len, w, h, &sub, &cs))
		return tj_fail(d, "corrupt JPEG");
	if (cs == TJCS_CMYK || cs == TJCS_YCCK)
		return gf_seterr(GF_ECORRUPT, "unsupported JPEG colour space (CMYK/YCCK)");
	*c = cs == TJCS_GRAY ? 1 : 3;
	return 0;
}

/* Decodes a JPEG record at scale sn/sd into d->pix (pf channels). */
static int jpeg_decode(gf_decoder *d, const uint8_t *buf, size_t len, int sw, int sh, int c, int flags, int lenient)
{
	size_t bytes = (size_t)sw * sh * c;
	if (grow((void **)&d->pix, &d->pix_cap, bytes))
		return -ENOMEM;
	int rc = tjDecompress2(d->dec, buf, (unsigned long)len, d->pix, sw, sw * c, sh, c == 1 ? TJPF_GRAY : TJPF_RGB,
	                       flags);
	if (rc && (!lenient || tjGetErrorCode(d->dec) == TJERR_FATAL))
		return tj_fail(d, "corrupt JPEG");
	return 0;
}

/* The frame header (SOFn) of a JPEG: width, height and components, found
 * by walking the marker segments before it. tjDecompressHeader3 sets up a
 * whole decompressor and reads every table to say the same (10,700
 * instructions a call, 3% of decoding a 64x64 JPEG), and tjDecompress2
 * reads the header again anyway. Returns 0, or -1 where the walk finds no
 * frame header before the scan (TurboJPEG then says what is wrong). */
static int jpeg_frame(const uint8_t *p, size_t len, int *w, int *h, int *ncomp)
{
	size_t i = 2;
	if (len < 4 || p[0] != 0xff || p[1] != 0xd8)
		return -1;
	for (;;) {
		while (i < len && p[i] == 0xff) /* fill bytes, then the marker's own 0xff */
			i++;
		if (i + 3 > len || p[i - 1] != 0xff)
			return -1;
		uint8_t m = p[i++];
		if (m == 0x01 || (m >= 0xd0 && m <= 0xd7)) /* no length */
			continue;
		if (m == 0xd8 || m == 0xd9 || m == 0xda) /* SOI, EOI, SOS: no frame header before the data */
			return -1;
		size_t seg = (size_t)p[i] << 8 | p[i + 1];
		if (seg < 2 || seg > len - i)
			return -1;
		if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) { /* SOF0..15 but DHT, JPG, DAC */
			if (seg < 8)
				return -1;
			*h = p[i + 3] << 8 | p[i + 4];
			*w = p[i + 5] << 8 | p[i + 6];
			*ncomp = p[i + 7];
			return 0;
		}
		i += seg;
	}
}

/* Checks a JPEG record's own header against the record header. */
static int jpeg_check(gf_decoder *d, const gf_record_header *h, const uint8_t *payload, int *jw, int *jh)
{
	int jc, rc;
	if (jpeg_frame(payload, h->payload, jw, jh, &jc) || (jc != 1 && jc != 3) || *jw <= 0 || *jh <= 0)
		if ((rc = gf_jpeg_info(d, payload, h->payload, jw, jh, &jc))) /* its messages */
			return rc;
	if ((uint32_t)*jw != h->width || (uint32_t)*jh != h->height || (uint32_t)jc != h->channels)
		return gf_seterr(GF_ECORRUPT, "JPEG is %dx%dx%d but the record header says %ux%ux%u", *jh, *jw, jc,
		                 h->height, h->width, h->channels);
	return 0;
}

/* ---- resampling weights ---- */

/* Taps mapping n outputs onto the source interval [x0, x0 + len) of an
 * axis of srcn pixels, into lo/cnt[base..] and wt[wbase..] (maxtap weights
 * per output).
 * Returns maxtap, or -ENOMEM. */
static int make_taps(gf_decoder *d, int base, size_t wbase, int n, double x0, double len, int srcn,
                     gf_resize_mode mode)
{
	double scale = len / n;
	int area = mode == GF_RESIZE_AREA && scale > 1.0;
	int maxtap = area ? (int)ceil(scale) + 2 : 2;
	if (grow((void **)&d->wt, &d->wt_cap, (wbase + (size_t)n * maxtap) * sizeof(float)))
		return -ENOMEM;
	if ((size_t)base + n > d->lo_cap) {
		size_t cap = ((size_t)base + n) * 2;
		int *a = realloc(d->lo, cap * sizeof(int));
		if (a)
			d->lo = a;
		int *b = a ? realloc(d->cnt, cap * sizeof(int)) : NULL;
		if (b)
			d->cnt = b;
		if (!a || !b)
			return -ENOMEM;
		d->lo_cap = cap;
	}
	int *lo = d->lo + base, *cnt = d->cnt + base;
	float *wt = d->wt + wbase;
	for (int j = 0; j < n; j++) {
		float *w = wt + (size_t)j * maxtap;
		if (area) {
			double a = x0 + j * scale, b = a + scale;
			int i0 = (int)floor(a), i1 = (int)ceil(b) - 1;
			if (i0 < 0)
				i0 = 0;
			if (i1 > srcn - 1)
				i1 = srcn - 1;
			if (i0 > srcn - 1)
				i0 = srcn - 1;
			if (i1 < i0)
				i1 = i0;
			if (i1 - i0 + 1 > maxtap)
				i1 = i0 + maxtap - 1;
			double sum = 0;
			for (int i = i0; i <= i1; i++) {
				double ov = fmin(b, i + 1.0) - fmax(a, (double)i);
				if (ov < 0)
					ov = 0;
				w[i - i0] = (float)ov;
				sum += ov;
			}
			for (int i = i0; i <= i1; i++)
				w[i - i0] = sum > 0 ? (float)(w[i - i0] / sum) : 1.0f / (float)(i1 - i0 + 1);
			lo[j] = i0;
			cnt[j] = i1 - i0 + 1;
		} else {
			double x = x0 + (j + 0.5) * scale - 0.5;
			double fl = floor(x);
			int i0 = (int)fl;
			float f = (float)(x - fl);
			if (i0 < 0) {
				i0 = 0;
				f = 0;
			}
			if (i0 >= srcn - 1) {
				i0 = srcn - 1;
				f = 0;
			}
			lo[j] = i0;
			cnt[j] = f > 0 ? 2 : 1;
			w[0] = 1.0f - f;
			w[1] = f;
		}
	}
	return maxtap;
}

/* ---- the transform ---- */

gf_image_kind gf_image_sniff(const uint8_t *buf, size_t len)
{
	static const uint8_t png[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	if (len >= 3 && buf[0] == 0xff && buf[1] == 0xd8 && buf[2] == 0xff)
		return GF_IMAGE_JPEG;
	if (len >= 8 && !memcmp(buf, png, 8))
		return GF_IMAGE_PNG;
	return GF_IMAGE_UNKNOWN;
}

int gf_transform_shape(const gf_transform *t, const gf_record_header *h, int *c, int *oh, int *ow)
{
	if (t->channels != 0 && t->channels != 1 && t->channels != 3)
		return gf_seterr(GF_EPARAM, "channels must be 1 or 3, not %d", t->channels);
	if (t->height < 0 || t->width < 0 || (!t->height) != (!t->width))
		return gf_seterr(GF_EPARAM, "output size %dx%d: give both height and width (or neither)", t->height,
		                 t->width);
	*c = t->channels ? t->channels : (int)h->channels;
	*oh = t->height ? t->height : (int)h->height;
	*ow = t->width ? t->width : (int)h->width;
	return 0;
}

/* Loads one source pixel's channels as floats with channel conversion. */
static inline void load_px(float *v, const uint8_t *p, int sc, int oc)
{
	if (sc == oc) {
		for (int k = 0; k < oc; k++)
			v[k] = p[k];
	} else if (sc == 3) { /* RGB to gray */
		v[0] = 0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2];
	} else { /* gray to RGB */
		v[0] = v[1] = v[2] = p[0];
	}
}

/* ---- u8 rows to normalised f32 ----
 * The full-size path is bound by this conversion (a 500 x 375 RGB image is
 * 562,500 values), so x86 CPUs with AVX2 get a vector version: 16 pixels
 * per step, de-interleaved with byte shuffles. It computes x * k - 1 with a
 * separate multiply and subtract, exactly as the scalar code does. */

#ifdef GF_X86_SIMD
/* 16 u8 values to x * k - 1 in o[0..16). */
__attribute__((target("avx2"))) static inline void norm16(float *o, __m128i v, __m256 k, __m256 one)
{
	__m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
	__m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));
	_mm256_storeu_ps(o, _mm256_sub_ps(_mm256_mul_ps(lo, k), one));
	_mm256_storeu_ps(o + 8, _mm256_sub_ps(_mm256_mul_ps(hi, k), one));
}

__attribute__((target("avx2"))) static void rgb_row_avx2(float *o0, float *o1, float *o2, const uint8_t *row, int n)
{
	const __m256 k = _mm256_set1_ps(1.0f / 127.5f), one = _mm256_set1_ps(1.0f);
	const __m128i r0 = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i r1 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
	const __m128i r2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
	const __m128i g0 = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i g1 = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1);
	const __m128i g2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14);
	const __m128i b0 = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i b1 = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1);
	const __m128i b2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15);
	int x = 0;
	for (; x + 16 <= n; x += 16) {
		const uint8_t *p = row + 3 * x;
		__m128i a = _mm_loadu_si128((const __m128i *)p), b = _mm_loadu_si128((const __m128i *)(p + 16)),
		        c = _mm_loadu_si128((const __m128i *)(p + 32));
		norm16(o0 + x, _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, r0), _mm_shuffle_epi8(b, r1)),
		                            _mm_shuffle_epi8(c, r2)), k, one);
		norm16(o1 + x, _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, g0), _mm_shuffle_epi8(b, g1)),
		                            _mm_shuffle_epi8(c, g2)), k, one);
		norm16(o2 + x, _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, b0), _mm_shuffle_epi8(b, b1)),
		                            _mm_shuffle_epi8(c, b2)), k, one);
	}
	for (; x < n; x++) {
		o0[x] = row[3 * x] * (1.0f / 127.5f) - 1.0f;
		o1[x] = row[3 * x + 1] * (1.0f / 127.5f) - 1.0f;
		o2[x] = row[3 * x + 2] * (1.0f / 127.5f) - 1.0f;
	}
}

__attribute__((target("avx2"))) static void gray_row_avx2(float *o, const uint8_t *row, int n)
{
	const __m256 k = _mm256_set1_ps(1.0f / 127.5f), one = _mm256_set1_ps(1.0f);
	int x = 0;
	for (; x + 8 <= n; x += 8) {
		__m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + x))));
		_mm256_storeu_ps(o + x, _mm256_sub_ps(_mm256_mul_ps(v, k), one));
	}
	for (; x < n; x++)
		o[x] = row[x] * (1.0f / 127.5f) - 1.0f;
}
#endif

/* Window copied 1:1 (integer offsets, output size): exact values. */
static void copy_window(const gf_decoder *d, float *out, const uint8_t *src, size_t stride, int sc, int oc, int x0,
                        int y0, int oh, int ow, int flip)
{
	const float k = 1.0f / 127.5f;
	size_t plane = (size_t)oh * ow;
	(void)d;
	if (x0 == 0 && stride == (size_t)ow * sc && sc == oc && !flip && plane <= INT_MAX) {
		/* whole rows, back to back in the source as in the output planes:
		 * one row of oh x ow pixels */
		src += (size_t)y0 * stride;
		y0 = 0;
		ow *= oh;
		oh = 1;
	}
	for (int y = 0; y < oh; y++) {
		const uint8_t *row = src + (size_t)(y0 + y) * stride + (size_t)x0 * sc;
		float *o = out + (size_t)y * ow;
		if (sc == oc && sc == 1 && !flip) {
#ifdef GF_X86_SIMD
			if (d->avx2) {
				gray_row_avx2(o, row, ow);
				continue;
			}
#endif
			for (int x = 0; x < ow; x++)
				o[x] = row[x] * k - 1.0f;
		} else if (sc == oc && sc == 3 && !flip) {
#ifdef GF_X86_SIMD
			if (d->avx2) {
				rgb_row_avx2(o, o + plane, o + 2 * plane, row, ow);
				continue;
			}
#endif
			for (int x = 0; x < ow; x++) {
				o[x] = row[3 * x] * k - 1.0f;
				o[plane + x] = row[3 * x + 1] * k - 1.0f;
				o[2 * plane + x] = row[3 * x + 2] * k - 1.0f;
			}
		} else {
			for (int x = 0; x < ow; x++) {
				float v[3];
				load_px(v, row + (size_t)x * sc, sc, oc);
				int xo = flip ? ow - 1 - x : x;
				for (int ch = 0; ch < oc; ch++) {
					float f = v[ch] * k - 1.0f;
					o[ch * plane + xo] = f > 1.0f ? 1.0f : f;
				}
			}
		}
	}
}

/* ---- resampling passes ----
 * Horizontal pass first, over the window's source rows, into oc planes of
 * (rows, ow) floats; then the vertical pass and the normalisation per
 * plane, straight into the output. Every output value is computed by the
 * same operations in the same order on every path (a separate multiply and
 * add per tap, taps in order), so the AVX2 paths give the scalar path's
 * bits (test_decode compares them). */

/* Horizontal pass over rows r0.. of src into tmp (C planes of tplane
 * floats, rows x ow each), for sc == oc == C: inlined with a constant C so
 * the channel loops unroll. */
static inline __attribute__((always_inline)) void hpass_c(float *tmp, size_t tplane, const uint8_t *src,
                                                          size_t stride, int r0, int rows, int ow, const int *lo,
                                                          const int *cnt, const float *wt, int tx, const int C)
{
	for (int r = 0; r < rows; r++) {
		const uint8_t *row = src + (size_t)(r0 + r) * stride;
		float *t = tmp + (size_t)r * ow;
		for (int j = 0; j < ow; j++) {
			const float *w = wt + (size_t)j * tx;
			const uint8_t *p = row + (size_t)lo[j] * C;
			float acc[3] = { 0, 0, 0 };
			for (int k = 0; k < cnt[j]; k++, p += C)
				for (int ch = 0; ch < C; ch++)
					acc[ch] += w[k] * p[ch];
			for (int ch = 0; ch < C; ch++)
				t[ch * tplane + j] = acc[ch];
		}
	}
}

/* The same with channel conversion (gray <-> RGB). */
static void hpass_convert(float *tmp, size_t tplane, const uint8_t *src, size_t stride, int r0, int rows, int ow,
                          const int *lo, const int *cnt, const float *wt, int tx, int sc, int oc)
{
	for (int r = 0; r < rows; r++) {
		const uint8_t *row = src + (size_t)(r0 + r) * stride;
		float *t = tmp + (size_t)r * ow;
		for (int j = 0; j < ow; j++) {
			const float *w = wt + (size_t)j * tx;
			const uint8_t *p = row + (size_t)lo[j] * sc;
			float acc[3] = { 0, 0, 0 };
			for (int k = 0; k < cnt[j]; k++, p += sc) {
				float v[3];
				load_px(v, p, sc, oc);
				for (int ch = 0; ch < oc; ch++)
					acc[ch] += w[k] * v[ch];
			}
			for (int ch = 0; ch < oc; ch++)
				t[ch * tplane + j] = acc[ch];
		}
	}
}

/* Vertical pass and normalisation of one plane: output row i is the sum
 * over taps q of wy[i][q] x tmp row (loy[i] - r0 + q), then x / 127.5 - 1,
 * clamped (the weights sum to 1 only up to rounding), flipped. */
static void vpass(float *o, const float *t, int oh, int ow, int r0, const int *loy, const int *cnty, const float *wty,
                  int ty, int flip)
{
	const float k = 1.0f / 127.5f;
	for (int i = 0; i < oh; i++, o += ow) {
		const float *w = wty + (size_t)i * ty, *ti = t + (size_t)(loy[i] - r0) * ow;
		for (int j = 0; j < ow; j++) {
			float a = w[0] * ti[j];
			for (int q = 1; q < cnty[i]; q++)
				a += w[q] * ti[(size_t)q * ow + j];
			float v = a * k - 1.0f;
			o[flip ? ow - 1 - j : j] = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
		}
	}
}

#ifdef GF_X86_SIMD
static inline uint32_t load_u32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* Three planes' values of one output pixel from lanes 0-2 of a. */
__attribute__((target("avx2"))) static inline void store_rgb(float *t, size_t tplane, __m128 a)
{
	t[0] = _mm_cvtss_f32(a);
	t[tplane] = _mm_cvtss_f32(_mm_shuffle_ps(a, a, 1));
	t[2 * tplane] = _mm_cvtss_f32(_mm_shuffle_ps(a, a, 2));
}

/* The bytes of the RGB pixels at p and p + off in the low 8 bytes: two
 * 4-byte loads (each fourth byte, the next pixel's, is weighted and
 * dropped), or, where that could read past the source (its last row),
 * byte by byte. */
__attribute__((target("avx2"))) static inline __m128i load_rgb2(const uint8_t *p, size_t off, int bytewise)
{
	if (!bytewise)
		return _mm_setr_epi32((int)load_u32(p), (int)load_u32(p + off), 0, 0);
	const uint8_t *q = p + off;
	return _mm_setr_epi32(p[0] | p[1] << 8 | p[2] << 16, q[0] | q[1] << 8 | q[2] << 16, 0, 0);
}

/* Four rows (row, + o1, + o2, + o3) of the RGB horizontal pass into t (rows
 * ow apart; `keep` of them stored): a tap's three channels of two rows in
 * one vector (lanes 0-2 and 4-6). */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
hpass_rgb4(float *t, size_t tplane, const uint8_t *row, size_t o1, size_t o2, size_t o3, int keep, int ow,
           const int *lo, const int *cnt, const float *wt, int tx, const int bytewise)
{
	for (int j = 0; j < ow; j++) {
		const float *w = wt + (size_t)j * tx;
		const uint8_t *p = row + (size_t)lo[j] * 3;
		int n = cnt[j];
		__m256 a01 = _mm256_setzero_ps(), a23 = _mm256_setzero_ps();
		for (int k = 0; k < n; k++, p += 3) {
			__m256 wk = _mm256_set1_ps(w[k]);
			__m256 v01 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(load_rgb2(p, o1, bytewise)));
			__m256 v23 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(load_rgb2(p + o2, o3 - o2, bytewise)));
			a01 = _mm256_add_ps(a01, _mm256_mul_ps(wk, v01));
			a23 = _mm256_add_ps(a23, _mm256_mul_ps(wk, v23));
		}
		store_rgb(t + j, tplane, _mm256_castps256_ps128(a01));
		if (keep > 1)
			store_rgb(t + ow + j, tplane, _mm256_extractf128_ps(a01, 1));
		if (keep > 2)
			store_rgb(t + 2 * ow + j, tplane, _mm256_castps256_ps128(a23));
		if (keep > 3)
			store_rgb(t + 3 * ow + j, tplane, _mm256_extractf128_ps(a23, 1));
	}
}

/* hpass_c for RGB, four rows at a time (the last group repeats its last
 * row where fewer are left). */
__attribute__((target("avx2"))) static void hpass_rgb_avx2(float *tmp, size_t tplane, const uint8_t *src,
                                                           size_t stride, int sh, int r0, int rows, int ow,
                                                           const int *lo, const int *cnt, const float *wt, int tx)
{
	for (int r = 0; r < rows; r += 4) {
		int keep = rows - r < 4 ? rows - r : 4;
		size_t o1 = (keep > 1 ? 1 : 0) * stride, o2 = (keep > 2 ? 2 : keep - 1) * stride,
		       o3 = (size_t)(keep - 1) * stride;
		const uint8_t *row = src + (size_t)(r0 + r) * stride;
		float *t = tmp + (size_t)r * ow;
		if (r0 + r + keep < sh) /* a row follows: every 4-byte load stays inside the source */
			hpass_rgb4(t, tplane, row, o1, o2, o3, keep, ow, lo, cnt, wt, tx, 0);
		else
			hpass_rgb4(t, tplane, row, o1, o2, o3, keep, ow, lo, cnt, wt, tx, 1);
	}
}

/* vpass, eight outputs at a time. */
__attribute__((target("avx2"))) static void vpass_avx2(float *o, const float *t, int oh, int ow, int r0,
                                                       const int *loy, const int *cnty, const float *wty, int ty,
                                                       int flip)
{
	const float k = 1.0f / 127.5f;
	const __m256 vk = _mm256_set1_ps(k), one = _mm256_set1_ps(1.0f), mone = _mm256_set1_ps(-1.0f);
	const __m256i rev = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
	for (int i = 0; i < oh; i++, o += ow) {
		const float *w = wty + (size_t)i * ty, *ti = t + (size_t)(loy[i] - r0) * ow;
		int n = cnty[i], j = 0;
		for (; j + 8 <= ow; j += 8) {
			__m256 a = _mm256_mul_ps(_mm256_set1_ps(w[0]), _mm256_loadu_ps(ti + j));
			for (int q = 1; q < n; q++)
				a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_set1_ps(w[q]), _mm256_loadu_ps(ti + (size_t)q * ow + j)));
			__m256 v = _mm256_sub_ps(_mm256_mul_ps(a, vk), one);
			v = _mm256_min_ps(_mm256_max_ps(v, mone), one);
			if (flip)
				_mm256_storeu_ps(o + ow - 8 - j, _mm256_permutevar8x32_ps(v, rev));
			else
				_mm256_storeu_ps(o + j, v);
		}
		for (; j < ow; j++) {
			float a = w[0] * ti[j];
			for (int q = 1; q < n; q++)
				a += w[q] * ti[(size_t)q * ow + j];
			float v = a * k - 1.0f;
			o[flip ? ow - 1 - j : j] = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
		}
	}
}
#endif

/* Resamples the window [wx, wx+ww) x [wy, wy+wh) of src (sw x sh, sc
 * channels) to (oc, oh, ow) normalised floats. */
static int resample(gf_decoder *d, float *out, const uint8_t *src, size_t stride, int sw, int sh, int sc, int oc,
                    double wx, double wy, double ww, double wh, int oh, int ow, gf_resize_mode mode, int flip)
{
	struct taps_key key = { .wx = wx, .wy = wy, .ww = ww, .wh = wh, .sw = sw, .sh = sh, .ow = ow, .oh = oh,
		                    .mode = (int)mode };
	int tx = d->taps.tx, ty = d->taps.ty;
	if (tx <= 0 || key.wx != d->taps.wx || key.wy != d->taps.wy || key.ww != d->taps.ww || key.wh != d->taps.wh ||
	    sw != d->taps.sw || sh != d->taps.sh || ow != d->taps.ow || oh != d->taps.oh || key.mode != d->taps.mode) {
		d->taps.tx = 0; /* not valid until both are made */
		if ((tx = make_taps(d, 0, 0, ow, wx, ww, sw, mode)) < 0)
			return tx;
		if ((ty = make_taps(d, ow, (size_t)ow * tx, oh, wy, wh, sh, mode)) < 0)
			return ty;
		key.tx = tx;
		key.ty = ty;
		d->taps = key;
	}
	const int *lox = d->lo, *cntx = d->cnt, *loy = d->lo + ow, *cnty = d->cnt + ow;
	const float *wtx = d->wt, *wty = d->wt + (size_t)ow * tx;
	int r0 = loy[0], r1 = loy[0];
	for (int i = 0; i < oh; i++) {
		if (loy[i] < r0)
			r0 = loy[i];
		if (loy[i] + cnty[i] - 1 > r1)
			r1 = loy[i] + cnty[i] - 1;
	}
	int rows = r1 - r0 + 1;
	size_t tplane = (size_t)rows * ow, plane = (size_t)oh * ow;
	/* tmp: oc planes of (rows, ow) horizontal results */
	if (grow((void **)&d->tmp, &d->tmp_cap, oc * tplane * sizeof(float)))
		return -ENOMEM;
#ifdef GF_X86_SIMD
	if (d->avx2 && sc == oc && sc == 3)
		hpass_rgb_avx2(d->tmp, tplane, src, stride, sh, r0, rows, ow, lox, cntx, wtx, tx);
	else
#endif
	if (sc == oc && sc == 3)
		hpass_c(d->tmp, tplane, src, stride, r0, rows, ow, lox, cntx, wtx, tx, 3);
	else if (sc == oc && sc == 1)
		hpass_c(d->tmp, tplane, src, stride, r0, rows, ow, lox, cntx, wtx, tx, 1);
	else
		hpass_convert(d->tmp, tplane, src, stride, r0, rows, ow, lox, cntx, wtx, tx, sc, oc);
	for (int ch = 0; ch < oc; ch++) {
#ifdef GF_X86_SIMD
		if (d->avx2) {
			vpass_avx2(out + ch * plane, d->tmp + ch * tplane, oh, ow, r0, loy, cnty, wty, ty, flip);
			continue;
		}
#endif
		vpass(out + ch * plane, d->tmp + ch * tplane, oh, ow, r0, loy, cnty, wty, ty, flip);
	}
	return 0;
}

/* Smallest DCT scaling factor <= 1 that keeps a window of ww x wh
 * (in full-size pixels) at least ow x oh. With unit > 0 only factors that
 * map unit pixels to a whole number of pixels qualify (the half width of a
 * pair, so both halves stay whole pixels after scaling). */
static tjscalingfactor pick_scale(int ww, int wh, int ow, int oh, int unit)
{
	int n = 0;
	tjscalingfactor *f = tjGetScalingFactors(&n), best = { 1, 1 };
	double bestv = 1.0;
	for (int i = 0; f && i < n; i++) {
		double v = (double)f[i].num / f[i].denom;
		if (v > 1.0 || v >= bestv)
			continue;
		if (unit > 0 && ((long)unit * f[i].num) % f[i].denom)
			continue;
		if (floor(ww * v) >= ow && floor(wh * v) >= oh) {
			best = f[i];
			bestv = v;
		}
	}
	return best;
}

/* Planar B, G, R (a raw colour Caffe Datum) to interleaved RGB in d->pix. */
static int bgr_planar(gf_decoder *d, const gf_record_header *h, const uint8_t *payload)
{
	size_t n = (size_t)h->width * h->height;
	if (h->channels != 3 || h->payload != 3 * n)
		return gf_seterr(GF_ECORRUPT, "planar BGR payload of %u bytes is not 3 x %ux%u", h->payload, h->height,
		                 h->width);
	if (grow((void **)&d->pix, &d->pix_cap, 3 * n))
		return -ENOMEM;
	const uint8_t *b = payload, *g = payload + n, *r = payload + 2 * n;
	for (size_t i = 0; i < n; i++) {
		d->pix[3 * i] = r[i];
		d->pix[3 * i + 1] = g[i];
		d->pix[3 * i + 2] = b[i];
	}
	return 0;
}

/* Where the output comes from in an image of sw x sh full-size pixels:
 * the crop window and the flip, drawn from rnd. */
typedef struct window {
	int x, y, w, h;
	int flip;
} window;

static window crop_window(const gf_transform *t, int sw, int sh, int ow, int oh, uint64_t rnd)
{
	window win = { 0, 0, sw, sh, 0 };
	if (t->crop != GF_CROP_NONE && (ow != sw || oh != sh)) {
		double s = fmax((double)ow / sw, (double)oh / sh);
		win.w = (int)lround(ow / s);
		win.h = (int)lround(oh / s);
		win.w = win.w < 1 ? 1 : win.w > sw ? sw : win.w;
		win.h = win.h < 1 ? 1 : win.h > sh ? sh : win.h;
		if (t->crop == GF_CROP_RANDOM) {
			win.x = (int)((rnd & 0xffffffffu) % (uint64_t)(sw - win.w + 1));
			win.y = (int)(((rnd >> 32) & 0x7fffffffu) % (uint64_t)(sh - win.h + 1));
		} else {
			win.x = (sw - win.w) / 2;
			win.y = (sh - win.h) / 2;
		}
	}
	win.flip = t->flip && (rnd >> 63);
	return win;
}

/* The window of an image of sw x sh full-size pixels, held decoded at
 * dw x dh (a DCT-scaled JPEG) in src (row stride `stride` bytes, sc
 * channels), to (oc, oh, ow) normalised floats. */
static int apply_window(gf_decoder *d, const gf_transform *t, float *out, const uint8_t *src, size_t stride, int sw,
                        int sh, int dw, int dh, int sc, int oc, int oh, int ow, const window *win)
{
	if (dw == sw && dh == sh && win->w == ow && win->h == oh) {
		copy_window(d, out, src, stride, sc, oc, win->x, win->y, oh, ow, win->flip);
		return 0;
	}
	double fx = (double)dw / sw, fy = (double)dh / sh;
	return resample(d, out, src, stride, dw, dh, sc, oc, win->x * fx, win->y * fy, win->w * fx, win->h * fy, oh, ow,
	                t->resize, win->flip);
}

/* Source pixels of a record for output channels oc, decoded at the scale
 * that keeps window win (of the full-size image or of one half, unit =
 * that half's width for pairs, 0 otherwise) at least oh x ow. */
static int source_pixels(gf_decoder *d, const gf_transform *t, const gf_record_header *h, const uint8_t *payload,
                         const window *win, int oc, int oh, int ow, int unit, const uint8_t **src, int *dw, int *dh,
                         int *sc)
{
	int rc;
	*dw = (int)h->width;
	*dh = (int)h->height;
	if (h->encoding == GF_ENC_JPEG) {
		int jw, jh;
		if ((rc = jpeg_check(d, h, payload, &jw, &jh)))
			return rc;
		tjscalingfactor f = pick_scale(win->w, win->h, ow, oh, unit);
		*dw = TJSCALED((int)h->width, f);
		*dh = TJSCALED((int)h->height, f);
		*sc = oc; /* TurboJPEG converts to gray / RGB itself */
		int flags = t->fast ? TJFLAG_FASTDCT | TJFLAG_FASTUPSAMPLE : 0;
		if ((rc = jpeg_decode(d, payload, h->payload, *dw, *dh, *sc, flags, t->lenient)))
			return rc;
		*src = d->pix;
		return 0;
	}
	if (h->encoding == GF_ENC_RAW) {
		*src = payload;
		*sc = (int)h->channels;
		return 0;
	}
	if (h->encoding == GF_ENC_BGR) { /* a raw colour Caffe Datum */
		if ((rc = bgr_planar(d, h, payload)))
			return rc;
		*src = d->pix;
		*sc = 3;
		return 0;
	}
	return gf_seterr(GF_ECORRUPT, "unknown encoding %u", h->encoding);
}

int gf_decode_record(gf_decoder *d, const gf_transform *t, const gf_record_header *h, const uint8_t *payload,
                     uint64_t rnd, float *out, size_t out_len)
{
	int oc, oh, ow, rc;
	if ((rc = gf_transform_shape(t, h, &oc, &oh, &ow)))
		return rc;
	if ((size_t)oc * oh * ow > out_len)
		return gf_seterr(GF_ESHAPE, "output buffer of %zu floats too small for %dx%dx%d", out_len, oc, oh, ow);
	int sw = (int)h->width, sh = (int)h->height, dw = 0, dh = 0, sc = 0;
	window win = crop_window(t, sw, sh, ow, oh, rnd);
	const uint8_t *src = NULL;
	if ((rc = source_pixels(d, t, h, payload, &win, oc, oh, ow, 0, &src, &dw, &dh, &sc)))
		return rc;
	return apply_window(d, t, out, src, (size_t)dw * sc, sw, sh, dw, dh, sc, oc, oh, ow, &win);
}

int gf_pair_shape(const gf_transform *t, const gf_record_header *h, int *c, int *oh, int *ow)
{
	if (!(h->flags & GF_RECORD_PAIR) || h->width % 2)
		return gf_seterr(GF_EPARAM, "not a pair record (A | B side by side, flag GF_RECORD_PAIR)");
	gf_record_header half = *h;
	half.width = h->width / 2;
	return gf_transform_shape(t, &half, c, oh, ow);
}

int gf_decode_pair(gf_decoder *d, const gf_transform *t, const gf_record_header *h, const uint8_t *payload,
                   uint64_t rnd, float *out, size_t out_len)
{
	int oc, oh, ow, rc;
	if ((rc = gf_pair_shape(t, h, &oc, &oh, &ow)))
		return rc;
	size_t plane = (size_t)oc * oh * ow;
	if (2 * plane > out_len)
		return gf_seterr(GF_ESHAPE, "output buffer of %zu floats too small for a pair of %dx%dx%d", out_len, oc, oh,
		                 ow);
	int sw = (int)h->width / 2, sh = (int)h->height, dw = 0, dh = 0, sc = 0;
	window win = crop_window(t, sw, sh, ow, oh, rnd); /* one window for both halves */
	const uint8_t *src = NULL;
	if ((rc = source_pixels(d, t, h, payload, &win, oc, oh, ow, sw, &src, &dw, &dh, &sc)))
		return rc;
	int half = dw / 2; /* whole pixels: pick_scale kept sw * scale integral */
	size_t stride = (size_t)dw * sc;
	if ((rc = apply_window(d, t, out, src, stride, sw, sh, half, dh, sc, oc, oh, ow, &win)))
		return rc;
	return apply_window(d, t, out + plane, src + (size_t)half * sc, stride, sw, sh, half, dh, sc, oc, oh, ow, &win);
}

/* ---- full-size pixels ---- */

int gf_decode_pixels(gf_decoder *d, const gf_record_header *h, const uint8_t *payload, int channels,
                     const uint8_t **pix, int *width, int *height)
{
	int rc, c = channels ? channels : (int)h->channels;
	if (c != 1 && c != 3)
		return gf_seterr(GF_EPARAM, "channels must be 1 or 3, not %d", c);
	*width = (int)h->width;
	*height = (int)h->height;
	if (h->encoding == GF_ENC_JPEG) {
		int jw, jh;
		if ((rc = jpeg_check(d, h, payload, &jw, &jh)))
			return rc;
		if ((rc = jpeg_decode(d, payload, h->payload, jw, jh, c, 0, 0)))
			return rc;
		*pix = d->pix;
		return 0;
	}
	if (h->encoding == GF_ENC_BGR) {
		if ((rc = bgr_planar(d, h, payload)))
			return rc;
		size_t n = (size_t)h->width * h->height;
		if (c == 1) /* in place: pixel i is written after pixels <= i were read */
			for (size_t i = 0; i < n; i++) {
				const uint8_t *p = d->pix + 3 * i;
				d->pix[i] = (uint8_t)lrintf(0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2]);
			}
		*pix = d->pix;
		return 0;
	}
	if (h->encoding != GF_ENC_RAW)
		return gf_seterr(GF_ECORRUPT, "unknown encoding %u", h->encoding);
	if ((uint32_t)c == h->channels) {
		*pix = payload;
		return 0;
	}
	size_t n = (size_t)h->width * h->height;
	if (grow((void **)&d->pix, &d->pix_cap, n * c))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (c == 1) {
			const uint8_t *p = payload + 3 * i;
			d->pix[i] = (uint8_t)lrintf(0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2]);
		} else {
			d->pix[3 * i] = d->pix[3 * i + 1] = d->pix[3 * i + 2] = payload[i];
		}
	}
	*pix = d->pix;
	return 0;
}

int gf_resize_u8(gf_decoder *d, uint8_t *dst, int dw, int dh, const uint8_t *src, int w, int h, size_t sstride,
                 int c, gf_resize_mode mode)
{
	/* Reuse the float path: it produces x / 127.5 - 1; map back. */
	size_t n = (size_t)dw * dh * c;
	float *f = malloc(n * sizeof(float));
	if (!f)
		return -ENOMEM;
	int rc = resample(d, f, src, sstride, w, h, c, c, 0, 0, w, h, dh, dw, mode, 0);
	if (!rc) {
		size_t plane = (size_t)dw * dh;
		for (size_t p = 0; p < plane; p++)
			for (int ch = 0; ch < c; ch++) {
				float v = (f[ch * plane + p] + 1.0f) * 127.5f;
				dst[p * c + ch] = (uint8_t)(v <= 0 ? 0 : v >= 255 ? 255 : lrintf(v));
			}
	}
	free(f);
	return rc;
}

/* ---- encoding ---- */

int gf_jpeg_encode(gf_decoder *d, const uint8_t *pix, int w, int h, int c, int quality, gf_subsamp subsamp,
                   const uint8_t **jpeg, size_t *len)
{
	if ((c != 1 && c != 3) || quality < 1 || quality > 100 || w <= 0 || h <= 0)
		return gf_seterr(GF_EPARAM, "JPEG encode: bad image %dx%dx%d or quality %d", h, w, c, quality);
	if (!d->enc && !(d->enc = tjInitCompress()))
		return gf_seterr(-ENOMEM, "TurboJPEG: cannot create a compressor");
	int ss = c == 1 ? TJSAMP_GRAY : subsamp == GF_SUBSAMP_444 ? TJSAMP_444 : subsamp == GF_SUBSAMP_422 ? TJSAMP_422
	                                                                                              : TJSAMP_420;
	unsigned long need = tjBufSize(w, h, ss);
	if (need > d->enc_cap) {
		if (d->enc_buf)
			tjFree(d->enc_buf);
		d->enc_buf = tjAlloc((int)need);
		d->enc_cap = d->enc_buf ? need : 0;
		if (!d->enc_buf)
			return -ENOMEM;
	}
	unsigned long size = d->enc_cap;
	if (tjCompress2(d->enc, pix, w, 0, h, c == 1 ? TJPF_GRAY : TJPF_RGB, &d->enc_buf, &size, ss, quality,
	                TJFLAG_NOREALLOC))
		return gf_seterr(GF_EPARAM, "JPEG encode: %s", tjGetErrorStr2(d->enc));
	*jpeg = d->enc_buf;
	*len = size;
	return 0;
}
