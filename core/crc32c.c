/* CRC-32C, hardware where the CPU has it. See <ganflow/crc32c.h>. */
#include <pthread.h>
#include <string.h>

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

enum { BLOCK = 4096 }; /* bytes per stream per round of three */
static uint32_t shift1, shift2; /* x^(8 BLOCK), x^(16 BLOCK) */

/* Three interleaved streams over consecutive blocks hide the crc32
 * instruction's latency (one 8-byte step a cycle instead of one every
 * three); the three registers are then combined by shifts. */
__attribute__((target("sse4.2"))) static uint32_t hw(uint32_t crc, const uint8_t *p, size_t n)
{
	uint64_t c = crc;
	while (n && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		n--;
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
#endif
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
