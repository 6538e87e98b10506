/* Caffe LMDBs (core/data/caffe.c, lmdb_reader format = "caffe"): a
 * Caffe-style LMDB written by tests/make_caffe_lmdb.py (python3-lmdb,
 * python3-protobuf) with raw gray, raw planar-BGR and encoded JPEG Datums
 * under keys that are not in record order, plus one corrupt Datum. Checks
 * the detection, the meta built from the Datums, the pixels and labels that
 * come out of lmdb_reader -> jpeg_decode, shuffled rank parts and resume,
 * `ganflow dataset info / verify`, and a few DC-GAN training steps on it.
 * Skips (77) when python3-lmdb or python3-protobuf is missing.
 */
#include "test_shard_util.h"

#define N 200 /* readable records; one corrupt more: 0.5% bad, under the default 1% */
#define JW 20
#define JH 16

static char *dir, *lmdb_path, *jpg_dir;
static struct {
	int id, label;
	char kind[16];
} man[N + 1]; /* by position (LMDB key order) */
static int corrupt_pos = -1;
static gf_decoder *dec;

static int px(int i, int y, int x, int c)
{
	return (i * 37 + y * 11 + x * 5 + c * 71) & 255;
}

static int setup(void **st)
{
	(void)st;
	dir = tmpdir_make();
	lmdb_path = path_fmt("%s/caffe", dir);
	jpg_dir = path_fmt("%s/jpg", dir);
	assert_int_equal(mkdir(jpg_dir, 0755), 0);
	assert_int_equal(gf_decoder_create(&dec), 0);
	uint8_t pix[JW * JH * 3];
	for (int i = 2; i < N; i += 3) {
		smooth_image(pix, JW, JH, 3, (uint64_t)i);
		const uint8_t *jpg;
		size_t len;
		assert_int_equal(gf_jpeg_encode(dec, pix, JW, JH, 3, 90, GF_SUBSAMP_420, &jpg, &len), 0);
		char *p = path_fmt("%s/img-%d.jpg", jpg_dir, i);
		FILE *f = fopen(p, "wb");
		assert_non_null(f);
		assert_int_equal(fwrite(jpg, 1, len, f), len);
		fclose(f);
		free(p);
	}
	const char *src = getenv("GF_SOURCE_DIR");
	/* Debian's python3, where python3-lmdb and python3-protobuf are */
	int rc = run_cmd("py=/usr/bin/python3; [ -x $py ] || py=python3; $py %s/tests/make_caffe_lmdb.py %s %s %d", src ? src : "..", lmdb_path, jpg_dir, N);
	if (rc == 77) {
		printf("skip: python3-lmdb or python3-protobuf missing (scripts/deps installs them)\n");
		exit(77);
	}
	assert_int_equal(rc, 0);
	char *mp = path_fmt("%s/manifest.txt", lmdb_path);
	FILE *f = fopen(mp, "r");
	assert_non_null(f);
	int pos, id, label, n = 0;
	char kind[16];
	while (fscanf(f, "%d %d %15s %d", &pos, &id, kind, &label) == 4) {
		assert_int_equal(pos, n);
		man[n].id = id;
		man[n].label = label;
		snprintf(man[n].kind, sizeof(man[n].kind), "%s", kind);
		if (!strcmp(kind, "corrupt"))
			corrupt_pos = n;
		n++;
	}
	fclose(f);
	free(mp);
	assert_int_equal(n, N + 1);
	assert_true(corrupt_pos >= 0);
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	gf_remove_tree(dir);
	free(dir);
	free(lmdb_path);
	free(jpg_dir);
	gf_decoder_destroy(dec);
	sink_reset();
	return 0;
}

/* ---- the dataset engine ---- */

