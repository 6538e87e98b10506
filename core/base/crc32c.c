/* CRC-32C, hardware where the CPU has it. See <ganflow/crc32c.h>.
 *
 * Four implementations, the best the CPU has chosen once by CPUID (or by
 * GF_CRC32C / gf_crc32c_use, for tests and comparisons):
 *   vpclmulqdq  AVX-512 carry-less multiplications fold 4 x 64 bytes a round
 *   pclmulqdq   SSE carry-less multiplications fold 8 x 16 bytes while
 *               three crc32 streams take 3 x 64 bytes, 320 bytes a step
 *               (every x86-64 since 2010)
 *   sse4.2      the crc32 instruction in three interleaved streams
 *   table       a byte at a time (not x86-64, or a CPU without SSE 4.2)
 * The folding paths finish with the crc32 instruction, so both need SSE
 * 4.2 as well. All give the same values. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <ganflow/crc32c.h>
#include <ganflow/err.h>
#include <ganflow/log.h>

enum { IMPL_TABLE, IMPL_SSE42, IMPL_PCLMUL, IMPL_VPCLMUL, NIMPL };
static const char *const impl_names[NIMPL] = { "table", "sse4.2", "pclmulqdq", "vpclmulqdq" };

static uint32_t table[256];
static int have[NIMPL]; /* what this CPU can run */
static int start;       /* the choice at start: the fastest, or GF_CRC32C's */
/* The implementation gf_crc32c runs. Relaxed loads and stores are enough:
 * every implementation gives the same values, so a call racing with
 * gf_crc32c_use may take either; what each reads (tables, constants) was
 * written in init, which pthread_once orders before any call. */
