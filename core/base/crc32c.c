/* CRC-32C, hardware where the CPU has it. See <ganflow/crc32c.h>. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <ganflow/crc32c.h>

static uint32_t table[256];
static int have_hw;
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

/* x^(8 n) modulo the polynomial: shifting a register by n bytes. */
static uint32_t shift_of(size_t n)
{
	uint32_t r = 1u << 31, x = 1u << 30; /* x^0, and x^1 */
	for (n *= 8; n; n >>= 1) {
		if (n & 1)
			r = mulmod(x, r);
		x = mulmod(x, x);
	}
	return r;
}

/* x^bits modulo the polynomial (bits >= 0), bit-reflected. */
static uint32_t xpow(uint64_t bits)
{
	uint32_t r = 1u << 31, x = 1u << 30;
	for (; bits; bits >>= 1) {
		if (bits & 1)
			r = mulmod(x, r);
		x = mulmod(x, x);
	}
	return r;
}

enum { BLOCK = 4096 }; /* bytes per stream per round of three */
static uint32_t shift1, shift2; /* x^(8 BLOCK), x^(16 BLOCK) */

/* Three interleaved streams over consecutive blocks hide the crc32
 * instruction's latency (one 8-byte step a cycle instead of one every
 * three); the three registers are then combined by shifts. */
/* ---- folding with carry-less multiplication (AVX-512 VPCLMULQDQ) ----
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
 * them, so the crc32 instruction over the last 64 of them (from a zero
 * register) finishes the job; no Barrett reduction is needed. */
static __m128i kfold[4]; /* {x^(64+D-1), x^(D-1)} for D = 2048, 512 bits */
static int have_fold;

static uint64_t kword(uint64_t bits)
{
	return (uint64_t)xpow(bits) << 32;
}

#define FOLD_TARGET __attribute__((target("avx512f,avx512vl,vpclmulqdq,sse4.2")))

FOLD_TARGET static inline __m512i fold512(__m512i z, __m512i k, __m512i data)
{
	__m512i a = _mm512_clmulepi64_epi128(z, k, 0x00), b = _mm512_clmulepi64_epi128(z, k, 0x11);
	return _mm512_ternarylogic_epi64(a, b, data, 0x96); /* a ^ b ^ data */
}

/* CRC register c over n >= 256 bytes; returns it after the first
 * n - n % 256 bytes, *used set to that count. */
FOLD_TARGET static uint64_t fold(uint32_t c, const uint8_t *p, size_t n, size_t *used)
{
	__m512i k4 = _mm512_broadcast_i32x4(kfold[0]), k1 = _mm512_broadcast_i32x4(kfold[1]);
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

__attribute__((target("sse4.2"))) static uint32_t hw(uint32_t crc, const uint8_t *p, size_t n)
{
	uint64_t c = crc;
	while (n && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		n--;
	}
	if (have_fold && n >= 1024) {
		size_t used;
		c = fold((uint32_t)c, p, n, &used);
		p += used;
		n -= used;
	}
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

static void init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1; /* Castagnoli, reflected */
		table[i] = c;
	}
#if defined(__x86_64__)
	__builtin_cpu_init();
	have_hw = __builtin_cpu_supports("sse4.2");
	shift1 = shift_of(BLOCK);
	shift2 = shift_of(2 * BLOCK);
	have_fold = have_hw && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
	            __builtin_cpu_supports("vpclmulqdq") && !getenv("GF_CRC32C_NO_FOLD");
	kfold[0] = _mm_set_epi64x((long long)kword(2048 - 1), (long long)kword(64 + 2048 - 1));
	kfold[1] = _mm_set_epi64x((long long)kword(512 - 1), (long long)kword(64 + 512 - 1));
#endif
}

const char *gf_crc32c_impl(void)
{
	pthread_once(&once, init);
#if defined(__x86_64__)
	if (have_fold)
		return "vpclmulqdq";
#endif
	return have_hw ? "sse4.2" : "table";
}

uint32_t gf_crc32c(uint32_t crc, const void *data, size_t n)
{
	pthread_once(&once, init);
	crc = ~crc;
#if defined(__x86_64__)
	if (have_hw)
		return ~hw(crc, data, n);
#endif
	return ~soft(crc, data, n);
}
