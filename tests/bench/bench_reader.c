/* bench_reader: MB/s of the lmdb_reader stage against plain sequential
 * read() of the same shard files, in the same run.
 *
 * Data: the 3000-image ImageNet-like benchmark shards (~300 MB in 64 MiB
 * shards). Both sides touch every byte they deliver once (a sum of 64-bit
 * words): the baseline over its 1 MiB read() buffer, the stage's consumer
 * over each record's payload. The baseline counts file bytes, the reader
 * payload bytes (a little less: headers, B-tree pages and page padding
 * are not counted), so the ratio is conservative.
 *   warm    page cache warm: reader through the LMDB map (io_uring fadvise
 *           readahead, no copy) vs read() of the cached files; 4 passes.
 *   direct  through O_DIRECT: reader with direct = true (io_uring O_DIRECT
 *           reads of upcoming values, copied into the messages) vs plain
 *           sequential read() of the files opened with O_DIRECT (1 MiB
 *           aligned buffer); neither uses the page cache; 2 passes.
 * Payload checksums are on (the default) in every row but one: the sink
 * declares GF_PORT_CHECKS_CRC like jpeg_decode, so the reader passes each
 * record's CRC-32C along and the sink checks it in its pass over the
 * bytes (a CRC instead of the sum). Extra rows: the CRC checked in the
 * reader (a consumer that does not check: the reader makes a pass of its
 * own) and checksums = false, both with the warm cache and O_DIRECT.
 * Extra rows (not in the ratio): a cold page cache (dropped with echo 3 >
 * /proc/sys/vm/drop_caches before each measurement): plain buffered read()
 * with the kernel's readahead against the reader's map path (fadvise
 * readahead) and its direct path; and a shuffled read (window 4096) with a
 * warm cache. Each measurement is the best of `repeats` (the machine may be
 * shared). Without permission to drop the page cache, the cold rows say so.
 * The cold rows also show what the disk saw over the best run: read
 * requests completed, their mean size and the mean number in flight
 * (/proc/diskstats of the device holding the shards: device-wide, so
 * other processes' reads count too), and the major faults the process
 * took (a page read synchronously at a fault, 4 KiB each on the MADV_RANDOM
 * map: the dataset's open and index walk take about 30).
 * The first line names the CRC-32C path and the CPU flags behind it.
 *
 * usage: bench_reader [repeats=3] [readahead=64] [readahead_mb=32] [crc=NAME] [rows=warm,direct,cold]
 *   readahead, readahead_mb  the map path's `readahead` (records), `readahead_mb`
 *   crc        force a CRC-32C path (gf_crc32c_use: vpclmulqdq, pclmulqdq,
 *              sse4.2, table), as GF_CRC32C=NAME does
 *   rows       which groups of rows to measure (the ratio needs warm and direct)
 */
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "bench_data.h"

#define COUNT 3000
#define WARM_PASSES 4
#define DIRECT_PASSES 2

static char rbuf[1 << 20] __attribute__((aligned(4096)));

/* read() every shard file `passes` times (opened with O_DIRECT when
 * direct); returns MB/s of file bytes. */
static double baseline(const gf_dataset *ds, int passes, int direct, uint64_t *sum)
{
	uint64_t bytes = 0, s = 0;
	double t0 = gf_now();
	for (int p = 0; p < passes; p++)
		for (uint32_t i = 0; i < gf_dataset_metadata(ds)->nshards; i++) {
			const char *file = gf_dataset_shard(ds, i)->file;
			int fd = open(file, O_RDONLY | (direct ? O_DIRECT : 0));
			if (fd < 0)
				die("%s: %s", file, strerror(errno));
			ssize_t n;
			while ((n = read(fd, rbuf, sizeof(rbuf))) > 0) {
				s += touch(rbuf, (size_t)n);
				bytes += (uint64_t)n;
			}
			if (n < 0)
				die("%s: %s", file, strerror(errno));
			close(fd);
		}
	double t = gf_now() - t0;
	*sum = s;
	return (double)bytes / t / 1e6;
}

static int map_readahead = 64, map_readahead_mb = 32; /* the map path's `readahead`, `readahead_mb` */

/* The reader stage -> touching sink; returns MB/s of payload bytes.
 * checks: 0 checksums = false; 1 checked by the reader (the sink does not
 * check); 2 checked by the sink, the reader passing the CRC along. */
