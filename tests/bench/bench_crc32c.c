/* bench_crc32c: GB/s of each CRC-32C implementation this CPU can run
 * (forced in turn with gf_crc32c_use) against a plain pass over the same
 * bytes (a sum of 64-bit words, what the reader benchmark's baseline
 * consumer does), in the same run, one core, timed by the thread's CPU
 * clock (the machine may be shared: time spent preempted is not counted):
 *   cache   a 32 KiB buffer (L1/L2), again and again
 *   memory  a `mib` MiB buffer (default 256, beyond the caches) in 100 KB
 *           calls, the size of the reader benchmark's records
 * Each figure is the best of `repeats` (the machine may be shared); the
 * paths alternate within a repeat. The result is the slowest folding path
 * (vpclmulqdq, pclmulqdq) from memory against the sum: memory speed on
 * any x86-64 with PCLMULQDQ. On a CPU without one, the fastest path.
 *
 * usage: bench_crc32c [repeats=5] [mib=256]
 */
#include "bench_data.h"

#define CACHE_BYTES (32u << 10)
#define CALL_BYTES 100000u

static const char *const paths[] = { "vpclmulqdq", "pclmulqdq", "sse4.2", "table" };
#define NPATHS 4

static volatile uint64_t sink;

/* GB/s of crc (or the sum when !crc) over buf[0, n) in `call`-byte calls,
 * `passes` times. */
static double pass(const uint8_t *buf, size_t n, size_t call, int passes, int crc)
{
	uint64_t s = 0;
	double t0 = thread_cpu_now();
	for (int p = 0; p < passes; p++)
		for (size_t i = 0; i < n; i += call) {
			size_t m = n - i < call ? n - i : call;
			s += crc ? gf_crc32c(0, buf + i, m) : touch(buf + i, m);
		}
	double t = thread_cpu_now() - t0;
	sink += s;
	return (double)n * passes / t / 1e9;
}

static double best(double a, double b)
{
	return a > b ? a : b;
}

int main(int argc, char **argv)
{
	int repeats = 5, mib = 256;
	for (int i = 1; i < argc; i++)
		if ((sscanf(argv[i], "repeats=%d", &repeats) != 1 || repeats < 1) &&
		    (sscanf(argv[i], "mib=%d", &mib) != 1 || mib < 1))
			die("usage: bench_crc32c [repeats=N] [mib=N]");
	size_t n = (size_t)mib << 20;
	uint8_t *buf = malloc(n);
	if (!buf)
		die("no memory for %d MiB", mib);
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < n; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(buf + i, &x, 8);
	}
	print_crc_path(stdout);
	int have[NPATHS];
	for (int j = 0; j < NPATHS; j++) {
		have[j] = gf_crc32c_use(paths[j]) == 0;
		if (!have[j])
			printf("%s: skipped (%s)\n", paths[j], gf_errmsg());
	}
	gf_crc32c_use(NULL);
	/* passes sized for ~0.2 s at 20 GB/s; the table path gets fewer */
	int cache_passes = (int)(4e9 / CACHE_BYTES), mem_passes = (int)(4e9 / (double)n) + 1;
	double sum_c = 0, sum_m = 0, crc_c[NPATHS] = { 0 }, crc_m[NPATHS] = { 0 };
	for (int r = 0; r < repeats; r++) {
		sum_c = best(sum_c, pass(buf, CACHE_BYTES, CACHE_BYTES, cache_passes, 0));
		sum_m = best(sum_m, pass(buf, n, CALL_BYTES, mem_passes, 0));
		for (int j = 0; j < NPATHS; j++) {
			if (!have[j])
				continue;
			int slow = !strcmp(paths[j], "table");
			gf_crc32c_use(paths[j]);
			int cp = slow ? cache_passes / 40 : cache_passes;
			crc_c[j] = best(crc_c[j], pass(buf, CACHE_BYTES, CACHE_BYTES, cp, 1));
			crc_m[j] = best(crc_m[j], pass(buf, slow ? n / 16 : n, CALL_BYTES, slow ? 1 : mem_passes, 1));
		}
		gf_crc32c_use(NULL);
	}
	printf("crc32c: best of %d, one core; memory: %d MiB in %u-byte calls\n", repeats, mib, CALL_BYTES);
	printf("%-24s %12s %12s %14s\n", "path", "cache GB/s", "memory GB/s", "memory / sum");
	printf("%-24s %12.1f %12.1f %14.2f\n", "sum of 64-bit words", sum_c, sum_m, 1.0);
	double worst_fold = 0, fastest = 0;
	int any_fold = 0;
	for (int j = 0; j < NPATHS; j++) {
		if (!have[j])
			continue;
		printf("%-24s %12.1f %12.1f %14.2f%s\n", paths[j], crc_c[j], crc_m[j], crc_m[j] / sum_m,
		       !strcmp(paths[j], gf_crc32c_impl()) ? "  (default here)" : "");
		if (j <= 1) {
			worst_fold = any_fold ? (crc_m[j] < worst_fold ? crc_m[j] : worst_fold) : crc_m[j];
			any_fold = 1;
		}
		fastest = best(fastest, crc_m[j]);
	}
	free(buf);
	printf("crc32c: ratio_vs_sum=%.2f target=0.90\n", (any_fold ? worst_fold : fastest) / sum_m);
	return 0;
}
