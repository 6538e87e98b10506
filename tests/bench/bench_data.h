/* Helpers shared by the data-path benchmarks (bench_decode, bench_reader,
 * bench_feed): the ImageNet-like benchmark shards (made once, kept under
 * the build directory), a counting sink stage, graph runs, timing, and
 * dropping the page cache. Header-only.
 */
#ifndef GANFLOW_BENCH_DATA_H
#define GANFLOW_BENCH_DATA_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ganflow/crc32c.h>
#include <ganflow/dataset.h>
#include <ganflow/err.h>
#include <ganflow/graph.h>
#include <ganflow/log.h>
#include <ganflow/stage.h>

#include "../../datasets/convert.h"

#define BENCH_FN static __attribute__((unused))

BENCH_FN void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
BENCH_FN void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* Build directory ($GF_BUILD from tests/bench/run, else $GF_BINARY_DIR, else "."). */
BENCH_FN const char *build_dir(void)
{
	const char *b = getenv("GF_BUILD");
	if (!b || !b[0])
		b = getenv("GF_BINARY_DIR");
	return b && b[0] ? b : ".";
}

/* The ImageNet-like shards of `count` images of w x h (q 90; ~100 KB at
 * ImageNet's 500 x 375), made on first use under BUILD/bench-data/ (64 MiB
 * shards). */
BENCH_FN const char *bench_dataset_wh(uint64_t count, int w, int h)
{
	static char path[4200];
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/bench-data", build_dir());
	mkdir(dir, 0777);
	if (w == 500 && h == 375)
		snprintf(path, sizeof(path), "%s/imagenet-like-%llu", dir, (unsigned long long)count);
	else
		snprintf(path, sizeof(path), "%s/imagenet-like-%llu-%dx%d", dir, (unsigned long long)count, w, h);
	gf_dataset *ds;
	if (gf_dataset_open(path, &ds) == 0) {
		uint64_t n = gf_dataset_metadata(ds)->count;
		gf_dataset_close(ds);
		if (n == count)
			return path;
	}
	fprintf(stderr, "bench: making %llu ImageNet-like %dx%d JPEGs in %s (once)\n", (unsigned long long)count, w, h,
	        path);
	gf_synth_opts so = { .count = count, .width = w, .height = h, .quality = 90, .classes = 10, .seed = 1 };
	gf_convert_opts o;
	gf_convert_defaults(&o);
	o.encoding = GF_ENC_JPEG;
	o.shard_bytes = 64ull << 20;
	o.overwrite = 1;
	o.what = "bench data";
	gf_convert_stats st;
	if (gf_convert_synth(path, &so, &o, &st))
		die("making %s: %s", path, gf_errmsg());
	return path;
}

/* The 500 x 375 set. */
BENCH_FN const char *bench_dataset(uint64_t count)
{
	return bench_dataset_wh(count, 500, 375);
}

/* ---- timing ---- */

BENCH_FN double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

BENCH_FN double thread_cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- CPU time of one stage's thread ----
 * The runtime names each instance's thread "gf:NAME". A monitor thread
 * reads /proc/self/task/<tid>/schedstat (nanoseconds on a CPU) of the
 * threads with that name every millisecond and keeps the last value seen
 * (the thread's CPU time when it exits, to within a millisecond). */

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>

static char mon_comm[32];
static atomic_int mon_stop;
static double mon_cpu; /* seconds, summed over matching threads */
static pthread_t mon_thread;

static void *mon_main(void *arg)
{
	(void)arg;
	struct {
		long tid;
		double cpu;
	} seen[64];
	int nseen = 0;
	while (!atomic_load(&mon_stop)) {
		DIR *d = opendir("/proc/self/task");
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			char p[64], comm[64];
			snprintf(p, sizeof(p), "/proc/self/task/%.20s/comm", e->d_name);
			FILE *f = fopen(p, "r");
			if (!f)
				continue;
			int ok = fgets(comm, sizeof(comm), f) != NULL;
			fclose(f);
			comm[strcspn(comm, "\n")] = '\0';
			if (!ok || strcmp(comm, mon_comm))
				continue;
			/* schedstat: nanoseconds on a CPU, waiting, timeslices */
			snprintf(p, sizeof(p), "/proc/self/task/%.20s/schedstat", e->d_name);
			unsigned long long ns = 0;
			if (!(f = fopen(p, "r")))
				continue;
			ok = fscanf(f, "%llu", &ns) == 1;
			fclose(f);
			if (!ok)
				continue;
			long tid = atol(e->d_name);
			int i = 0;
			while (i < nseen && seen[i].tid != tid)
				i++;
			if (i == nseen && nseen < 64)
				seen[nseen++].tid = tid;
			if (i < 64)
				seen[i].cpu = (double)ns * 1e-9;
		}
		if (d)
			closedir(d);
		double sum = 0;
		for (int i = 0; i < nseen; i++)
			sum += seen[i].cpu;
		mon_cpu = sum;
		usleep(1000);
	}
	return NULL;
}

