/* Reading datasets: the gf_stream engine (io_uring readahead through the
 * map and through O_DIRECT, with and without io_uring), resume from a
 * reported position, bad records, and the lmdb_reader stage in a graph
 * (epochs, ranks, class filter, class sharding, resume, bad fraction).
 */
#include <sys/mman.h>
#include <sys/resource.h>

#include "test_shard_util.h"

static char *dir, *ds_path, *big_path, *bad_path, *worse_path;

enum { N = 500, NCLASS = 10, W = 4, H = 4, C = 1 };

/* The kind of damage bad record k has (keys k % every == 5). */
static const char *damage(uint64_t k, int every)
{
	static const char *const kinds[3] = { "bad header", "truncated value", "label 99 >= class count" };
	return kinds[(k / (uint64_t)every) % 3];
}

/* Dataset whose records k % every == 5 are bad, in turn: a bad header
 * (magic), a truncated value, a label beyond the class count. */
static void make_bad_dataset(const char *out, uint64_t n, int every)
{
	gf_writer_opts wo = { .nclasses = NCLASS, .shard_records = 128, .overwrite = 1 };
	gf_dataset_writer *w;
	assert_int_equal(gf_dataset_writer_open(out, &wo, &w), 0);
	uint8_t v[GF_RECORD_HEADER_SIZE + W * H * C];
	for (uint64_t k = 0; k < n; k++) {
		gf_record_header h = { .label = label_of(k, NCLASS), .encoding = GF_ENC_RAW, .height = H, .width = W,
			                   .channels = C, .payload = W * H * C };
		assert_int_equal(gf_record_header_write(&h, v), 0);
		for (size_t i = 0; i < W * H * C; i++)
			v[GF_RECORD_HEADER_SIZE + i] = raw_px(k, i);
		size_t len = sizeof(v);
		if (k % (uint64_t)every == 5) {
			switch ((k / (uint64_t)every) % 3) {
			case 0: v[1] = 'x'; break;
			case 1: len -= 5; break;
			default: v[4] = 99; break;
			}
		}
		assert_int_equal(gf_dataset_writer_add_value(w, h.label, v, len), 0);
	}
	assert_int_equal(gf_dataset_writer_finish(w), 0);
}

static int setup(void **st)
{
	(void)st;
	dir = tmpdir_make();
	ds_path = path_fmt("%s/ds", dir);
	big_path = path_fmt("%s/big", dir);
	bad_path = path_fmt("%s/bad", dir);
	worse_path = path_fmt("%s/worse", dir);
	ds_spec s = { .n = N, .nclasses = NCLASS, .shard_records = 200, .encoding = GF_ENC_RAW, .w = W, .h = H, .c = C };
	make_dataset(ds_path, &s);
	ds_spec b = { .n = 60, .nclasses = 3, .shard_records = 25, .encoding = GF_ENC_RAW, .w = 100, .h = 70, .c = 3 };
	make_dataset(big_path, &b);
	make_bad_dataset(bad_path, 300, 150); /* 2 bad of 300 */
	make_bad_dataset(worse_path, 300, 30); /* 10 bad of 300 */
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	gf_remove_tree(dir);
	free(dir);
	free(ds_path);
	free(big_path);
	free(bad_path);
	free(worse_path);
	sink_reset();
	return 0;
}

/* ---- the stream ---- */

typedef struct item {
	uint64_t key, epoch, pos;
	int last;
} item;

/* Streams path with o; checks every payload; returns the items. */
static item *stream_all(const char *path, const gf_stream_opts *o, size_t *n, int *uring)
{
	gf_dataset *ds;
	gf_stream *s;
	assert_int_equal(gf_dataset_open(path, &ds), 0);
	int rc = gf_stream_open(ds, o, &s);
	if (rc)
		fail_msg("gf_stream_open: %s", gf_errmsg());
	size_t cap = 1024, cnt = 0;
	item *v = malloc(cap * sizeof(item));
	gf_stream_item it;
	while ((rc = gf_stream_next(s, &it)) == 0) {
		if (cnt == cap)
			v = realloc(v, (cap *= 2) * sizeof(item));
		v[cnt++] = (item){ it.rec.key, it.epoch, it.pos, it.last };
		size_t len = it.rec.h.payload;
		assert_int_equal(len, (size_t)it.rec.h.width * it.rec.h.height * it.rec.h.channels);
		assert_int_equal(it.rec.h.label, label_of(it.rec.key, gf_dataset_metadata(ds)->nclasses));
		for (size_t i = 0; i < len; i++)
			if (it.rec.payload[i] != raw_px(it.rec.key, i))
				fail_msg("key %llu byte %zu differs", (unsigned long long)it.rec.key, i);
	}
	assert_int_equal(rc, GF_EEOF);
	if (uring)
		*uring = gf_stream_uring(s);
	gf_stream_close(s);
	gf_dataset_close(ds);
	*n = cnt;
	return v;
}

