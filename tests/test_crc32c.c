/* test_crc32c: every CRC-32C implementation, forced in turn with
 * gf_crc32c_use, against a bitwise CRC-32C: known answers (RFC 3720),
 * lengths around every block size of each implementation (the 128-byte
 * pclmulqdq round and its 256-byte threshold, the 256-byte vpclmulqdq
 * round and its 1 KiB threshold, the 3 x 4 KiB interleaved round, 8-byte
 * words) at every start alignment, random lengths (0..8 KiB) and starts,
 * a few MiB, continued CRCs and single flipped bits. A path this CPU
 * cannot run is skipped with a message; that the refusal matches the CPU's
 * flags is checked. Run three times by CTest: as the CPU allows, with
 * GF_CRC32C_NO_FOLD=1, and with GF_CRC32C=pclmulqdq (test_choice checks the
 * choice made at start). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <ganflow/crc32c.h>
#include <ganflow/err.h>

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

/* ---- the cases, with their bitwise CRCs (computed once, in setup) ---- */

#define CAP ((4u << 20) + 256)

typedef struct {
	size_t off, n;
	uint32_t init, want;
} ccase;

static uint8_t *buf; /* (CAP) random bytes */
static ccase *cases;
static size_t ncases;

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return rng;
}

static void add(size_t off, size_t n, uint32_t init)
{
	assert_true(off + n <= CAP);
	cases[ncases++] = (ccase){ off, n, init, crc_bitwise(init, buf + off, n) };
}

static const size_t lens[] = { 0,     1,     7,     8,     9,     15,    16,    17,    63,    64,
	                       127,   128,   129,   255,   256,   257,   383,   384,   385,   1023,
	                       1024,  1025,  1279,  1280,  1281,  1535,  2047,  2048,  4096,  5000,
	                       12287, 12288, 12289, 13311, 13312, 24576, 24577, 36863, 36864, 36865 };
#define NLENS (sizeof(lens) / sizeof(lens[0]))
#define NRANDOM 600
static const size_t big[][2] = { { 0, 1u << 20 }, { 1, (1u << 20) + 13 }, { 7, (3u << 20) - 5 }, { 64, 4u << 20 } };

static int setup(void **state)
{
	(void)state;
	buf = malloc(CAP);
	cases = malloc((16 * NLENS + NRANDOM + 4) * sizeof(ccase));
	if (!buf || !cases)
		return -1;
	for (size_t i = 0; i < CAP; i++)
		buf[i] = (uint8_t)(next() >> 24);
	for (size_t off = 0; off < 16; off++)
		for (size_t k = 0; k < NLENS; k++)
			add(off, lens[k], off & 1 ? 0x9e3779b9u : 0);
	for (int i = 0; i < NRANDOM; i++) {
		size_t n = (size_t)(next() % 8193), off = (size_t)(next() % 64);
		add(off, n, i % 3 ? 0 : (uint32_t)next());
	}
	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
		add(big[i][0], big[i][1], 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(buf);
	free(cases);
	return 0;
}

/* ---- each path forced in turn ---- */

/* Whether this CPU should run implementation `name`, by its own flags. */
static int cpu_has(const char *name)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	int sse42 = __builtin_cpu_supports("sse4.2");
	if (!strcmp(name, "sse4.2"))
		return sse42;
	if (!strcmp(name, "pclmulqdq"))
		return sse42 && __builtin_cpu_supports("pclmul");
	if (!strcmp(name, "vpclmulqdq"))
		return sse42 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
		       __builtin_cpu_supports("vpclmulqdq");
#endif
	return !strcmp(name, "table");
}

static void check_path(const char *name)
{
	int rc = gf_crc32c_use(name);
	if (!cpu_has(name)) {
		assert_int_equal(rc, GF_EUNSUPPORTED);
		assert_non_null(strstr(gf_errmsg(), name));
		printf("skipped: this CPU cannot run the %s CRC-32C path\n", name);
		skip();
	}
	assert_int_equal(rc, 0);
	assert_string_equal(gf_crc32c_impl(), name);

	assert_int_equal(gf_crc32c(0, "123456789", 9), 0xe3069283u);
	/* RFC 3720 B.4: 32 bytes of zeros, of 0xff */
	uint8_t z[32];
	memset(z, 0, sizeof(z));
	assert_int_equal(gf_crc32c(0, z, 32), 0x8a9136aau);
	memset(z, 0xff, sizeof(z));
	assert_int_equal(gf_crc32c(0, z, 32), 0x62a8ab43u);

	for (size_t i = 0; i < ncases; i++) {
		const ccase *c = &cases[i];
		uint32_t got = gf_crc32c(c->init, buf + c->off, c->n);
		if (got != c->want)
			fail_msg("%s: %zu bytes at offset %zu from 0x%08x: 0x%08x, bitwise 0x%08x", name, c->n, c->off,
			         c->init, got, c->want);
		/* continued: split anywhere */
		size_t h = c->n ? (size_t)(next() % (c->n + 1)) : 0;
		assert_int_equal(gf_crc32c(gf_crc32c(c->init, buf + c->off, h), buf + c->off + h, c->n - h), c->want);
	}
	/* one flipped bit anywhere in a folded block changes the CRC */
	uint32_t whole = gf_crc32c(0, buf, 20000);
	for (size_t i = 0; i < 20000; i += 997) {
		buf[i] ^= 0x10;
		assert_int_not_equal(gf_crc32c(0, buf, 20000), whole);
		buf[i] ^= 0x10;
	}
	assert_int_equal(gf_crc32c_use(NULL), 0);
}

static void test_vpclmulqdq(void **state)
{
	(void)state;
	check_path("vpclmulqdq");
}

static void test_pclmulqdq(void **state)
{
	(void)state;
	check_path("pclmulqdq");
}

static void test_sse42(void **state)
{
	(void)state;
	check_path("sse4.2");
}

static void test_table(void **state)
{
	(void)state;
	check_path("table");
}

/* The choice made at start: the fastest the CPU has, unless the
 * environment says otherwise; gf_crc32c_use(NULL) returns to it. */
static void test_choice(void **state)
{
	(void)state;
	static const char *const order[] = { "vpclmulqdq", "pclmulqdq", "sse4.2", "table" };
	const char *want = NULL;
	for (int i = 0; i < 4 && !want; i++)
		if (cpu_has(order[i]))
			want = order[i];
	const char *nofold = getenv("GF_CRC32C_NO_FOLD"), *env = getenv("GF_CRC32C");
	if (nofold && *nofold && strcmp(nofold, "0") && cpu_has("sse4.2"))
		want = "sse4.2";
	if (env && *env && cpu_has(env))
		want = env;
	assert_int_equal(gf_crc32c_use("vpclmulqdq ") , GF_EPARAM);
	assert_int_equal(gf_crc32c_use(NULL), 0);
	assert_string_equal(gf_crc32c_impl(), want);
	printf("CRC-32C at start: %s (GF_CRC32C=%s, GF_CRC32C_NO_FOLD=%s)\n", want, env ? env : "",
	       nofold ? nofold : "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_choice),     cmocka_unit_test(test_vpclmulqdq), cmocka_unit_test(test_pclmulqdq),
		cmocka_unit_test(test_sse42),      cmocka_unit_test(test_table),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