/* Starts watching the threads named comm ("gf:jpeg_decode"). */
BENCH_FN void thread_watch_start(const char *comm)
{
	snprintf(mon_comm, sizeof(mon_comm), "%s", comm);
	atomic_store(&mon_stop, 0);
	mon_cpu = 0;
	if (pthread_create(&mon_thread, NULL, mon_main, NULL))
		die("cannot start the monitor thread");
}

/* Stops watching; returns their CPU seconds. */
BENCH_FN double thread_watch_stop(void)
{
	atomic_store(&mon_stop, 1);
	pthread_join(mon_thread, NULL);
	return mon_cpu;
}

/* Drops the page cache; returns 1 when it worked (root, writable /proc). */
BENCH_FN int drop_caches(void)
{
	sync();
	FILE *f = fopen("/proc/sys/vm/drop_caches", "w");
	if (!f)
		return 0;
	int ok = fputs("3\n", f) >= 0;
	ok &= fclose(f) == 0;
	return ok;
}

/* Reads files sequentially to warm the page cache; returns bytes. */
BENCH_FN uint64_t warm_files(const gf_dataset *ds)
{
	static char buf[1 << 20];
	uint64_t total = 0;
	for (uint32_t i = 0; i < gf_dataset_metadata(ds)->nshards; i++) {
		FILE *f = fopen(gf_dataset_shard(ds, i)->file, "rb");
		if (!f)
			die("%s: %s", gf_dataset_shard(ds, i)->file, strerror(errno));
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			total += n;
		fclose(f);
	}
	return total;
}

/* One line naming the CRC-32C path in use and the CPU flags that choose
 * it, so that no figure is quoted without its path. */
BENCH_FN void print_crc_path(FILE *f)
{
	char model[128] = "?", line[512];
	FILE *c = fopen("/proc/cpuinfo", "r");
	while (c && fgets(line, sizeof(line), c))
		if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
			snprintf(model, sizeof(model), "%s", strchr(line, ':') + 2);
			model[strcspn(model, "\n")] = 0;
			break;
		}
	if (c)
		fclose(c);
	fprintf(f, "CRC-32C path: %s; CPU %s:", gf_crc32c_impl(), model);
#if defined(__x86_64__)
	__builtin_cpu_init();
	fprintf(f, " sse4.2 %s, pclmulqdq %s, avx2 %s, avx512f %s, avx512vl %s, vpclmulqdq %s",
	        __builtin_cpu_supports("sse4.2") ? "yes" : "no", __builtin_cpu_supports("pclmul") ? "yes" : "no",
	        __builtin_cpu_supports("avx2") ? "yes" : "no", __builtin_cpu_supports("avx512f") ? "yes" : "no",
	        __builtin_cpu_supports("avx512vl") ? "yes" : "no", __builtin_cpu_supports("vpclmulqdq") ? "yes" : "no");
#else
	fprintf(f, " not x86-64");
#endif
	const char *env = getenv("GF_CRC32C"), *nofold = getenv("GF_CRC32C_NO_FOLD");
	if ((env && *env) || (nofold && *nofold))
		fprintf(f, " (GF_CRC32C=%s GF_CRC32C_NO_FOLD=%s)", env ? env : "", nofold ? nofold : "");
	fprintf(f, "\n");
}

/* Sum of 64-bit words (and the tail bytes): touches every byte once, the
 * "consumer" of both the baselines and the stages in the benchmarks. */
static inline uint64_t touch(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t s = 0, w;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		memcpy(&w, b + i, 8);
		s += w;
	}
	for (; i < n; i++)
		s += b[i];
	return s;
}

/* ---- a sink that counts (and optionally touches) what arrives ---- */

static uint64_t sink_msgs, sink_items, sink_bytes, sink_sum, sink_checked;
static int sink_touch;