static void test_open(void **st)
{
	(void)st;
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(lmdb_path, &ds), 0);
	assert_int_equal(gf_dataset_format_of(ds), GF_FORMAT_CAFFE);
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	assert_int_equal(m->count, N + 1);
	assert_int_equal(m->nshards, 1);
	assert_int_equal(m->nclasses, 4);
	assert_string_equal(m->class_names[3], "3");
	assert_int_equal(gf_dataset_unreadable(ds), 1);
	assert_int_equal(m->unlabelled, 1); /* the corrupt one is in no class */
	uint64_t cls[4] = { 0 }, kinds[3] = { 0 };
	for (int p = 0; p < N + 1; p++) {
		if (p == corrupt_pos)
			continue;
		cls[man[p].label]++;
		kinds[!strcmp(man[p].kind, "bgr") ? 1 : !strcmp(man[p].kind, "jpeg") ? 2 : 0]++;
	}
	for (int c = 0; c < 4; c++) {
		assert_int_equal(m->class_count[c], cls[c]);
		uint64_t pos[N + 1];
		assert_int_equal(gf_dataset_class_positions(ds, (uint32_t)c, pos), 0);
		for (uint64_t j = 0; j < m->class_count[c]; j++) { /* positions of the class, ascending */
			assert_int_equal(man[pos[j]].label, c);
			if (j)
				assert_true(pos[j] > pos[j - 1]);
		}
	}
	assert_int_equal(m->enc_count[GF_ENC_RAW], kinds[0]);
	assert_int_equal(m->enc_count[GF_ENC_BGR], kinds[1]);
	assert_int_equal(m->enc_count[GF_ENC_JPEG], kinds[2]);
	assert_int_equal(m->min_height, 9);
	assert_int_equal(m->max_height, JH);
	assert_int_equal(m->min_width, 11);
	assert_int_equal(m->max_width, JW);
	/* every position: the record of the manifest; the corrupt one named by its LMDB key */
	for (int p = 0; p < N + 1; p++) {
		gf_record r;
		int rc = gf_dataset_get(ds, (uint64_t)p, &r);
		assert_int_equal(r.key, p);
		if (p == corrupt_pos) {
			assert_int_equal(rc, GF_ECORRUPT);
			char want[64];
			snprintf(want, sizeof(want), "key %d '%08d_corrupt': not a Datum", p, N / 2);
			if (!strstr(gf_errmsg(), want))
				fail_msg("message '%s' lacks \"%s\"", gf_errmsg(), want);
			continue;
		}
		assert_int_equal(rc, 0);
		assert_int_equal(r.h.label, man[p].label);
		if (!strcmp(man[p].kind, "gray")) {
			assert_int_equal(r.h.encoding, GF_ENC_RAW);
			assert_int_equal(r.h.channels, 1);
			assert_int_equal(r.payload[13], px(man[p].id, 1, 1, 0));
		} else if (!strcmp(man[p].kind, "bgr")) {
			assert_int_equal(r.h.encoding, GF_ENC_BGR);
			assert_int_equal(r.h.height, 9);
			assert_int_equal(r.h.width, 11);
		} else {
			assert_int_equal(r.h.encoding, GF_ENC_JPEG);
			assert_int_equal(r.h.height, JH);
			assert_int_equal(r.h.width, JW);
			assert_int_equal(r.h.channels, 3);
		}
	}
	gf_dataset_close(ds);
	/* the format named wrongly is refused, naming what the path is */
	assert_int_equal(gf_dataset_open_as(lmdb_path, GF_FORMAT_GANFLOW, &ds), GF_ENOTFOUND);
	assert_non_null(strstr(gf_errmsg(), "format = \"caffe\""));
	char *gf_path = path_fmt("%s/gf", dir);
	ds_spec s = { .n = 10, .nclasses = 2, .encoding = GF_ENC_RAW, .w = 4, .h = 4, .c = 1 };
	make_dataset(gf_path, &s);
	char *shard = path_fmt("%s/shard-00000", gf_path);
	assert_int_equal(gf_dataset_open_as(shard, GF_FORMAT_CAFFE, &ds), GF_ECORRUPT);
	assert_non_null(strstr(gf_errmsg(), "a ganflow shard"));
	assert_int_equal(gf_dataset_open_as(gf_path, GF_FORMAT_CAFFE, &ds), -ENOENT);
	assert_int_equal(gf_dataset_open_as(shard, GF_FORMAT_AUTO, &ds), 0);
	assert_int_equal(gf_dataset_format_of(ds), GF_FORMAT_GANFLOW);
	gf_dataset_close(ds);
	free(shard);
	free(gf_path);
}

