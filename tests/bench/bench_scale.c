/* bench_scale: the data path at ImageNet scale (issue 35): what grows with
 * the data, batches' class mix on class-sorted data, every record once per
 * epoch over many parts, resume, records/s through reader + decode.
 *
 * Sets, built once into a cache folder ($GF_SCALE_DIR, default
 * ~/.cache/ganflow/scale; reused while their record count matches):
 *   imagenet64-class  1,281,167 records of 1000 classes, 64 x 64 RGB JPEG
 *                     (q 90, ~3 KB), class by class as a folder import
 *                     without shuffle: `ganflow dataset synth ... order=class`
 *   tiny-N            N = 128,116 / 1,281,167 / 12,811,670 records of 1000
 *                     classes, 4 x 4 raw RGB, class by class: the growth curve
 *   caffe-1281167     a Caffe LMDB (convert_imageset's layout: keys
 *                     "%08d_n%08u/n%08u_%d.JPEG", Datums of 3 x 4 x 4 raw
 *                     bytes) of 1,281,167 records, class by class
 * Columns, per set:
 *   open_ms       gf_dataset_open, page cache warm (best of 3); cold_ms with
 *                 cold=1
 *   info_s        `ganflow dataset info` run as a process: wall time (its
 *                 peak resident memory is printed below the table: the
 *                 command's own start dominates it)
 *   handle_MB     what an open dataset handle allocates (RssAnon of a child
 *                 process after gf_dataset_open, less before); map_MB the
 *                 pages of the files it maps meanwhile (RssFile: page cache,
 *                 shared and given back under memory pressure: a ganflow
 *                 shard's meta record, read and checked at open)
 *   reader_MB     a process running lmdb_reader (the stage's defaults,
 *                 epochs = 1) -> a sink over up to 65,536 records: the
 *                 memory it allocated (RssAnon, read at the end, dataset
 *                 still open); peak_MB its peak (VmHWM: the map's pages
 *                 of the records read, and the kernel's fault-around of
 *                 their neighbours already in the page cache, included)
 *   rec/s         imagenet64-class only: lmdb_reader -> jpeg_decode (64 x
 *                 64, workers = the CPUs) -> sink over 262,144 records, wall
 *                 and per CPU-second of the process
 *   class_mix     imagenet64-class only, the reader's default order:
 *                 distinct classes per batch of 256 and the chi-square of
 *                 per-batch class counts, each against uniform sampling's
 *                 expectation (1000 (1 - (1 - 1/1000)^256) = 225.9 classes;
 *                 chi2 (K - 1)(N - B)/(N - 1)); the lower of the two ratios
 * Lines after the table: the growth per record between the tiny sets (the
 * slope, so fixed costs drop out), the same mix for other block / window
 * settings and for a true uniform permutation of the same labels (measured),
 * every record exactly once per epoch over parts = 2, 8, 64, 512 (checked
 * by key through gf_stream, remainder = spread; equal parts checked too),
 * a stream stopped mid-epoch resuming at the same record, and `ganflow
 * dataset verify` of imagenet64-class (all CPUs). The per-core decode rate
 * against a bare TurboJPEG loop is tests/bench/run decode's.
 *
 * usage: bench_scale [sets=all|64|tiny|caffe] [cold=1] [skip=verify,parts] [small=N]
 *   cold=1  also opens each set on a dropped page cache (root; it drops the
 *           whole machine's cache: other jobs' timings suffer)
 *   small=N every set N times smaller, in a folder of its own (a quick check
 *           of the benchmark itself; the figures mean little)
 * Ends with "scale: class_mix=X target=0.95".
 */
#include <fcntl.h>
#include <lmdb.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "bench_data.h"

#define CLASSES 1000
#define BATCH 256
#define IN64 1281167ull

typedef struct set {
	const char *name;
	uint64_t count;
	int w, h, raw, caffe;
	/* measured */
	int have;
	double open_ms, open_cold_ms, info_s, info_mb, anon_mb, hwm_mb, handle_anon, handle_file;
	uint64_t reader_records;
} set;

static set sets[] = {
	{ .name = "imagenet64-class", .count = IN64, .w = 64, .h = 64, .raw = 0, .caffe = 0 },
	{ .name = "tiny-128116", .count = 128116, .w = 4, .h = 4, .raw = 1, .caffe = 0 },
	{ .name = "tiny-1281167", .count = IN64, .w = 4, .h = 4, .raw = 1, .caffe = 0 },
	{ .name = "tiny-12811670", .count = 12811670, .w = 4, .h = 4, .raw = 1, .caffe = 0 },
	{ .name = "caffe-1281167", .count = IN64, .w = 4, .h = 4, .raw = 1, .caffe = 1 },
};
#define NSETS (sizeof(sets) / sizeof(sets[0]))