static int bsink_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	(void)ctx;
	(void)p;
	*self = NULL;
	return 0;
}

static int bsink_run(void *self, gf_ctx *ctx)
{
	(void)self;
	for (;;) {
		gf_msg *m;
		int rc = gf_pop(ctx, 0, &m);
		if (rc)
			return rc;
		sink_msgs++;
		if (m->ntensors > 0) {
			size_t bytes = gf_tensor_bytes(&m->t[0]);
			sink_bytes += bytes;
			sink_items += m->t[0].ndim == 4 ? (uint64_t)m->t[0].shape[0] : 1;
			if (sink_touch == 2 && m->ntensors >= 2 && m->t[1].dtype == GF_I32 && m->t[1].ndim == 1 &&
			    m->t[1].shape[0] == 6 && (((const int32_t *)m->t[1].data)[4] & GF_RECORD_CRC32C)) {
				/* a consumer that checks the CRC the reader passed along:
				 * the check is its pass over every byte */
				uint32_t c = gf_crc32c(0, m->t[0].data, bytes);
				if (c != (uint32_t)((const int32_t *)m->t[1].data)[5])
					die("bench sink: key %lld: payload checksum mismatch", (long long)m->key);
				sink_sum += c;
				sink_checked++;
			} else if (sink_touch) {
				sink_sum += touch(m->t[0].data, bytes);
			}
		}
		gf_msg_release(m);
	}
}

static const gf_port_desc bsink_inputs[] = { { "in", "any", 0, "anything" } };

static const gf_stage_desc bsink_desc = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "bench_sink",
	.doc = "counts what reaches it",
	.inputs = bsink_inputs,
	.ninputs = 1,
	.create = bsink_create,
	.run = bsink_run,
};

/* The same sink, declaring that it checks records' CRC-32C (so that
 * lmdb_reader leaves the check to it): run_steps(..., 2). */
static const gf_port_desc bsink_crc_inputs[] = { { "in", "any", GF_PORT_CHECKS_CRC, "anything" } };

static const gf_stage_desc bsink_crc_desc = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "bench_sink_crc",
	.doc = "counts what reaches it, checks records' CRC-32C",
	.inputs = bsink_crc_inputs,
	.ninputs = 1,
	.create = bsink_create,
	.run = bsink_run,
};

typedef struct bstep {
	const char *stage, *in, *out;
	gf_value params;
	int workers;
} bstep;

/* Runs steps -> sink; returns the wall time in seconds (dies on failure).
 * touch_payload: 0 count only, 1 touch every payload byte, 2 as 1 but
 * through a sink that checks a CRC-32C passed along with records. */
BENCH_FN double run_steps(bstep *s, int n, int touch_payload)
{
	gf_graph *g;
	int prev = -1, node;
	sink_msgs = sink_items = sink_bytes = sink_sum = sink_checked = 0;
	sink_touch = touch_payload;
	if (gf_graph_create(&g))
		die("graph: out of memory");
	for (int i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof(name), "%s", s[i].stage);
		if (gf_graph_add(g, s[i].stage, name, &s[i].params, s[i].workers ? s[i].workers : 1, &node) ||
		    (prev >= 0 && gf_graph_connect(g, prev, s[i - 1].out, node, s[i].in, NULL)))
			die("%s", gf_graph_error(g));
		gf_value_free(&s[i].params);
		prev = node;
	}
	if (gf_graph_add_desc(g, touch_payload == 2 ? &bsink_crc_desc : &bsink_desc, "sink", NULL, 1, &node) ||
	    gf_graph_connect(g, prev, s[n - 1].out, node, "in", NULL))
		die("%s", gf_graph_error(g));
	gf_run_info info = { .rank = 0, .world = 1, .seed = 1 };
	double t0 = gf_now();
	int rc = gf_graph_run(g, &info, GF_GRAPH_QUIET);
	double t = gf_now() - t0;
	if (rc)
		die("run: %s", gf_graph_error(g));
	gf_graph_destroy(g);
	return t;
}

/* Map builder: kv("path", gf_value_str(p), ..., NULL). */
BENCH_FN gf_value kv(const char *key, ...)
{
	gf_value m = gf_value_map();
	va_list ap;
	va_start(ap, key);
	for (const char *k = key; k; k = va_arg(ap, const char *)) {
		gf_value v = va_arg(ap, gf_value);
		gf_value_set(&m, k, v);
	}
	va_end(ap);
	return m;
}

#endif