static double reader(const char *path, int passes, int direct, int shuffle, int checks)
{
	bstep s[1] = { { "lmdb_reader", NULL, "samples",
		             kv("path", gf_value_str(path), "epochs", gf_value_int(passes), "shuffle", gf_value_bool(shuffle),
		                "window", gf_value_int(4096), "direct", gf_value_bool(direct), "readahead",
		                gf_value_int(direct ? 128 : map_readahead), "readahead_mb", gf_value_int(map_readahead_mb),
		                "checksums", gf_value_bool(checks != 0), NULL),
		             1 } };
	double t = run_steps(s, 1, checks == 2 ? 2 : 1);
	if (sink_msgs != (uint64_t)passes * COUNT)
		die("the reader delivered %llu records, expected %d", (unsigned long long)sink_msgs, passes * COUNT);
	if (sink_checked != (checks == 2 ? sink_msgs : 0))
		die("the sink checked %llu CRCs of %llu records (checks = %d)", (unsigned long long)sink_checked,
		    (unsigned long long)sink_msgs, checks);
	return (double)sink_bytes / t / 1e6;
}

static double best(double a, double b)
{
	return a > b ? a : b;
}

/* ---- what the disk saw ---- */

typedef struct {
	double t;
	uint64_t reads, sectors, weighted_ms, majflt;
} iostat;

static unsigned dev_major, dev_minor; /* the shards' block device */

static iostat io_now(void)
{
	iostat s = { .t = gf_now() };
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		s.majflt = (uint64_t)ru.ru_majflt;
	FILE *f = fopen("/proc/diskstats", "r");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		unsigned ma, mi;
		unsigned long long rd, rmerged, sect, rms, wr, wm, ws, wms, inflight, ticks, weighted;
		if (sscanf(line, "%u %u %*s %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &ma, &mi, &rd,
		           &rmerged, &sect, &rms, &wr, &wm, &ws, &wms, &inflight, &ticks, &weighted) == 13 &&
		    ma == dev_major && mi == dev_minor) {
			s.reads = rd;
			s.sectors = sect;
			s.weighted_ms = weighted;
			break;
		}
	}
	if (f)
		fclose(f);
	return s;
}

typedef struct {
	double mbs;
	uint64_t reads, majflt;
	double kib, depth; /* mean request size, mean requests in flight */
} coldrow;

static void io_diff(const iostat *a, const iostat *b, double mbs, coldrow *best_row)
{
	if (mbs <= best_row->mbs)
		return;
	uint64_t reads = b->reads - a->reads;
	best_row->mbs = mbs;
	best_row->reads = reads;
	best_row->majflt = b->majflt - a->majflt;
	best_row->kib = reads ? (double)(b->sectors - a->sectors) * 512 / 1024 / (double)reads : 0;
	best_row->depth = (double)(b->weighted_ms - a->weighted_ms) / 1e3 / (b->t - a->t);
}

static void print_cold(const char *what, double base, const coldrow *r)
{
	printf("%-46s %12.0f %12.0f %8.3f   %6llu reads of %5.0f KiB, %4.1f in flight, %llu major faults\n", what,
	       base, r->mbs, r->mbs / base, (unsigned long long)r->reads, r->kib, r->depth,
	       (unsigned long long)r->majflt);
}

