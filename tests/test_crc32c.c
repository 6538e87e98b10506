/* test_crc32c: gf_crc32c against a bitwise CRC-32C over lengths around
 * every block size of each implementation (the 256-byte folding round and
 * its 1 KiB threshold, the 3 x 4 KiB interleaved round, 8-byte words),
 * unaligned starts, continued CRCs; and the implementation chosen. Run
 * twice by CTest: as the CPU allows, and with GF_CRC32C_NO_FOLD=1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <ganflow/crc32c.h>

static uint32_t crc_bitwise(uint32_t crc, const uint8_t *p, size_t n)
{
	uint32_t c = ~crc;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
	}
	return ~c;
}

static void test_values(void **state)
{
	(void)state;
	assert_int_equal(gf_crc32c(0, "123456789", 9), 0xe3069283u);
	assert_int_equal(gf_crc32c(0, "", 0), 0);
	/* RFC 3720 B.4: 32 bytes of zeros, of 0xff */
	uint8_t z[32];
	memset(z, 0, sizeof(z));
	assert_int_equal(gf_crc32c(0, z, 32), 0x8a9136aau);
	memset(z, 0xff, sizeof(z));
	assert_int_equal(gf_crc32c(0, z, 32), 0x62a8ab43u);
	size_t cap = 3 * 4096 * 3 + 4096;
	uint8_t *buf = malloc(cap);
	assert_non_null(buf);
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < cap; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	static const size_t lens[] = { 1,    7,    8,    9,    63,   64,    255,   256,   257,   1023,  1024,
		                       1025, 1279, 1280, 1281, 1535, 2047,  2048,  4096,  5000,  12287, 12288,
		                       12289, 13311, 13312, 24576, 24577, 36863, 36864, 36865, 40000 };
	for (size_t off = 0; off < 8; off++)
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			size_t n = lens[k];
			assert_true(n + off <= cap);
			uint32_t want = crc_bitwise(0, buf + off, n);
			assert_int_equal(gf_crc32c(0, buf + off, n), want);
			assert_int_equal(gf_crc32c(0x9e3779b9u, buf + off, n), crc_bitwise(0x9e3779b9u, buf + off, n));
			size_t h = n / 3;
			assert_int_equal(gf_crc32c(gf_crc32c(0, buf + off, h), buf + off + h, n - h), want);
		}
	/* one flipped bit anywhere in a folded block changes the CRC */
	uint32_t whole = gf_crc32c(0, buf, 20000);
	for (size_t i = 0; i < 20000; i += 997) {
		buf[i] ^= 0x10;
		assert_int_not_equal(gf_crc32c(0, buf, 20000), whole);
		buf[i] ^= 0x10;
	}
	free(buf);
}

static void test_impl(void **state)
{
	(void)state;
	const char *impl = gf_crc32c_impl();
	const char *off = getenv("GF_CRC32C_NO_FOLD");
#if defined(__x86_64__)
	__builtin_cpu_init();
	int fold = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("avx512f") &&
	           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vpclmulqdq") && !off;
	assert_string_equal(impl, fold ? "vpclmulqdq" : __builtin_cpu_supports("sse4.2") ? "sse4.2" : "table");
#else
	(void)off;
	assert_string_equal(impl, "table");
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_impl),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