/* Hand-made Datums: negative int32 varints, unknown fields skipped, float
 * data and wrong sizes refused. */
static void test_datum_parse(void **st)
{
	(void)st;
	gf_record_header h;
	const uint8_t *pl;
	/* channels 1, height 2, width 2, data 4 bytes, label -1 (10-byte varint), field 9 varint (unknown) */
	const uint8_t ok[] = { 0x08, 1, 0x10, 2, 0x18, 2, 0x22, 4, 1, 2, 3, 4, 0x28, 0xff, 0xff, 0xff, 0xff,
		                   0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x48, 7 };
	assert_int_equal(gf_datum_parse(ok, sizeof(ok), &h, &pl), 0);
	assert_int_equal(h.label, -1);
	assert_int_equal(h.encoding, GF_ENC_RAW);
	assert_int_equal(h.payload, 4);
	assert_int_equal(pl[3], 4);
	const uint8_t wrong_size[] = { 0x08, 3, 0x10, 2, 0x18, 2, 0x22, 4, 1, 2, 3, 4 };
	assert_int_equal(gf_datum_parse(wrong_size, sizeof(wrong_size), &h, NULL), GF_ECORRUPT);
	assert_non_null(strstr(gf_errmsg(), "not channels x height x width"));
	const uint8_t floats[] = { 0x08, 1, 0x10, 1, 0x18, 1, 0x35, 0, 0, 0x80, 0x3f };
	assert_int_equal(gf_datum_parse(floats, sizeof(floats), &h, NULL), GF_ECORRUPT);
	assert_non_null(strstr(gf_errmsg(), "float_data"));
	const uint8_t png[] = { 0x22, 8, 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0x38, 1 };
	assert_int_equal(gf_datum_parse(png, sizeof(png), &h, NULL), GF_ECORRUPT);
	assert_non_null(strstr(gf_errmsg(), "PNG"));
	const uint8_t gfrec[] = { 'G', 'F', 1, 0, 0, 0, 0, 0 }; /* a ganflow header is no Datum */
	assert_int_equal(gf_datum_parse(gfrec, sizeof(gfrec), &h, NULL), GF_ECORRUPT);
}

/* ---- through the pipeline ---- */

static const char *check_pixels(const gf_msg *m)
{
	static char why[128];
	uint64_t p = m->key;
	if (p > N || (int)p == corrupt_pos)
		return "a position that holds no readable record";
	if (m->label != man[p].label)
		return "label differs from the Datum's";
	const float *v = m->t[0].data;
	int c = (int)m->t[0].shape[0], h = (int)m->t[0].shape[1], w = (int)m->t[0].shape[2], id = man[p].id;
	if (!strcmp(man[p].kind, "jpeg")) {
		/* the decoder's own pixels for the JPEG file the Datum holds */
		char *path = path_fmt("%s/img-%d.jpg", jpg_dir, id);
		struct stat sb;
		int ok = stat(path, &sb) == 0;
		char *jpg = slurp(path);
		free(path);
		if (!ok || !jpg)
			return "cannot read the JPEG file";
		gf_record_header hh = { .encoding = GF_ENC_JPEG, .height = JH, .width = JW, .channels = 3,
			                    .payload = (uint32_t)sb.st_size, .label = man[p].label };
		float want[3 * JW * JH];
		gf_transform t = { 0 };
		int rc = gf_decode_record(dec, &t, &hh, (const uint8_t *)jpg, 0, want, 3 * JW * JH);
		free(jpg);
		if (rc || c != 3 || h != JH || w != JW)
			return "JPEG record: wrong shape";
		return memcmp(want, v, sizeof(want)) ? "JPEG record: pixels differ from decoding its file" : NULL;
	}
	int gray = !strcmp(man[p].kind, "gray");
	if (c != (gray ? 1 : 3) || h != (gray ? 10 : 9) || w != (gray ? 12 : 11))
		return "raw record: wrong shape";
	for (int ch = 0; ch < c; ch++)
		for (int y = 0; y < h; y++)
			for (int x = 0; x < w; x++)
				if (fabsf(v[((size_t)ch * h + y) * w + x] - ((float)px(id, y, x, ch) / 127.5f - 1.0f)) > 1e-6f) {
					snprintf(why, sizeof(why), "%s record %d: pixel (%d, %d, %d) differs", man[p].kind, id, ch, y,
					         x);
					return why;
				}
	return NULL;
}