static void check_epochs(const item *v, size_t n, uint64_t count, uint64_t epochs)
{
	assert_int_equal(n, count * epochs);
	for (uint64_t e = 0; e < epochs; e++) {
		uint8_t *seen = calloc(count, 1);
		for (uint64_t i = 0; i < count; i++) {
			const item *it = &v[e * count + i];
			assert_int_equal(it->epoch, e);
			assert_int_equal(it->pos, i + 1);
			assert_int_equal(it->last, i + 1 == count);
			assert_true(it->key < count);
			assert_int_equal(seen[it->key], 0); /* exactly once per epoch */
			seen[it->key] = 1;
		}
		free(seen);
	}
}

static void test_stream_modes(void **st)
{
	(void)st;
	item *ref = NULL;
	size_t nref = 0;
	uint32_t ras[3] = { 1, 7, 64 };
	for (int direct = 0; direct < 2; direct++)
		for (int no_uring = 0; no_uring < 2; no_uring++)
			for (int r = 0; r < 3; r++) {
				gf_stream_opts o = { .order = { .shuffle = 1, .window = 50, .seed = 5 },
					                 .epochs = 2,
					                 .readahead = ras[r],
					                 .direct = direct,
					                 .no_uring = no_uring };
				size_t n;
				int uring;
				item *v = stream_all(ds_path, &o, &n, &uring);
				assert_int_equal(uring, !no_uring);
				check_epochs(v, n, N, 2);
				if (!ref) {
					ref = v;
					nref = n;
					int same = 0;
					for (size_t i = 0; i < N; i++)
						same += v[i].key == v[N + i].key;
					assert_true(same < 25); /* the two epochs differ */
					continue;
				}
				/* the order does not depend on how the bytes arrive */
				assert_int_equal(n, nref);
				for (size_t i = 0; i < n; i++)
					assert_int_equal(v[i].key, ref[i].key);
				free(v);
			}
	free(ref);
}

/* Values spanning several pages (21000 bytes): block-aligned O_DIRECT
 * reads, overflow pages. */
static void test_stream_large(void **st)
{
	(void)st;
	for (int direct = 0; direct < 2; direct++) {
		gf_stream_opts o = { .order = { .shuffle = 1, .window = 0, .seed = 9 }, .epochs = 3, .readahead = 16,
			                 .direct = direct };
		size_t n;
		item *v = stream_all(big_path, &o, &n, NULL);
		check_epochs(v, n, 60, 3);
		free(v);
	}
}

/* How far ahead the stream locates: readahead records, more to cover
 * readahead_bytes of values on the mmap path, 1024 with direct, never
 * beyond an epoch. */
static void test_stream_window(void **st)
{
	(void)st;
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(big_path, &ds), 0); /* 60 values of 21000 bytes */
	static const struct {
		uint32_t readahead;
		uint64_t bytes;
		int direct;
		uint32_t want;
	} cases[] = { { 1, 0, 0, 1 },          { 7, 0, 0, 7 },        { 1, 100000, 0, 100000 / 21001 + 1 },
		          { 30, 100000, 0, 30 }, { 1, 1u << 30, 0, 60 }, { 1, 100000, 1, 60 } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gf_stream_opts o = { .epochs = 1, .readahead = cases[i].readahead, .readahead_bytes = cases[i].bytes,
			                 .direct = cases[i].direct };
		gf_stream *s;
		assert_int_equal(gf_stream_open(ds, &o, &s), 0);
		if (gf_stream_window(s) != cases[i].want)
			fail_msg("readahead %u, readahead_bytes %llu, direct %d: %u records ahead, expected %u",
			         cases[i].readahead, (unsigned long long)cases[i].bytes, cases[i].direct, gf_stream_window(s),
			         cases[i].want);
		gf_stream_item it;
		uint64_t n = 0;
		int rc;
		while ((rc = gf_stream_next(s, &it)) == 0)
			n++;
		assert_int_equal(rc, GF_EEOF);
		assert_int_equal(n, 60);
		gf_stream_close(s);
	}
	gf_dataset_close(ds);
}