static char cache[4096];

static void cache_dir(unsigned long long small)
{
	const char *d = getenv("GF_SCALE_DIR"), *home = getenv("HOME");
	if (d && d[0])
		snprintf(cache, sizeof(cache), "%s", d);
	else
		snprintf(cache, sizeof(cache), "%s/.cache/ganflow/scale", home && home[0] ? home : "/tmp");
	if (small > 1)
		snprintf(cache + strlen(cache), sizeof(cache) - strlen(cache), "/small-%llu", small);
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s", cache);
	for (char *p = tmp + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(tmp, 0777);
			*p = '/';
		}
	mkdir(tmp, 0777);
}

static const char *set_path(const set *s)
{
	static char p[4][4200];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", cache, s->name);
	return p[k];
}

/* ---- building the sets ---- */

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	do {
		p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	return n;
}

/* A Caffe LMDB as convert_imageset writes it without --shuffle: keys
 * "%08d_" + the file's path in the listing (class by class), raw Datums. */
static void make_caffe(const set *s, const char *path)
{
	char tmp[4300];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	gf_remove_tree(tmp);
	mkdir(tmp, 0777);
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	if (mdb_env_create(&env) || mdb_env_set_mapsize(env, 16ull << 30) || mdb_env_open(env, tmp, MDB_NOSYNC, 0644) ||
	    mdb_txn_begin(env, NULL, 0, &txn) || mdb_dbi_open(txn, NULL, 0, &dbi))
		die("%s: cannot create the LMDB", tmp);
	double t0 = gf_now();
	uint8_t val[128];
	for (uint64_t i = 0; i < s->count; i++) {
		uint32_t label = (uint32_t)(i * CLASSES / s->count);
		char key[96];
		int kl = snprintf(key, sizeof(key), "%08llu_n%08u/n%08u_%llu.JPEG", (unsigned long long)i, 1440764u + label,
		                  1440764u + label, (unsigned long long)(i * 7919 % 1000003));
		size_t n = 0;
		val[n++] = 1 << 3; /* channels */
		n += put_varint(val + n, 3);
		val[n++] = 2 << 3; /* height */
		n += put_varint(val + n, (uint64_t)s->h);
		val[n++] = 3 << 3; /* width */
		n += put_varint(val + n, (uint64_t)s->w);
		val[n++] = 4 << 3 | 2; /* data */
		size_t dl = (size_t)3 * s->h * s->w;
		n += put_varint(val + n, dl);
		for (size_t k = 0; k < dl; k++)
			val[n++] = (uint8_t)(i * 31 + k * 7);
		val[n++] = 5 << 3; /* label */
		n += put_varint(val + n, label);
		MDB_val k = { (size_t)kl, key }, v = { n, val };
		int rc = mdb_put(txn, dbi, &k, &v, MDB_APPEND);
		if (rc)
			die("%s: put %llu: %s", tmp, (unsigned long long)i, mdb_strerror(rc));
		if ((i & 65535) == 65535) {
			if (mdb_txn_commit(txn) || mdb_txn_begin(env, NULL, 0, &txn))
				die("%s: commit", tmp);
			gf_progress_bar(s->name, i + 1, s->count, t0);
		}
	}
	if (mdb_txn_commit(txn) || mdb_env_sync(env, 1))
		die("%s: commit", tmp);
	gf_progress_bar(s->name, s->count, s->count, t0);
	mdb_env_close(env);
	gf_remove_tree(path);
	if (rename(tmp, path))
		die("rename %s: %s", tmp, strerror(errno));
}