static void test_pipeline(void **st)
{
	(void)st;
	char err[1024];
	sink_reset();
	sink_check = check_pixels;
	step s[2] = {
		{ "lmdb_reader", NULL, "samples",
		  kv("path", gf_value_str(lmdb_path), "format", gf_value_str("caffe"), "epochs", gf_value_int(1), "shuffle",
		     gf_value_bool(0), NULL),
		  1 },
		{ "jpeg_decode", "records", "samples", gf_value_map(), 2 },
	};
	int rc = run_chain(s, 2, NULL, err, sizeof(err));
	if (rc)
		fail_msg("run: %s", err);
	if (sink_bad)
		fail_msg("%zu bad messages, first: %s", sink_bad, sink_why);
	assert_int_equal(sink_n, N); /* the corrupt Datum skipped */
	for (size_t i = 1; i < sink_n; i++)
		assert_true(sink_items[i].key > sink_items[i - 1].key); /* key order */
}

/* Shuffled rank parts are disjoint and cover the records; a resumed
 * reader continues the same order; a class filter uses the Datum labels. */
static void test_parts_resume(void **st)
{
	(void)st;
	char err[1024];
	uint8_t seen[N + 1] = { 0 };
	uint64_t order[2][N];
	size_t len[2];
	for (int part = 0; part < 2; part++) {
		sink_reset();
		step s[1] = { { "lmdb_reader", NULL, "samples",
			            kv("path", gf_value_str(lmdb_path), "epochs", gf_value_int(1), "part", gf_value_int(part),
			               "parts", gf_value_int(2), "window", gf_value_int(16), "max_bad_fraction",
			               gf_value_num(0.05), NULL),
			            1 } };
		assert_int_equal(run_chain(s, 1, NULL, err, sizeof(err)), 0);
		len[part] = sink_n;
		for (size_t i = 0; i < sink_n; i++) {
			seen[sink_items[i].key]++;
			order[part][i] = sink_items[i].key;
		}
	}
	/* 201 positions, 100 per part; the corrupt one (if in a part) is skipped */
	int total = 0;
	for (int p = 0; p < N + 1; p++) {
		assert_true(seen[p] <= 1);
		total += seen[p];
	}
	assert_true(len[0] + len[1] == (size_t)total && total >= 199 && total <= 200);
	assert_int_equal(seen[corrupt_pos], 0);
	/* resume part 0 at pos 37 of its epoch: the same tail */
	sink_reset();
	step r[1] = { { "lmdb_reader", NULL, "samples",
		            kv("path", gf_value_str(lmdb_path), "epochs", gf_value_int(1), "part", gf_value_int(0), "parts",
		               gf_value_int(2), "window", gf_value_int(16), "start_pos", gf_value_int(37), NULL),
		            1 } };
	assert_int_equal(run_chain(r, 1, NULL, err, sizeof(err)), 0);
	size_t from = 0;
	while (from < len[0] && sink_items[0].key != order[0][from])
		from++;
	assert_true(from >= 36 && from <= 37); /* 37, or 36 when the corrupt record came before */
	assert_int_equal(sink_n, len[0] - from);
	for (size_t i = 0; i < sink_n; i++)
		assert_int_equal(sink_items[i].key, order[0][from + i]);
	/* class filter from the Datum labels */
	sink_reset();
	step c[1] = { { "lmdb_reader", NULL, "samples",
		            kv("path", gf_value_str(lmdb_path), "epochs", gf_value_int(1), "classes",
		               int_list(1, (int64_t[]){ 2 }), NULL),
		            1 } };
	assert_int_equal(run_chain(c, 1, NULL, err, sizeof(err)), 0);
	assert_int_equal(sink_n, N / 4);
	for (size_t i = 0; i < sink_n; i++)
		assert_int_equal(sink_items[i].label, 2);
}