/* 0 and the file's pages out of the page cache (written back, then
 * POSIX_FADV_DONTNEED; none mapped), 1 where they stay (tmpfs...). */
static int uncache(const char *file)
{
	int fd = open(file, O_RDONLY);
	assert_true(fd >= 0);
	struct stat sb;
	assert_int_equal(fstat(fd, &sb), 0);
	assert_int_equal(fdatasync(fd), 0);
	assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	size_t pages = ((size_t)sb.st_size + 4095) / 4096, resident = 0;
	void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	unsigned char *vec = malloc(pages);
	assert_int_equal(mincore(map, (size_t)sb.st_size, vec), 0);
	for (size_t i = 0; i < pages; i++)
		resident += vec[i] & 1;
	free(vec);
	munmap(map, (size_t)sb.st_size);
	close(fd);
	return resident > 0;
}

/* Opening a stream reads the B-tree: on a cold cache, locating every
 * record afterwards takes no major fault (each leaf page would otherwise
 * be a synchronous read, queued behind the readahead). 400 values of 3 KiB
 * in overflow pages: three leaves, the meta record's (the last) read when
 * the dataset opens. */
static void test_stream_index(void **st)
{
	(void)st;
	char *path = path_fmt("%s/leaves", dir);
	ds_spec sp = { .n = 400, .nclasses = 2, .shard_records = 400, .encoding = GF_ENC_RAW, .w = 32, .h = 32, .c = 3 };
	make_dataset(path, &sp);
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(path, &ds), 0);
	char *file = strdup(gf_dataset_shard(ds, 0)->file);
	gf_dataset_close(ds);
	if (uncache(file)) {
		printf("skipped: %s stays in the page cache after POSIX_FADV_DONTNEED (tmpfs?)\n", file);
		free(file);
		gf_remove_tree(path);
		free(path);
		skip();
	}
	assert_int_equal(gf_dataset_open(path, &ds), 0);
	gf_stream_opts o = { .epochs = 1, .readahead = 1 };
	gf_stream *s;
	assert_int_equal(gf_stream_open(ds, &o, &s), 0);
	struct rusage r0, r1;
	assert_int_equal(getrusage(RUSAGE_SELF, &r0), 0);
	gf_record rec;
	for (uint64_t k = 0; k < 400; k++)
		assert_int_equal(gf_dataset_locate(ds, k, &rec), 0);
	assert_int_equal(getrusage(RUSAGE_SELF, &r1), 0);
	if (r1.ru_majflt != r0.ru_majflt)
		fail_msg("locating 400 records after gf_stream_open took %ld major faults", r1.ru_majflt - r0.ru_majflt);
	gf_stream_close(s);
	gf_dataset_close(ds);
	free(file);
	gf_remove_tree(path);
	free(path);
}

static void test_stream_resume(void **st)
{
	(void)st;
	/* one part of all; part 5 of 8 (uneven parts, blocks of 3: resuming
	 * replays the order's window up to the position) */
	gf_stream_opts parts[] = {
		{ .order = { .shuffle = 1, .window = 100, .seed = 77 }, .epochs = 3, .readahead = 32 },
		{ .order = { .shuffle = 1, .window = 20, .block = 3, .seed = 78, .rank = 5, .world = 8,
		             .spread_remainder = 1 },
		  .epochs = 3,
		  .readahead = 32 },
	};
	for (int p = 0; p < 2; p++) {
		gf_stream_opts o = parts[p];
		size_t n;
		item *all = stream_all(ds_path, &o, &n, NULL);
		size_t len = p ? n / 3 : N;
		assert_int_equal(n, 3 * len);
		size_t cuts[] = { 0, 1, len / 4, len - 1, len, len + len / 3, 3 * len - 2 };
		for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
			gf_stream_opts r = o;
			r.start_epoch = all[cuts[c]].epoch;
			r.start_pos = all[cuts[c]].pos; /* resume right after item cuts[c] */
			size_t m;
			item *tail = stream_all(ds_path, &r, &m, NULL);
			assert_int_equal(m, n - cuts[c] - 1);
			for (size_t i = 0; i < m; i++) {
				assert_int_equal(tail[i].key, all[cuts[c] + 1 + i].key);
				assert_int_equal(tail[i].epoch, all[cuts[c] + 1 + i].epoch);
				assert_int_equal(tail[i].pos, all[cuts[c] + 1 + i].pos);
			}
			free(tail);
		}
		free(all);
	}
	/* a start beyond the epoch is refused */
	gf_dataset *ds;
	gf_stream *s;
	assert_int_equal(gf_dataset_open(ds_path, &ds), 0);
	gf_stream_opts bad = { .start_pos = N + 1 };
	assert_int_equal(gf_stream_open(ds, &bad, &s), GF_EPARAM);
	gf_dataset_close(ds);
}