int main(int argc, char **argv)
{
	int repeats = 3;
	const char *rows = "warm,direct,cold";
	for (int i = 1; i < argc; i++) {
		if (sscanf(argv[i], "repeats=%d", &repeats) == 1 && repeats >= 1)
			continue;
		if (sscanf(argv[i], "readahead=%d", &map_readahead) == 1 && map_readahead >= 1)
			continue;
		if (sscanf(argv[i], "readahead_mb=%d", &map_readahead_mb) == 1 && map_readahead_mb >= 0)
			continue;
		if (!strncmp(argv[i], "crc=", 4)) {
			if (gf_crc32c_use(argv[i] + 4))
				die("%s", gf_errmsg());
			continue;
		}
		if (!strncmp(argv[i], "rows=", 5)) {
			rows = argv[i] + 5;
			continue;
		}
		die("usage: bench_reader [repeats=N] [readahead=N] [readahead_mb=N] [crc=NAME] [rows=warm,direct,cold]");
	}
	int warm = strstr(rows, "warm") != NULL, direct = strstr(rows, "direct") != NULL;
	int cold = strstr(rows, "cold") != NULL;
	const char *path = bench_dataset(COUNT);
	gf_dataset *ds;
	if (gf_dataset_open(path, &ds))
		die("%s", gf_errmsg());
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	uint64_t files = 0;
	for (uint32_t i = 0; i < m->nshards; i++)
		files += gf_dataset_shard(ds, i)->file_size;
	struct stat st;
	if (stat(gf_dataset_shard(ds, 0)->file, &st) == 0) {
		dev_major = major(st.st_dev);
		dev_minor = minor(st.st_dev);
	}
	uint64_t sum;

	/* warm page cache */
	double bw = 0, rw = 0, rws = 0, rwn = 0, rwr = 0;
	if (warm) {
		warm_files(ds);
		for (int r = 0; r < repeats; r++) {
			bw = best(bw, baseline(ds, WARM_PASSES, 0, &sum));
			rw = best(rw, reader(path, WARM_PASSES, 0, 0, 2));
			rwr = best(rwr, reader(path, WARM_PASSES, 0, 0, 1));
			rwn = best(rwn, reader(path, WARM_PASSES, 0, 0, 0));
			rws = best(rws, reader(path, WARM_PASSES, 0, 1, 2));
		}
	}
	/* O_DIRECT on both sides (the page cache plays no part) */
	double bd = 0, rd = 0, rdn = 0, rdr = 0;
	if (direct)
		for (int r = 0; r < repeats; r++) {
			bd = best(bd, baseline(ds, DIRECT_PASSES, 1, &sum));
			rd = best(rd, reader(path, DIRECT_PASSES, 1, 0, 2));
			rdr = best(rdr, reader(path, DIRECT_PASSES, 1, 0, 1));
			rdn = best(rdn, reader(path, DIRECT_PASSES, 1, 0, 0));
		}
	/* cold page cache: the three alternate (the disk's speed varies) */
	int dropped = 1;
	coldrow bc = { 0 }, rmc = { 0 }, rdc = { 0 };
	if (cold)
		for (int r = 0; r < repeats; r++) {
			iostat a, b;
			dropped &= drop_caches();
			a = io_now();
			double x = baseline(ds, 1, 0, &sum);
			b = io_now();
			io_diff(&a, &b, x, &bc);
			dropped &= drop_caches();
			a = io_now();
			x = reader(path, 1, 0, 0, 2);
			b = io_now();
			io_diff(&a, &b, x, &rmc);
			dropped &= drop_caches();
			a = io_now();
			x = reader(path, 1, 1, 0, 2);
			b = io_now();
			io_diff(&a, &b, x, &rdc);
		}
	print_crc_path(stdout);
	printf("reader: %llu records, %.1f MB payload in %u shards (%.1f MB of files), best of %d; map path readahead "
	       "%d, readahead_mb %d\n", (unsigned long long)m->count, (double)m->payload_bytes / 1e6, m->nshards,
	       (double)files / 1e6, repeats, map_readahead, map_readahead_mb);
	printf("baseline MB/s count file bytes, reader MB/s payload bytes; both touch every byte once.\n");
	printf("payload CRC-32C (%s) checked by the consumer (as jpeg_decode does) unless a row says otherwise.\n",
	       gf_crc32c_impl());
	printf("%-46s %12s %12s %8s\n", "measurement", "read() MB/s", "reader MB/s", "ratio");
	if (warm)
		printf("%-46s %12.0f %12.0f %8.3f\n", "warm cache: map + fadvise vs read()", bw, rw, rw / bw);
	if (direct)
		printf("%-46s %12.0f %12.0f %8.3f\n", "O_DIRECT: direct=true vs O_DIRECT read()", bd, rd, rd / bd);
	if (warm) {
		printf("%-46s %12.0f %12.0f %8.3f\n", "  (warm cache: CRC checked in the reader)", bw, rwr, rwr / bw);
		printf("%-46s %12.0f %12.0f %8.3f\n", "  (warm cache: checksums = false)", bw, rwn, rwn / bw);
	}
	if (direct) {
		printf("%-46s %12.0f %12.0f %8.3f\n", "  (O_DIRECT: CRC checked in the reader)", bd, rdr, rdr / bd);
		printf("%-46s %12.0f %12.0f %8.3f\n", "  (O_DIRECT: checksums = false)", bd, rdn, rdn / bd);
	}
	if (cold) {
		if (!dropped)
			printf("NOTE: the page cache could not be dropped (not root?): the cold rows below ran warm.\n");
		print_cold("  (cold cache: read() alone)", bc.mbs, &bc);
		print_cold("  (cold cache: map + fadvise vs read())", bc.mbs, &rmc);
		print_cold("  (cold cache: direct=true vs read())", bc.mbs, &rdc);
	}
	if (warm)
		printf("%-46s %12.0f %12.0f %8.3f\n", "  (warm cache: shuffled, window 4096)", bw, rws, rws / bw);
	gf_dataset_close(ds);
	if (!warm || !direct) {
		printf("reader: ratio_vs_read=n/a (rows=%s: the ratio needs warm and direct) target=0.90\n", rows);
		return 0;
	}
	double ratio_w = rw / bw, ratio_d = rd / bd;
	printf("reader: ratio_vs_read=%.2f target=0.90\n", ratio_w < ratio_d ? ratio_w : ratio_d);
	return 0;
}