/* ---- the command ---- */

static void test_cli(void **st)
{
	(void)st;
	char *out = path_fmt("%s/out.txt", dir), *errf = path_fmt("%s/err.txt", dir);
	assert_int_equal(run_cmd("%s dataset info %s >%s 2>%s", ganflow_bin(), lmdb_path, out, errf), 0);
	char *t = slurp(out);
	char line[64];
	assert_non_null(strstr(t, "format     caffe"));
	snprintf(line, sizeof(line), "records    %d in 1 shard", N + 1);
	assert_non_null(strstr(t, line));
	snprintf(line, sizeof(line), " raw %d jpeg %d bgr-planar %d unreadable 1", (N + 2) / 3, N / 3, (N + 1) / 3);
	if (!strstr(t, line))
		fail_msg("info output lacks '%s':\n%s", line, t);
	assert_non_null(strstr(t, "classes    4"));
	free(t);
	assert_int_equal(run_cmd("%s dataset verify %s workers=2 >%s 2>%s", ganflow_bin(), lmdb_path, out, errf), 1);
	t = slurp(out);
	snprintf(line, sizeof(line), "%d records verified, 1 bad", N + 1);
	if (!strstr(t, line))
		fail_msg("verify output lacks '%s':\n%s", line, t);
	free(t);
	t = slurp(errf);
	snprintf(line, sizeof(line), "'%08d_corrupt': not a Datum", N / 2);
	if (!strstr(t, line))
		fail_msg("verify errors lack '%s':\n%s", line, t);
	free(t);
	free(out);
	free(errf);
}

/* The default DC-GAN trains on it (14 steps of 16: a whole epoch, so the
 * corrupt Datum is met); the corrupt Datum is skipped, named and counted. */
static void test_train(void **st)
{
	(void)st;
	const char *src = getenv("GF_SOURCE_DIR");
	char *run = path_fmt("%s/run", dir), *errf = path_fmt("%s/train.txt", dir);
	int rc = run_cmd("cd %s && %s run pipelines/dcgan_fashion.lua data=%s dir=%s steps=14 batch=16 log=7 samples=7 "
	                 "threads=1 >%s 2>&1",
	                 src ? src : "..", ganflow_bin(), lmdb_path, run, errf);
	char *t = slurp(errf);
	if (rc)
		fail_msg("training failed (%d):\n%s", rc, t);
	char line[96];
	snprintf(line, sizeof(line), "skipping bad record (1 so far): shard %s key %d '%08d_corrupt'", lmdb_path,
	         corrupt_pos, N / 2);
	if (!strstr(t, line))
		fail_msg("training output lacks \"%s\":\n%s", line, t);
	free(t);
	char *metrics = path_fmt("%s/metrics.jsonl", run);
	t = slurp(metrics);
	assert_non_null(strstr(t, "\"step\":14"));
	free(t);
	free(metrics);
	free(run);
	free(errf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_datum_parse), cmocka_unit_test(test_open),   cmocka_unit_test(test_pipeline),
		cmocka_unit_test(test_parts_resume), cmocka_unit_test(test_cli), cmocka_unit_test(test_train),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