static void test_stream_bad(void **st)
{
	(void)st;
	for (int direct = 0; direct < 2; direct++) {
		gf_dataset *ds;
		gf_stream *s;
		assert_int_equal(gf_dataset_open(worse_path, &ds), 0);
		gf_stream_opts o = { .epochs = 1, .direct = direct };
		assert_int_equal(gf_stream_open(ds, &o, &s), 0);
		gf_stream_item it;
		int rc, good = 0, bad = 0;
		while ((rc = gf_stream_next(s, &it)) != GF_EEOF) {
			if (rc == 0) {
				good++;
				assert_int_not_equal(it.rec.key % 30, 5);
				continue;
			}
			assert_int_equal(rc, GF_ECORRUPT);
			bad++;
			assert_int_equal(it.rec.key % 30, 5);
			char want[64];
			snprintf(want, sizeof(want), "shard-%05llu key %llu: ", (unsigned long long)(it.rec.key / 128),
			         (unsigned long long)it.rec.key);
			if (!strstr(gf_errmsg(), want) || !strstr(gf_errmsg(), damage(it.rec.key, 30)))
				fail_msg("'%s' and '%s' not in '%s'", want, damage(it.rec.key, 30), gf_errmsg());
		}
		assert_int_equal(good, 290);
		assert_int_equal(bad, 10);
		gf_stream_close(s);
		gf_dataset_close(ds);
	}
}

/* ---- the lmdb_reader stage ---- */

static const char *check_record(const gf_msg *m)
{
	if (m->ntensors != 2 || m->t[0].dtype != GF_U8 || m->t[0].ndim != 1 || m->t[1].dtype != GF_I32)
		return "not a record message";
	const int32_t *h = m->t[1].data;
	if (h[0] != GF_ENC_RAW || h[3] <= 0 || m->t[0].shape[0] != (int64_t)h[1] * h[2] * h[3])
		return "bad header tensor";
	const uint8_t *p = m->t[0].data;
	for (int64_t i = 0; i < m->t[0].shape[0]; i++)
		if (p[i] != raw_px(m->key, (size_t)i))
			return "payload differs";
	if (!m->source || !strstr(m->source, "/shard-"))
		return "no shard source";
	return NULL;
}

static int run_reader(gf_value params, const gf_run_info *info, char *err, size_t errsize)
{
	sink_reset();
	sink_check = check_record;
	step s[1] = { { "lmdb_reader", NULL, "samples", params, 1 } };
	return run_chain(s, 1, info, err, errsize);
}

static void test_reader_epochs(void **st)
{
	(void)st;
	char err[1024];
	for (int direct = 0; direct < 2; direct++) {
		gf_value p = kv("path", gf_value_str(ds_path), "epochs", gf_value_int(2), "window", gf_value_int(64),
		                "direct", gf_value_bool(direct), NULL);
		int rc = run_reader(p, NULL, err, sizeof(err));
		if (rc)
			fail_msg("run: %s", err);
		assert_int_equal(sink_bad, 0);
		assert_int_equal(sink_n, 2 * N);
		uint8_t seen[2][N];
		memset(seen, 0, sizeof(seen));
		int same = 0;
		for (size_t i = 0; i < sink_n; i++) {
			got *g = &sink_items[i];
			assert_int_equal(g->epoch, (int64_t)(i / N));
			assert_int_equal(g->pos, i % N + 1);
			assert_int_equal(g->flags & GF_MSG_LAST, i % N == N - 1 ? GF_MSG_LAST : 0);
			assert_int_equal(g->label, label_of(g->key, NCLASS));
			assert_int_equal(g->hdr[1], H);
			assert_int_equal(g->hdr[2], W);
			assert_int_equal(g->hdr[3], C);
			assert_int_equal(seen[i / N][g->key], 0);
			seen[i / N][g->key] = 1;
			if (i < N)
				same += sink_items[i].key == sink_items[i + N].key;
		}
		assert_true(same < 25);
	}
	/* same seed (the run seed by default) gives the same order */
	size_t n0 = sink_n;
	uint64_t *keys = malloc(n0 * sizeof(uint64_t));
	for (size_t i = 0; i < n0; i++)
		keys[i] = sink_items[i].key;
	gf_value p = kv("path", gf_value_str(ds_path), "epochs", gf_value_int(2), "window", gf_value_int(64), NULL);
	assert_int_equal(run_reader(p, NULL, err, sizeof(err)), 0);
	for (size_t i = 0; i < n0; i++)
		assert_int_equal(sink_items[i].key, keys[i]);
	/* another run seed, another order */
	gf_run_info info = { .rank = 0, .world = 1, .seed = 2 };
	p = kv("path", gf_value_str(ds_path), "epochs", gf_value_int(1), "window", gf_value_int(64), NULL);
	assert_int_equal(run_reader(p, &info, err, sizeof(err)), 0);
	int same = 0;
	for (size_t i = 0; i < N; i++)
		same += sink_items[i].key == keys[i];
	assert_true(same < 25);
	free(keys);
}