static _Atomic int impl;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint32_t soft(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
/* ---- combining: CRC registers are linear, so the register after A||B is
 * the register after A shifted by |B| bytes, xored with B's from zero; a
 * shift is a multiplication by x^(8 |B|) modulo the polynomial ---- */

/* a * b modulo the Castagnoli polynomial, bit-reflected. */
static uint32_t mulmod(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;
	for (;;) {
		if (a & m) {
			p ^= b;
			if (!(a & (m - 1)))
				break;
		}
		m >>= 1;
		b = b & 1 ? (b >> 1) ^ 0x82f63b78u : b >> 1;
	}
	return p;
}

/* x^bits modulo the polynomial (bits >= 0), bit-reflected. */
static uint32_t xpow(uint64_t bits)
{
	uint32_t r = 1u << 31, x = 1u << 30; /* x^0, and x^1 */
	for (; bits; bits >>= 1) {
		if (bits & 1)
			r = mulmod(x, r);
		x = mulmod(x, x);
	}
	return r;
}

enum { BLOCK = 4096 }; /* bytes per stream per round of three */
static uint32_t shift1, shift2; /* x^(8 BLOCK), x^(16 BLOCK): shifting by one, two blocks */

/* ---- folding with carry-less multiplication ----
 * A 16-byte lane holds 128 message bits, lane bit j standing for degree
 * 127 - j (the reflected order: byte 0 bit 0 comes first). Moving a lane
 * forward by D bits multiplies it by x^D; modulo the polynomial that is
 * lo * (x^(64+D) mod P) + hi * (x^D mod P) for its two 64-bit halves,
 * each product at most 95 bits, so the result fits a lane again and is
 * xored into the lane D bits further on. pclmul of two bit-reflected
 * operands yields the reflected product one place short (bit 127 is the
 * missing x^0), which the constants absorb by being x^(64+D-1) and x^(D-1),
 * reflected into the upper half of their 64-bit word. The folded lanes are
 * congruent, as a message in the same place, to everything folded into
 * them, so the crc32 instruction over the last of them (from a zero
 * register) finishes the job; no Barrett reduction is needed.
 * The constants are computed in init from the polynomial (xpow, above),
 * not copied; test_crc32c checks every path against a bitwise CRC. For
 * cross-checking, the same values from an independent generator, x^k mod
 * P one shift at a time, printed bit-reflected (they agree with xpow):
 *   def xpow(k):
 *       r = 1
 *       for _ in range(k):
 *           r <<= 1
 *           if r >> 32: r ^= 0x11EDC6F41
 *       return int(f"{r:032b}"[::-1], 2)
 *   pclmulqdq step, D = 2560: x^2623 35f98786, x^2559 258d3fc9
 *   lanes to the last, D = 128 .. 896: x^191 3743f7bd x^127 3171d430,
 *     x^319 33ccbbbc x^255 a2158b34, x^447 a46ef4aa x^383 6051243f,
 *     x^575 1c19243b x^511 75bba45b, x^703 1c42da43 x^639 6d883e38,
 *     x^831 c92f998d x^767 3365346a, x^959 169472b6 x^895 963e61cd
 *   crc32 streams into the lanes: x^1055 6992cea2, x^543 740eef02, x^31 00000001
 *   vpclmulqdq, D = 2048, 512: x^2111 e9a5d8be x^2047 1426a815,
 *     x^575 1c19243b x^511 75bba45b */

/* {x^(64+D-1), x^(D-1)} for a fold over D bits, as pclmul takes it. */
static uint64_t kword(uint64_t bits)
{
	return (uint64_t)xpow(bits) << 32;
}

static __m128i kfold_pair(uint64_t d)
{
	return _mm_set_epi64x((long long)kword(d - 1), (long long)kword(64 + d - 1));
}

/* -- AVX-512 VPCLMULQDQ: four 64-byte lanes, 256 bytes a round -- */

static __m128i kz[2]; /* D = 2048 (a round), 512 (one lane) */

#define VPCLMUL_TARGET __attribute__((target("avx512f,avx512vl,vpclmulqdq,sse4.2")))

VPCLMUL_TARGET static inline __m512i fold512(__m512i z, __m512i k, __m512i data)
{
	__m512i a = _mm512_clmulepi64_epi128(z, k, 0x00), b = _mm512_clmulepi64_epi128(z, k, 0x11);
	return _mm512_ternarylogic_epi64(a, b, data, 0x96); /* a ^ b ^ data */
}

/* CRC register c over n >= 256 bytes; returns it after the first
 * n - n % 256 bytes, *used set to that count. */
VPCLMUL_TARGET static uint64_t fold_vpclmul(uint32_t c, const uint8_t *p, size_t n, size_t *used)
{
	__m512i k4 = _mm512_broadcast_i32x4(kz[0]), k1 = _mm512_broadcast_i32x4(kz[1]);
	__m512i z0 = _mm512_loadu_si512(p), z1 = _mm512_loadu_si512(p + 64);
	__m512i z2 = _mm512_loadu_si512(p + 128), z3 = _mm512_loadu_si512(p + 192);
	z0 = _mm512_xor_si512(z0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)c)));
	size_t i = 256;
	for (; i + 256 <= n; i += 256) {
		z0 = fold512(z0, k4, _mm512_loadu_si512(p + i));
		z1 = fold512(z1, k4, _mm512_loadu_si512(p + i + 64));
		z2 = fold512(z2, k4, _mm512_loadu_si512(p + i + 128));
		z3 = fold512(z3, k4, _mm512_loadu_si512(p + i + 192));
	}
	z1 = fold512(z0, k1, z1);
	z2 = fold512(z1, k1, z2);
	z3 = fold512(z2, k1, z3);
	uint64_t w[8];
	_mm512_storeu_si512(w, z3);
	uint64_t r = 0;
	for (int j = 0; j < 8; j++)
		r = __builtin_ia32_crc32di(r, w[j]);
	*used = i;
	return r;
}

/* -- SSE PCLMULQDQ: eight 16-byte lanes, three crc32 streams beside --
 * Eight lanes keep 16 multiplications in flight, enough to cover pclmul's
 * latency (3 to 7 cycles) on the CPUs that lack VPCLMULQDQ. At the end,
 * each lane j < 7 is moved over the (7 - j) * 128 bits to the last lane.
 * Alone, the lanes fold about 14 GB/s on the AMD EPYC this was measured
 * on (2 cycles a pclmul), under memory's 20-25; the crc32 unit, a
 * separate one, takes part of the bytes meanwhile (fold_pclmul, below). */

static __m128i kx[8]; /* kx[0]: D = 8 MIX_STEP (a step, below); kx[j]: D = (8 - j) * 128, lane j - 1 to lane 7 */

#define PCLMUL_TARGET __attribute__((target("pclmul,sse4.2")))
#define PCLMUL_INLINE PCLMUL_TARGET static inline __attribute__((always_inline))

PCLMUL_INLINE __m128i fold128(__m128i x, __m128i k, __m128i data)
{
	__m128i a = _mm_clmulepi64_si128(x, k, 0x00), b = _mm_clmulepi64_si128(x, k, 0x11);
	return _mm_xor_si128(_mm_xor_si128(a, b), data);
}

#define LOAD128(q) _mm_loadu_si128((const __m128i *)(const void *)(q))