static void ensure_set(set *s)
{
	const char *path = set_path(s);
	gf_dataset *ds;
	if (gf_dataset_open(path, &ds) == 0) {
		const gf_dataset_meta *m = gf_dataset_metadata(ds);
		int ok = m->count == s->count && m->nclasses == CLASSES;
		gf_dataset_close(ds);
		if (ok)
			return;
	}
	gf_clearerr();
	fprintf(stderr, "bench: making %s (%llu records) in %s (once)\n", s->name, (unsigned long long)s->count, cache);
	if (s->caffe) {
		make_caffe(s, path);
		return;
	}
	gf_synth_opts so = { .count = s->count, .width = s->w, .height = s->h, .quality = 90, .classes = CLASSES,
		                 .seed = 1 };
	gf_convert_opts o;
	gf_convert_defaults(&o);
	o.encoding = s->raw ? GF_ENC_RAW : GF_ENC_JPEG;
	o.shuffle = 0; /* class by class: the hard case for the reader's order */
	o.overwrite = 1;
	o.what = s->name;
	gf_convert_stats st;
	if (gf_convert_synth(path, &so, &o, &st))
		die("making %s: %s", path, gf_errmsg());
}

/* ---- processes ---- */

/* Runs argv (stdout and stderr to log, or /dev/null); returns its exit
 * status, wall seconds and peak resident MB. fork + exec, not posix_spawn:
 * a vfork'ed child shares this process's memory until it execs, and the
 * kernel then records that memory's high-water mark (this process's,
 * gigabytes of mapped sets by the end) as the child's ru_maxrss; a forked
 * child starts with a copy of the private pages only. */
static int run_proc(char *const argv[], const char *log, double *wall, double *mb)
{
	double t0 = gf_now();
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	int st;
	struct rusage ru;
	if (wait4(pid, &st, 0, &ru) != pid)
		die("wait4: %s", strerror(errno));
	*wall = gf_now() - t0;
	*mb = (double)ru.ru_maxrss / 1024.0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* ---- the reader's memory, in a child process ---- */

static uint64_t rsink_n;
static double rsink_anon, rsink_file, rsink_hwm;

static double status_kb(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	double v = -1;
	size_t kl = strlen(key);
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':')
			v = atof(line + kl + 1);
	if (f)
		fclose(f);
	return v;
}

static int rsink_run(void *self, gf_ctx *ctx)
{
	(void)self;
	gf_msg *m;
	while (gf_pop(ctx, 0, &m) == 0) {
		rsink_n++;
		gf_msg_release(m);
	}
	/* the reader has sent everything; it and its dataset are still alive */
	rsink_anon = status_kb("RssAnon");
	rsink_file = status_kb("RssFile");
	rsink_hwm = status_kb("VmHWM");
	return 0;
}

static const gf_port_desc rsink_inputs[] = { { "in", "any", 0, "anything" } };
static const gf_stage_desc rsink_desc = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "rss_sink",
	.doc = "counts, then reads the process's resident memory",
	.inputs = rsink_inputs,
	.ninputs = 1,
	.create = bsink_create,
	.run = rsink_run,
};

/* The memory figures come from a fresh process (this program run again:
 * "child-open PATH" or "child-reader PATH PARTS"), which prints them on its
 * standard output: a forked child would start with a copy of this
 * process's heap, and what it allocates could land on pages already
 * counted. */