static void test_reader_ranks(void **st)
{
	(void)st;
	char err[1024];
	uint8_t seen[N];
	memset(seen, 0, sizeof(seen));
	for (int r = 0; r < 3; r++) {
		gf_value p;
		gf_run_info info = { .rank = r, .world = 3, .seed = 11 };
		if (r == 1) /* from the parameters instead of the run */
			p = kv("path", gf_value_str(ds_path), "epochs", gf_value_int(1), "part", gf_value_int(1), "parts",
			       gf_value_int(3), NULL);
		else
			p = kv("path", gf_value_str(ds_path), "epochs", gf_value_int(1), NULL);
		info.rank = r == 1 ? 0 : r;
		info.world = r == 1 ? 1 : 3;
		int rc = run_reader(p, &info, err, sizeof(err));
		if (rc)
			fail_msg("run: %s", err);
		assert_int_equal(sink_n, N / 3); /* equal parts */
		for (size_t i = 0; i < sink_n; i++) {
			assert_int_equal(seen[sink_items[i].key], 0); /* disjoint */
			seen[sink_items[i].key] = 1;
		}
	}
	int covered = 0;
	for (int i = 0; i < N; i++)
		covered += seen[i];
	assert_int_equal(covered, 3 * (N / 3));
}

static void test_reader_classes(void **st)
{
	(void)st;
	char err[1024];
	int64_t cls[2] = { 1, 3 };
	gf_value p = kv("path", gf_value_str(ds_path), "epochs", gf_value_int(1), "classes", int_list(2, cls), NULL);
	assert_int_equal(run_reader(p, NULL, err, sizeof(err)), 0);
	size_t want = 0;
	for (uint64_t k = 0; k < N; k++)
		want += label_of(k, NCLASS) == 1 || label_of(k, NCLASS) == 3;
	assert_int_equal(sink_n, want);
	for (size_t i = 0; i < sink_n; i++)
		assert_true(sink_items[i].label == 1 || sink_items[i].label == 3);
	/* class_shard: rank 1 of 3 owns classes 1, 4, 7 and reads all of them */
	gf_run_info info = { .rank = 1, .world = 3, .seed = 1 };
	p = kv("path", gf_value_str(ds_path), "epochs", gf_value_int(1), "class_shard", gf_value_bool(1), NULL);
	assert_int_equal(run_reader(p, &info, err, sizeof(err)), 0);
	want = 0;
	for (uint64_t k = 0; k < N; k++)
		want += label_of(k, NCLASS) % 3 == 1;
	assert_int_equal(sink_n, want);
	for (size_t i = 0; i < sink_n; i++)
		assert_int_equal(sink_items[i].label % 3, 1);
	/* a class the dataset does not have */
	int64_t bad[1] = { 12 };
	p = kv("path", gf_value_str(ds_path), "classes", int_list(1, bad), NULL);
	assert_int_not_equal(run_reader(p, NULL, err, sizeof(err)), 0);
	if (!strstr(err, "class 12 not in the dataset"))
		fail_msg("unexpected: %s", err);
}