typedef struct {
	__m128i x[8];
} lanes8;

/* The first 128 bytes, the register c xored into the first 4. */
PCLMUL_INLINE void lanes_start(lanes8 *l, uint32_t c, const uint8_t *p)
{
	for (int j = 0; j < 8; j++)
		l->x[j] = LOAD128(p + 16 * j);
	l->x[0] = _mm_xor_si128(l->x[0], _mm_cvtsi32_si128((int)c));
}

/* The lanes moved over one step to the 128 bytes at q, which are added,
 * and `add` into the first lane. */
PCLMUL_INLINE void lanes_fold_add(lanes8 *l, __m128i k, const uint8_t *q, __m128i add)
{
	l->x[0] = fold128(l->x[0], k, _mm_xor_si128(LOAD128(q), add));
	for (int j = 1; j < 8; j++)
		l->x[j] = fold128(l->x[j], k, LOAD128(q + 16 * j));
}

/* The CRC register after everything folded in. */
PCLMUL_INLINE uint64_t lanes_end(lanes8 *l)
{
	__m128i r = l->x[7];
	for (int j = 0; j < 7; j++) /* the products depend only on their lane: only the xors chain */
		r = fold128(l->x[j], kx[j + 1], r);
	uint64_t c = __builtin_ia32_crc32di(0, (uint64_t)_mm_cvtsi128_si64(r));
	return __builtin_ia32_crc32di(c, (uint64_t)_mm_extract_epi64(r, 1));
}

/* A step takes the next MIX_STEP bytes as three crc32 streams of MIX_S
 * bytes, each from a zero register (no chain from one step to the next),
 * then 128 bytes for the lanes, which move over the whole step:
 *   [lanes 128] [s0 S] [s1 S] [s2 S] [lanes 128] [s0 S] [s1 S] ...
 * so the bytes go by once, in order (separate regions per stream ran at
 * half speed from memory). A stream's register r is its bytes times x^32
 * modulo P; it joins the next lane block as the 64-bit carry-less product
 * r * (x^(8 d - 33) mod P) xored into that block's first 8 bytes, d the
 * bytes from the stream's end to theirs: the product, as a message, is
 * r x^(8 d - 32) (one place short, as above), congruent to the stream's
 * bytes moved over d bytes. */

enum { MIX_W = 8, MIX_S = 8 * MIX_W, MIX_STEP = 3 * MIX_S + 128 };
static uint64_t kmix[3]; /* x^(8 d - 33) for stream k: d = (2 - k) S + 8 */

/* CRC register c over n >= 128 bytes; returns it after the first 128 + m
 * MIX_STEP bytes (the most that fit), *used set to that count. */
PCLMUL_TARGET static uint64_t fold_pclmul(uint32_t c, const uint8_t *p, size_t n, size_t *used)
{
	lanes8 l;
	__m128i k = kx[0], k01 = _mm_set_epi64x((long long)kmix[1], (long long)kmix[0]);
	__m128i k2 = _mm_cvtsi64_si128((long long)kmix[2]);
	lanes_start(&l, c, p);
	size_t i = 128;
	for (; i + MIX_STEP <= n; i += MIX_STEP) {
		const uint8_t *s = p + i;
		uint64_t r0 = 0, r1 = 0, r2 = 0, v;
		for (int w = 0; w < MIX_W; w++) {
			memcpy(&v, s + 8 * w, 8);
			r0 = __builtin_ia32_crc32di(r0, v);
			memcpy(&v, s + MIX_S + 8 * w, 8);
			r1 = __builtin_ia32_crc32di(r1, v);
			memcpy(&v, s + 2 * MIX_S + 8 * w, 8);
			r2 = __builtin_ia32_crc32di(r2, v);
		}
		__m128i r01 = _mm_set_epi64x((long long)r1, (long long)r0);
		__m128i add = _mm_xor_si128(_mm_clmulepi64_si128(r01, k01, 0x00), _mm_clmulepi64_si128(r01, k01, 0x11));
		add = _mm_xor_si128(add, _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)r2), k2, 0x00));
		lanes_fold_add(&l, k, s + 3 * MIX_S, add);
	}
	*used = i;
	return lanes_end(&l);
}

/* ---- the crc32 instruction ---- */