static void child(const char *mode, const char *path, uint64_t parts, double *out, int n)
{
	int fd[2];
	if (pipe(fd))
		die("pipe");
	char num[32];
	snprintf(num, sizeof(num), "%llu", (unsigned long long)parts);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		execl("/proc/self/exe", "bench_scale", mode, path, num, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	char buf[512];
	ssize_t got = 0, k;
	while (got < (ssize_t)sizeof(buf) - 1 && (k = read(fd[0], buf + got, sizeof(buf) - 1 - (size_t)got)) > 0)
		got += k;
	buf[got] = '\0';
	close(fd[0]);
	int st;
	waitpid(pid, &st, 0);
	char *p = buf;
	for (int i = 0; i < n; i++)
		out[i] = strtod(p, &p);
	if (!WIFEXITED(st) || WEXITSTATUS(st) || got == 0)
		die("bench_scale %s %s failed", mode, path);
}

/* child-reader: lmdb_reader (defaults, epochs = 1, part 0 of `parts`) ->
 * rss_sink; prints records, RssAnon, RssFile, VmHWM (KiB). */
static int child_reader(const char *path, uint64_t parts)
{
	gf_graph *g;
	int r, k;
	gf_value p = kv("path", gf_value_str(path), "epochs", gf_value_int(1), "parts", gf_value_int((int64_t)parts), "part",
	                gf_value_int(0), NULL);
	if (gf_graph_create(&g) || gf_graph_add(g, "lmdb_reader", "reader", &p, 1, &r) ||
	    gf_graph_add_desc(g, &rsink_desc, "sink", NULL, 1, &k) || gf_graph_connect(g, r, "samples", k, "in", NULL))
		die("%s", gf_graph_error(g));
	gf_value_free(&p);
	gf_run_info info = { .rank = 0, .world = 1, .seed = 1 };
	if (gf_graph_run(g, &info, GF_GRAPH_QUIET))
		die("reader on %s: %s", path, gf_graph_error(g));
	gf_graph_destroy(g);
	printf("%llu %.0f %.0f %.0f\n", (unsigned long long)rsink_n, rsink_anon, rsink_file, rsink_hwm);
	return 0;
}

/* child-open: what an open dataset handle holds (every user opens one:
 * dataset info, the reader, g_step's labels); prints the growth of RssAnon
 * and RssFile (KiB) across gf_dataset_open. */
static int child_open(const char *path)
{
	double a0 = status_kb("RssAnon"), f0 = status_kb("RssFile");
	gf_dataset *ds;
	if (gf_dataset_open(path, &ds))
		die("%s", gf_errmsg());
	printf("%.0f %.0f\n", status_kb("RssAnon") - a0, status_kb("RssFile") - f0);
	gf_dataset_close(ds);
	return 0;
}

static void reader_rss(set *s, uint64_t want)
{
	double v[4];
	child("child-reader", set_path(s), s->count / want + (s->count % want != 0), v, 4);
	s->reader_records = (uint64_t)v[0];
	s->anon_mb = v[1] / 1024.0;
	s->hwm_mb = v[3] / 1024.0;
}

static void handle_rss(set *s)
{
	double v[2];
	child("child-open", set_path(s), 0, v, 2);
	s->handle_anon = v[0] / 1024.0;
	s->handle_file = v[1] / 1024.0;
}

/* ---- per set ---- */

static double open_ms(const char *path)
{
	gf_dataset *ds;
	double t0 = gf_now();
	if (gf_dataset_open(path, &ds))
		die("%s", gf_errmsg());
	double t = gf_now() - t0;
	gf_dataset_close(ds);
	return 1e3 * t;
}

static void measure_set(set *s, int cold)
{
	const char *path = set_path(s);
	s->open_ms = 1e30;
	for (int i = 0; i < 3; i++) {
		double t = open_ms(path);
		if (t < s->open_ms)
			s->open_ms = t;
	}
	s->open_cold_ms = -1;
	if (cold && drop_caches())
		s->open_cold_ms = open_ms(path);
	char bin[4200];
	snprintf(bin, sizeof(bin), "%s/ganflow", build_dir());
	char *argv[] = { bin, "dataset", "info", (char *)path, NULL };
	if (run_proc(argv, NULL, &s->info_s, &s->info_mb))
		die("ganflow dataset info %s failed", path);
	handle_rss(s);
	reader_rss(s, 65536);
	s->have = 1;
}

/* ---- class mix ---- */

typedef struct mix {
	double distinct, chi2;
} mix;

static mix mix_of(const int32_t *lab, uint64_t n)
{
	uint32_t count[CLASSES];
	double distinct = 0, chi2 = 0, e = (double)BATCH / CLASSES;
	uint64_t nb = n / BATCH;
	for (uint64_t b = 0; b < nb; b++) {
		memset(count, 0, sizeof(count));
		for (uint64_t i = b * BATCH; i < (b + 1) * BATCH; i++)
			count[lab[i]]++;
		for (int c = 0; c < CLASSES; c++) {
			distinct += count[c] > 0;
			chi2 += (count[c] - e) * (count[c] - e) / e;
		}
	}
	return (mix){ distinct / (double)nb, chi2 / (double)nb };
}

static double u_distinct(void)
{
	return CLASSES * (1.0 - pow(1.0 - 1.0 / CLASSES, BATCH));
}

static double u_chi2(uint64_t n)
{
	return (double)(CLASSES - 1) * (double)(n - BATCH) / (double)(n - 1);
}

static double mix_ratio(mix m, uint64_t n)
{
	double a = m.distinct / u_distinct(), b = u_chi2(n) / m.chi2;
	return a < b ? a : b;
}

/* Labels of one epoch in the stream's order (read from the records). */
static uint64_t stream_labels(gf_dataset *ds, const gf_order_opts *o, int32_t *lab)
{
	gf_stream_opts so = { .order = *o, .epochs = 1, .readahead = 64, .readahead_bytes = 32ull << 20,
		                  .no_checksum = 1 };
	gf_stream *s;
	if (gf_stream_open(ds, &so, &s))
		die("%s", gf_errmsg());
	uint64_t n = 0;
	gf_stream_item it;
	int rc;
	while ((rc = gf_stream_next(s, &it)) == 0)
		lab[n++] = it.rec.h.label;
	if (rc != GF_EEOF)
		die("stream: %s", gf_errmsg());
	gf_stream_close(s);
	return n;
}

/* ---- exactness and resume ---- */

/* Keys of every part's epoch `epoch` through gf_stream; returns the
 * records read twice (dies) or 0, and the total read. */
static uint64_t parts_pass(gf_dataset *ds, uint32_t world, int spread, uint64_t epoch, uint8_t *seen, uint64_t n,
                           uint64_t *twice)
{
	memset(seen, 0, n);
	uint64_t total = 0;
	*twice = 0;
	for (uint32_t r = 0; r < world; r++) {
		gf_stream_opts so = { .order = { .shuffle = 1, .window = 65536, .seed = 1, .rank = r, .world = world,
			                             .spread_remainder = spread },
			                  .epochs = epoch + 1,
			                  .start_epoch = epoch,
			                  .readahead = 64,
			                  .no_checksum = 1 };
		gf_stream *s;
		if (gf_stream_open(ds, &so, &s))
			die("%s", gf_errmsg());
		gf_stream_item it;
		int rc;
		while ((rc = gf_stream_next(s, &it)) == 0) {
			if (seen[it.rec.key])
				(*twice)++;
			seen[it.rec.key] = 1;
			total++;
		}
		if (rc != GF_EEOF)
			die("stream: %s", gf_errmsg());
		gf_stream_close(s);
	}
	return total;
}

/* Stops a stream at several points of two epochs and resumes it at the
 * recorded (epoch, pos): the next `check` keys must be those of the pass
 * that never stopped. Returns the number of stops checked. */
static int resume_check(gf_dataset *ds, uint32_t rank, uint32_t world, uint64_t check)
{
	gf_stream_opts so = { .order = { .shuffle = 1, .window = 65536, .seed = 1, .rank = rank, .world = world },
		                  .epochs = 2,
		                  .readahead = 64,
		                  .no_checksum = 1 };
	gf_stream *s;
	if (gf_stream_open(ds, &so, &s))
		die("%s", gf_errmsg());
	uint64_t len = 0, n = 0, cap = 1 << 20;
	uint64_t *keys = malloc(cap * sizeof(uint64_t)), *ep = malloc(cap * sizeof(uint64_t)),
	         *pos = malloc(cap * sizeof(uint64_t));
	gf_stream_item it;
	int rc;
	while ((rc = gf_stream_next(s, &it)) == 0) {
		if (n == cap) {
			cap *= 2;
			keys = realloc(keys, cap * sizeof(uint64_t));
			ep = realloc(ep, cap * sizeof(uint64_t));
			pos = realloc(pos, cap * sizeof(uint64_t));
		}
		keys[n] = it.rec.key;
		ep[n] = it.epoch;
		pos[n] = it.pos;
		if (it.epoch == 0)
			len = it.pos;
		n++;
	}
	gf_stream_close(s);
	const uint64_t cuts[] = { 0, 12345, len / 2 + 7, len - 100, len - 1, len + 65535, len + len / 3 };
	int checked = 0;
	for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
		uint64_t at = cuts[c];
		if (at + 1 >= n)
			continue;
		gf_stream_opts r = so;
		r.start_epoch = ep[at];
		r.start_pos = pos[at];
		if (gf_stream_open(ds, &r, &s))
			die("%s", gf_errmsg());
		for (uint64_t i = at + 1; i < n && i <= at + check; i++) {
			if ((rc = gf_stream_next(s, &it)))
				die("resume after %llu: %s", (unsigned long long)at, gf_errmsg());
			if (it.rec.key != keys[i])
				die("resume at epoch %llu pos %llu: record %llu is key %llu, the pass without a stop read %llu",
				    (unsigned long long)ep[at], (unsigned long long)pos[at], (unsigned long long)(i - at),
				    (unsigned long long)it.rec.key, (unsigned long long)keys[i]);
		}
		gf_stream_close(s);
		checked++;
	}
	free(keys);
	free(ep);
	free(pos);
	return checked;
}