static void test_reader_resume(void **st)
{
	(void)st;
	char err[1024];
	gf_value p = kv("path", gf_value_str(ds_path), "epochs", gf_value_int(2), "window", gf_value_int(32), NULL);
	assert_int_equal(run_reader(p, NULL, err, sizeof(err)), 0);
	size_t n = sink_n;
	got *all = malloc(n * sizeof(got));
	memcpy(all, sink_items, n * sizeof(got));
	size_t cut = 321; /* a checkpoint after message 321 */
	p = kv("path", gf_value_str(ds_path), "epochs", gf_value_int(2), "window", gf_value_int(32), "start_epoch",
	       gf_value_int(all[cut].epoch), "start_pos", gf_value_int((int64_t)all[cut].pos), NULL);
	assert_int_equal(run_reader(p, NULL, err, sizeof(err)), 0);
	assert_int_equal(sink_n, n - cut - 1);
	for (size_t i = 0; i < sink_n; i++) {
		assert_int_equal(sink_items[i].key, all[cut + 1 + i].key);
		assert_int_equal(sink_items[i].pos, all[cut + 1 + i].pos);
		assert_int_equal(sink_items[i].epoch, all[cut + 1 + i].epoch);
	}
	free(all);
}

static void test_reader_bad(void **st)
{
	(void)st;
	char err[1024];
	/* 2 of 300 bad (0.7%): skipped and counted, the run goes on (judged at
	 * the end of the epoch: min_records above the dataset's size) */
	gf_value p = kv("path", gf_value_str(bad_path), "epochs", gf_value_int(1), "min_records", gf_value_int(1000),
	                NULL);
	int rc = run_reader(p, NULL, err, sizeof(err));
	if (rc)
		fail_msg("run: %s", err);
	assert_int_equal(sink_n, 298);
	for (size_t i = 0; i < sink_n; i++)
		assert_int_not_equal(sink_items[i].key % 150, 5);
	/* 10 of 300 (3.3%): above max_bad_fraction, the stage fails */
	p = kv("path", gf_value_str(worse_path), "epochs", gf_value_int(1), NULL);
	assert_int_equal(run_reader(p, NULL, err, sizeof(err)), GF_EFAIL);
	if (!strstr(err, "max_bad_fraction"))
		fail_msg("unexpected: %s", err);
	/* unless the threshold allows it */
	p = kv("path", gf_value_str(worse_path), "epochs", gf_value_int(1), "max_bad_fraction", gf_value_num(0.05), NULL);
	assert_int_equal(run_reader(p, NULL, err, sizeof(err)), 0);
	assert_int_equal(sink_n, 290);
}

static void test_reader_errors(void **st)
{
	(void)st;
	char err[1024];
	char *missing = path_fmt("%s/no-such-dataset", dir);
	gf_value p = kv("path", gf_value_str(missing), NULL);
	assert_int_not_equal(run_reader(p, NULL, err, sizeof(err)), 0);
	if (!strstr(err, missing))
		fail_msg("unexpected: %s", err);
	free(missing);
	/* a shard that is not LMDB */
	char *fake = path_fmt("%s/fake", dir), *f = path_fmt("%s/fake/data.mdb", dir);
	mkdir(fake, 0777);
	FILE *fp = fopen(f, "wb");
	for (int i = 0; i < 2000; i++)
		fputs("garbage garbage ", fp);
	fclose(fp);
	p = kv("path", gf_value_str(fake), NULL);
	assert_int_not_equal(run_reader(p, NULL, err, sizeof(err)), 0);
	if (!strstr(err, "not an LMDB"))
		fail_msg("unexpected: %s", err);
	free(fake);
	free(f);
	/* an unknown parameter is refused before anything runs */
	p = kv("path", gf_value_str(ds_path), "shufle", gf_value_bool(1), NULL);
	assert_int_not_equal(run_reader(p, NULL, err, sizeof(err)), 0);
	if (!strstr(err, "shufle"))
		fail_msg("unexpected: %s", err);
	p = kv("path", gf_value_str(ds_path), "part", gf_value_int(3), "parts", gf_value_int(3), NULL);
	assert_int_not_equal(run_reader(p, NULL, err, sizeof(err)), 0);
	if (!strstr(err, "part"))
		fail_msg("unexpected: %s", err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_modes),   cmocka_unit_test(test_stream_large),
		cmocka_unit_test(test_stream_window),  cmocka_unit_test(test_stream_index),
		cmocka_unit_test(test_stream_resume),  cmocka_unit_test(test_stream_bad),
		cmocka_unit_test(test_reader_epochs),  cmocka_unit_test(test_reader_ranks),
		cmocka_unit_test(test_reader_classes), cmocka_unit_test(test_reader_resume),
		cmocka_unit_test(test_reader_bad),     cmocka_unit_test(test_reader_errors),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