__attribute__((target("sse4.2"))) static uint32_t hw(uint32_t crc, const uint8_t *p, size_t n, int how)
{
	uint64_t c = crc;
	while (n && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		n--;
	}
	size_t used = 0;
	if (how == IMPL_VPCLMUL && n >= 1024)
		c = fold_vpclmul((uint32_t)c, p, n, &used);
	else if (how == IMPL_PCLMUL && n >= 256)
		c = fold_pclmul((uint32_t)c, p, n, &used);
	p += used;
	n -= used;
	/* Three interleaved streams over consecutive blocks hide the crc32
	 * instruction's latency (one 8-byte step a cycle instead of one every
	 * three); the three registers are then combined by shifts. */
	while (n >= 3 * BLOCK) {
		uint64_t a = c, b = 0, d = 0, v;
		for (size_t i = 0; i < BLOCK; i += 8) {
			memcpy(&v, p + i, 8);
			a = __builtin_ia32_crc32di(a, v);
			memcpy(&v, p + BLOCK + i, 8);
			b = __builtin_ia32_crc32di(b, v);
			memcpy(&v, p + 2 * BLOCK + i, 8);
			d = __builtin_ia32_crc32di(d, v);
		}
		c = mulmod(shift2, (uint32_t)a) ^ mulmod(shift1, (uint32_t)b) ^ (uint32_t)d;
		p += 3 * BLOCK;
		n -= 3 * BLOCK;
	}
	while (n >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		n -= 8;
	}
	while (n--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

static int impl_index(const char *name)
{
	for (int i = 0; i < NIMPL; i++)
		if (!strcmp(name, impl_names[i]))
			return i;
	return -1;
}

static void init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1; /* Castagnoli, reflected */
		table[i] = c;
	}
	have[IMPL_TABLE] = 1;
#if defined(__x86_64__)
	__builtin_cpu_init();
	have[IMPL_SSE42] = __builtin_cpu_supports("sse4.2");
	have[IMPL_PCLMUL] = have[IMPL_SSE42] && __builtin_cpu_supports("pclmul");
	have[IMPL_VPCLMUL] = have[IMPL_SSE42] && __builtin_cpu_supports("avx512f") &&
	                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vpclmulqdq");
	shift1 = xpow(8 * BLOCK);
	shift2 = xpow(16 * BLOCK);
	kz[0] = kfold_pair(2048);
	kz[1] = kfold_pair(512);
	kx[0] = kfold_pair(8 * MIX_STEP);
	for (int j = 1; j < 8; j++)
		kx[j] = kfold_pair((uint64_t)(8 - j) * 128);
	for (int j = 0; j < 3; j++)
		kmix[j] = xpow(8 * ((uint64_t)(2 - j) * MIX_S + 8) - 33);
#endif
	int use = IMPL_TABLE;
	for (int i = 0; i < NIMPL; i++)
		if (have[i])
			use = i;
	const char *want = getenv("GF_CRC32C"), *nofold = getenv("GF_CRC32C_NO_FOLD");
	if (nofold && *nofold && strcmp(nofold, "0") && use > IMPL_SSE42)
		use = IMPL_SSE42;
	if (want && *want) {
		int i = impl_index(want);
		if (i < 0)
			gf_log(GF_LOG_WARN, "GF_CRC32C=%s: no such CRC-32C implementation (vpclmulqdq, pclmulqdq, "
			                    "sse4.2, table); using %s", want, impl_names[use]);
		else if (!have[i])
			gf_log(GF_LOG_WARN, "GF_CRC32C=%s: this CPU cannot run it; using %s", want, impl_names[use]);
		else
			use = i;
	}
	start = use;
	atomic_store_explicit(&impl, use, memory_order_relaxed);
}

const char *gf_crc32c_impl(void)
{
	pthread_once(&once, init);
	return impl_names[atomic_load_explicit(&impl, memory_order_relaxed)];
}

int gf_crc32c_use(const char *name)
{
	pthread_once(&once, init);
	int i = name ? impl_index(name) : start;
	if (i < 0)
		return gf_seterr(GF_EPARAM, "CRC-32C: no implementation '%s' (vpclmulqdq, pclmulqdq, sse4.2, table)",
		                 name);
	if (!have[i])
		return gf_seterr(GF_EUNSUPPORTED, "CRC-32C: this CPU cannot run '%s'", name);
	atomic_store_explicit(&impl, i, memory_order_relaxed);
	return 0;
}

uint32_t gf_crc32c(uint32_t crc, const void *data, size_t n)
{
	pthread_once(&once, init);
	crc = ~crc;
	int how = atomic_load_explicit(&impl, memory_order_relaxed);
#if defined(__x86_64__)
	if (how != IMPL_TABLE)
		return ~hw(crc, data, n, how);
#endif
	return ~soft(crc, data, n);
}