/* ---- main ---- */

static int want_set(const set *s, const char *which)
{
	if (!strcmp(which, "all"))
		return 1;
	if (!strcmp(which, "64"))
		return !strcmp(s->name, "imagenet64-class");
	if (!strcmp(which, "tiny"))
		return !strncmp(s->name, "tiny-", 5);
	if (!strcmp(which, "caffe"))
		return s->caffe;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "child-reader"))
		return child_reader(argv[2], strtoull(argv[3], NULL, 10));
	if (argc == 4 && !strcmp(argv[1], "child-open"))
		return child_open(argv[2]);
	const char *which = "all", *skip = "";
	int cold = 0;
	unsigned long long small = 1;
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "sets=", 5))
			which = argv[i] + 5;
		else if (!strncmp(argv[i], "skip=", 5))
			skip = argv[i] + 5;
		else if (sscanf(argv[i], "cold=%d", &cold) != 1 && sscanf(argv[i], "small=%llu", &small) != 1)
			die("usage: bench_scale [sets=all|64|tiny|caffe] [cold=1] [skip=verify,parts] [small=N]");
	}
	if (small > 1) /* every set N times smaller (a check of the benchmark itself) */
		for (size_t i = 0; i < NSETS; i++)
			sets[i].count /= small;
	set *in = &sets[0];
	cache_dir(small);
	for (size_t i = 0; i < NSETS; i++)
		if (want_set(&sets[i], which))
			ensure_set(&sets[i]);
	FILE *up = fopen("/proc/loadavg", "r");
	char load[64] = "?";
	if (up && fgets(load, sizeof(load), up))
		load[strcspn(load, "\n")] = '\0';
	if (up)
		fclose(up);
	printf("sets in %s; load average %s; %ld CPUs\n", cache, load, sysconf(_SC_NPROCESSORS_ONLN));
	for (size_t i = 0; i < NSETS; i++)
		if (want_set(&sets[i], which))
			measure_set(&sets[i], cold);

	/* imagenet64-class: records/s, class mix, parts, resume, verify */
	double rate = -1, rate_cpu = -1, ratio = -1;
	mix mdef = { 0, 0 };
	if (in->have) {
		const char *path = set_path(in);
		gf_dataset *ds;
		if (gf_dataset_open(path, &ds))
			die("%s", gf_errmsg());
		warm_files(ds);
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		gf_graph *g;
		int r, d, k;
		uint64_t want = 262144 / small, parts = in->count / want;
		gf_value pr = kv("path", gf_value_str(path), "epochs", gf_value_int(1), "parts", gf_value_int((int64_t)parts),
		                 "part", gf_value_int(0), NULL);
		gf_value pd = kv("size", gf_value_int(64), "channels", gf_value_int(3), NULL);
		if (gf_graph_create(&g) || gf_graph_add(g, "lmdb_reader", "reader", &pr, 1, &r) ||
		    gf_graph_add(g, "jpeg_decode", "decode", &pd, (int)ncpu, &d) ||
		    gf_graph_add_desc(g, &bsink_desc, "sink", NULL, 1, &k) ||
		    gf_graph_connect(g, r, "samples", d, "records", NULL) || gf_graph_connect(g, d, "samples", k, "in", NULL))
			die("%s", gf_graph_error(g));
		gf_value_free(&pr);
		gf_value_free(&pd);
		sink_msgs = 0;
		gf_run_info info = { .rank = 0, .world = 1, .seed = 1 };
		double c0 = cpu_now(), t0 = gf_now();
		if (gf_graph_run(g, &info, GF_GRAPH_QUIET))
			die("%s", gf_graph_error(g));
		double wall = gf_now() - t0, cpu = cpu_now() - c0;
		gf_graph_destroy(g);
		rate = (double)sink_msgs / wall;
		rate_cpu = (double)sink_msgs / cpu;

		int32_t *lab = malloc(in->count * sizeof(int32_t));
		gf_order_opts def = { .shuffle = 1, .window = 65536, .seed = 1 }; /* lmdb_reader's defaults */
		uint64_t n = stream_labels(ds, &def, lab);
		mdef = mix_of(lab, n);
		ratio = mix_ratio(mdef, n);
		gf_order *ord;
		gf_order_create(ds, &def, &ord);
		uint64_t block = gf_order_block(ord);
		gf_order_destroy(ord);

		/* the table */
		printf("\n%-17s %10s %8s %8s %7s %9s %9s %9s %9s %7s %9s\n", "set", "records", "open_ms", "cold_ms", "info_s",
		       "handle_MB", "reader_MB", "peak_MB", "map_MB", "rec/s", "class_mix");
		for (size_t i = 0; i < NSETS; i++) {
			set *s = &sets[i];
			if (!s->have)
				continue;
			char cm[16] = "-", rs[32] = "-", cms[16] = "-";
			if (s == in) {
				snprintf(cm, sizeof(cm), "%.3f", ratio);
				snprintf(rs, sizeof(rs), "%.0f", rate);
			}
			if (s->open_cold_ms >= 0)
				snprintf(cms, sizeof(cms), "%.0f", s->open_cold_ms);
			printf("%-17s %10llu %8.1f %8s %7.2f %9.1f %9.1f %9.1f %9.1f %7s %9s\n", s->name, (unsigned long long)s->count,
			       s->open_ms, cms, s->info_s, s->handle_anon, s->anon_mb, s->hwm_mb, s->handle_file, rs, cm);
		}
		printf("\nimagenet64-class, reader -> jpeg_decode (64x64, %ld workers) -> sink: %llu records, %.0f records/s, "
		       "%.0f per CPU-second of the process\n",
		       ncpu, (unsigned long long)sink_msgs, rate, rate_cpu);
		printf("class mix, batches of %d over one epoch of the class-sorted set (uniform sampling: %.1f classes, "
		       "chi2 %.0f):\n",
		       BATCH, u_distinct(), u_chi2(n));
		printf("  %-40s %9s %9s %8s\n", "order", "classes", "chi2", "mix");
		printf("  %-40s %9.1f %9.0f %8.3f\n", "default (window 65536, block auto)", mdef.distinct, mdef.chi2, ratio);
		if (block)
			printf("    (block auto = %llu records)\n", (unsigned long long)block);
		static const struct {
			uint64_t window, block;
			int shuffle;
		} alt[] = { { 65536, 64, 1 }, { 65536, 1024, 1 }, { 16384, 0, 1 }, { 0, 0, 1 }, { 0, 0, 0 } };
		/* the others from the order alone (labels by position: the set is class by class) */
		uint64_t *pos = malloc(in->count * sizeof(uint64_t));
		int32_t *l2 = malloc(in->count * sizeof(int32_t));
		for (size_t a = 0; a < sizeof(alt) / sizeof(alt[0]); a++) {
			gf_order_opts o = { .shuffle = alt[a].shuffle, .window = alt[a].window, .block = alt[a].block, .seed = 1 };
			gf_order_create(ds, &o, &ord);
			uint64_t len = gf_order_len(ord), b = gf_order_block(ord);
			gf_order_fill(ord, 0, pos);
			gf_order_destroy(ord);
			for (uint64_t i = 0; i < len; i++)
				l2[i] = (int32_t)(pos[i] * CLASSES / in->count);
			mix m = mix_of(l2, len);
			char name[64];
			if (!alt[a].shuffle)
				snprintf(name, sizeof(name), "shuffle = false (key order)");
			else
				snprintf(name, sizeof(name), "window %llu%s, block %llu", (unsigned long long)alt[a].window,
				         alt[a].window ? "" : " (the whole set)", (unsigned long long)b);
			printf("  %-40s %9.1f %9.0f %8.3f\n", name, m.distinct, m.chi2, mix_ratio(m, len));
		}
		/* a true uniform permutation of the same labels */
		uint64_t rs = 12345;
		for (uint64_t i = 0; i < n; i++)
			l2[i] = lab[i];
		for (uint64_t i = n; i > 1; i--) {
			rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
			uint64_t j = rs % i;
			int32_t t = l2[i - 1];
			l2[i - 1] = l2[j];
			l2[j] = t;
		}
		mix mu = mix_of(l2, n);
		printf("  %-40s %9.1f %9.0f %8.3f\n", "uniform permutation (Fisher-Yates)", mu.distinct, mu.chi2,
		       mix_ratio(mu, n));
		free(pos);
		free(l2);
		free(lab);

		if (!strstr(skip, "parts")) {
			uint8_t *seen = malloc(in->count);
			static const uint32_t worlds[] = { 2, 8, 64, 512 };
			printf("every record once per epoch (keys through gf_stream, epoch 1):\n");
			for (size_t w = 0; w < 4; w++) {
				uint64_t twice, tw0 = 0, tot = 0;
				double t0 = gf_now();
				tot = parts_pass(ds, worlds[w], 1, 1, seen, in->count, &twice);
				uint64_t missing = 0;
				for (uint64_t i = 0; i < in->count; i++)
					missing += !seen[i];
				if (twice || missing || tot != in->count)
					die("parts=%u spread: %llu read, %llu twice, %llu missing", worlds[w], (unsigned long long)tot,
					    (unsigned long long)twice, (unsigned long long)missing);
				parts_pass(ds, worlds[w], 0, 1, seen, in->count, &tw0);
				uint64_t miss0 = 0;
				for (uint64_t i = 0; i < in->count; i++)
					miss0 += !seen[i];
				if (tw0 || miss0 != in->count % worlds[w])
					die("parts=%u equal: %llu twice, %llu left out (expected %llu)", worlds[w],
					    (unsigned long long)tw0, (unsigned long long)miss0, (unsigned long long)(in->count % worlds[w]));
				printf("  parts=%-4u remainder=spread: %llu records, each once; remainder=drop: parts of %llu, "
				       "%llu left out, none twice (%.1f s)\n",
				       worlds[w], (unsigned long long)tot, (unsigned long long)(in->count / worlds[w]),
				       (unsigned long long)miss0, gf_now() - t0);
			}
			free(seen);
			int stops = resume_check(ds, 5, 8, 20000 / small);
			printf("resume: part 5 of 8 stopped at %d points of two epochs (mid-epoch, at its last records, in the "
			       "next one) continues with the same 20000 keys each time\n",
			       stops);
		}
		gf_dataset_close(ds);

		if (!strstr(skip, "verify")) {
			char bin[4200], log[4300];
			snprintf(bin, sizeof(bin), "%s/ganflow", build_dir());
			snprintf(log, sizeof(log), "%s/verify.log", cache);
			char *av[] = { bin, "dataset", "verify", (char *)path, NULL };
			double wall, mb;
			int rc = run_proc(av, log, &wall, &mb);
			printf("ganflow dataset verify imagenet64-class (all %ld CPUs): exit %d, %.1f s, %.0f records/s, peak %.0f "
			       "MB (log: %s)\n",
			       ncpu, rc, wall, (double)in->count / wall, mb, log);
		}
	} else {
		printf("\n%-17s %10s %8s %8s %7s %9s %9s %9s %9s\n", "set", "records", "open_ms", "cold_ms", "info_s",
		       "handle_MB", "reader_MB", "peak_MB", "map_MB");
		for (size_t i = 0; i < NSETS; i++) {
			set *s = &sets[i];
			if (s->have)
				printf("%-17s %10llu %8.1f %8.0f %7.2f %9.1f %9.1f %9.1f %9.1f\n", s->name,
				       (unsigned long long)s->count, s->open_ms, s->open_cold_ms, s->info_s, s->handle_anon, s->anon_mb,
				       s->hwm_mb, s->handle_file);
		}
	}
	/* growth: the slope between the smallest and the largest tiny set */
	set *a = &sets[1], *b = &sets[3];
	if (a->have && b->have) {
		double dn = (double)(b->count - a->count);
		printf("growth from %llu to %llu records (tiny sets), per record: an open handle %.2f B allocated "
		       "(RssAnon) + %.2f B of mapped pages (its meta records' label index), the reader %.2f B allocated, "
		       "open %.3f us\n",
		       (unsigned long long)a->count, (unsigned long long)b->count,
		       (b->handle_anon - a->handle_anon) * 1048576.0 / dn, (b->handle_file - a->handle_file) * 1048576.0 / dn,
		       (b->anon_mb - a->anon_mb) * 1048576.0 / dn, (b->open_ms - a->open_ms) * 1e3 / dn);
	}
	if (sets[4].have && sets[2].have)
		printf("caffe LMDB against ganflow shards, %llu tiny records: an open handle %+.1f MB (%.1f B/record: the "
		       "key index and the label index), the reader %+.1f MB\n",
		       (unsigned long long)in->count, sets[4].handle_anon - sets[2].handle_anon,
		       (sets[4].handle_anon - sets[2].handle_anon) * 1048576.0 / (double)in->count,
		       sets[4].anon_mb - sets[2].anon_mb);
	printf("ganflow dataset info, peak resident (ru_maxrss: the command's own start included):");
	const char *sep = " ";
	for (size_t i = 0; i < NSETS; i++)
		if (sets[i].have) {
			printf("%s%s %.0f MB", sep, sets[i].name, sets[i].info_mb);
			sep = ", ";
		}
	printf("\n");
	printf("per-core decode against a bare TurboJPEG loop: tests/bench/run decode\n");
	if (ratio >= 0)
		printf("scale: class_mix=%.3f target=0.95\n", ratio);
	return 0;
}
