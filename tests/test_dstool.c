/* Datasets as StyleGAN2-ADA's and R3GAN's dataset_tool.py writes them
 * (datasets/dstool.c, datasets/zip.c, `ganflow dataset stylegan`): zips and
 * folders written by tests/make_dstool_zip.py (python3-pil, numpy; skips
 * without them). Checks labels, pixel values, record order and the
 * per-class meta; that the folder form, a zip with stored and deflated
 * members, a zip64 archive and a zip of the folder (every member under one
 * top folder) give the same records; unlabelled sets; and
 * that each fault is an error naming the zip and the member.
 */
#include "test_shard_util.h"

#include "convert.h"

#define N 40 /* as make_dstool_zip.py */
#define W 12
#define H 10

static char *dir, *gen;
static int cur_shuffle; /* the order of the last conversion */
static uint64_t cur_seed;

static int px(int i, int y, int x, int c)
{
	return (i * 37 + y * 11 + x * 5 + c * 71) & 255;
}

static int setup(void **st)
{
	(void)st;
	dir = tmpdir_make();
	gen = path_fmt("%s/gen", dir);
	const char *src = getenv("GF_SOURCE_DIR");
	int rc = run_cmd("py=/usr/bin/python3; [ -x $py ] || py=python3; $py %s/tests/make_dstool_zip.py %s",
	                 src ? src : "..", gen);
	if (rc == 77) {
		printf("skip: python3-pil or python3-numpy missing (scripts/deps installs them)\n");
		exit(77);
	}
	assert_int_equal(rc, 0);
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	gf_remove_tree(dir);
	free(gen);
	free(dir);
	return 0;
}

static int convert(const char *src, const char *out, uint32_t classes, const gf_convert_opts *given,
                   gf_convert_stats *stats)
{
	gf_convert_opts o;
	gf_convert_defaults(&o);
	if (given)
		o = *given;
	o.quiet = 1;
	o.workers = 3; /* several threads reading the zip at once */
	cur_shuffle = o.shuffle;
	cur_seed = o.seed;
	gf_convert_stats local;
	return gf_convert_dstool(src, out, &o, classes, stats ? stats : &local);
}

/* The image a record holds, from its first pixel: px(i, 0, 0, 0) = 37 i
 * mod 256, and 173 = 1 / 37 mod 256. */
static int image_of(const uint8_t *payload)
{
	return (payload[0] * 173) & 255;
}

/* The image at position pos in the converters' order: today the source
 * order (names sorted, which is index order here). The one place to change
 * if the converters' default order changes; every other check finds a
 * record's image from its pixels. */
static int image_at(uint64_t pos, uint64_t n)
{
	return (int)(cur_shuffle ? gf_permute(pos, n, cur_seed) : pos);
}

/* The positions of class c's records (m->class_count[c]) from the meta
 * index, into out. */
static void class_positions(const gf_dataset *ds, uint32_t c, uint64_t *out)
{
	assert_int_equal(gf_dataset_class_positions(ds, c, out), 0);
}

/* Every record: the image, its label, its pixels; the meta's classes. */
static void check_labelled(const char *path)
{
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(path, &ds), 0);
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	assert_int_equal(m->count, N);
	assert_int_equal(m->nclasses, 5);
	assert_int_equal(m->unlabelled, 0);
	uint64_t seen[5] = { 0 }, index[5][N];
	int once[N] = { 0 };
	for (uint32_t c = 0; c < 5; c++) {
		assert_true(m->class_count[c] <= N);
		class_positions(ds, c, index[c]);
	}
	for (uint64_t pos = 0; pos < N; pos++) {
		gf_record r;
		assert_int_equal(gf_dataset_get(ds, pos, &r), 0);
		int i = image_of(r.payload), label = (7 * i) % 5;
		assert_true(i < N && !once[i]++); /* every image once */
		assert_int_equal(i, image_at(pos, N));
		assert_int_equal(r.h.label, label);
		assert_int_equal(r.h.encoding, GF_ENC_RAW);
		assert_int_equal(r.h.height, H);
		assert_int_equal(r.h.width, W);
		assert_int_equal(r.h.channels, 3);
		for (int y = 0; y < H; y++)
			for (int x = 0; x < W; x++)
				for (int c = 0; c < 3; c++)
					if (r.payload[(y * W + x) * 3 + c] != px(i, y, x, c))
						fail_msg("%s: record %llu (image %d) pixel (%d, %d, %d) = %d, expected %d", path,
						         (unsigned long long)pos, i, y, x, c, r.payload[(y * W + x) * 3 + c],
						         px(i, y, x, c));
		/* the class index lists this position under its label, in order */
		assert_true(seen[label] < m->class_count[label]);
		assert_int_equal(index[label][seen[label]++], pos);
	}
	for (int c = 0; c < 5; c++) {
		assert_int_equal(seen[c], m->class_count[c]);
		assert_int_equal(m->class_count[c], N / 5);
	}
	gf_dataset_close(ds);
}

/* Same records (headers and payloads) in the same order. */
static void check_same(const char *a, const char *b)
{
	gf_dataset *da, *db;
	assert_int_equal(gf_dataset_open(a, &da), 0);
	assert_int_equal(gf_dataset_open(b, &db), 0);
	uint64_t n = gf_dataset_metadata(da)->count;
	assert_int_equal(gf_dataset_metadata(db)->count, n);
	for (uint64_t pos = 0; pos < n; pos++) {
		gf_record ra, rb;
		assert_int_equal(gf_dataset_get(da, pos, &ra), 0);
		assert_int_equal(gf_dataset_get(db, pos, &rb), 0);
		assert_int_equal(ra.value_len, rb.value_len);
		assert_memory_equal(ra.value, rb.value, ra.value_len);
	}
	gf_dataset_close(da);
	gf_dataset_close(db);
}

static void test_labelled_zip(void **st)
{
	(void)st;
	char *zip = path_fmt("%s/labelled.zip", gen), *out = path_fmt("%s/labelled", dir);
	gf_convert_stats s;
	if (convert(zip, out, 0, NULL, &s))
		fail_msg("%s", gf_errmsg());
	assert_int_equal(s.records, N);
	assert_int_equal(s.skipped, 0);
	assert_int_equal(s.ignored, 1); /* README.txt; dataset.json and the folder entries are not counted */
	check_labelled(out);
	/* shuffle=0: the images' sorted names */
	char *out0 = path_fmt("%s/labelled-sorted", dir);
	gf_convert_opts o;
	gf_convert_defaults(&o);
	o.shuffle = 0;
	if (convert(zip, out0, 0, &o, NULL))
		fail_msg("%s", gf_errmsg());
	check_labelled(out0);
	free(out0);
	free(zip);
	free(out);
}

static void test_folder_zip64_nested(void **st)
{
	(void)st;
	char *zip_out = path_fmt("%s/ref", dir);
	char *zip = path_fmt("%s/labelled.zip", gen);
	assert_int_equal(convert(zip, zip_out, 0, NULL, NULL), 0);
	const char *srcs[3] = { "labelled", "zip64.zip", "nested.zip" };
	for (int k = 0; k < 3; k++) {
		char *src = path_fmt("%s/%s", gen, srcs[k]), *out = path_fmt("%s/other-%d", dir, k);
		if (convert(src, out, 0, NULL, NULL))
			fail_msg("%s: %s", src, gf_errmsg());
		check_labelled(out);
		check_same(zip_out, out);
		free(src);
		free(out);
	}
	free(zip);
	free(zip_out);
}

static void test_unlabelled_and_limit(void **st)
{
	(void)st;
	char *zip = path_fmt("%s/unlabelled.zip", gen), *out = path_fmt("%s/unlabelled", dir);
	gf_convert_opts o;
	gf_convert_defaults(&o);
	o.limit = 5;
	assert_int_equal(convert(zip, out, 0, &o, NULL), 0);
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	assert_int_equal(m->count, 5);
	assert_int_equal(m->nclasses, 0);
	assert_int_equal(m->unlabelled, 5);
	for (uint64_t pos = 0; pos < 5; pos++) {
		gf_record r;
		assert_int_equal(gf_dataset_get(ds, pos, &r), 0);
		int i = image_of(r.payload);
		assert_int_equal(i, image_at(pos, 5));
		assert_int_equal(r.h.label, -1);
		assert_int_equal(r.h.channels, 1);
		assert_int_equal(r.h.width, 6);
		assert_int_equal(r.h.height, 5);
		for (int y = 0; y < 5; y++)
			for (int x = 0; x < 6; x++)
				assert_int_equal(r.payload[y * 6 + x], px(i, y, x, 0));
	}
	gf_dataset_close(ds);
	free(zip);
	free(out);
}

/* Each bad zip fails naming the zip and the member, and leaves no output. */
static void test_errors(void **st)
{
	(void)st;
	static const struct {
		const char *zip, *what, *what2;
		uint32_t classes;
	} cases[] = {
		{ "bad-nolabel", "00000/img00000003.png has no label in dataset.json", NULL, 0 },
		{ "bad-extralabel", "dataset.json has a label for 00000/img00000099.png", NULL, 0 },
		{ "bad-range", "00000/img00000002.png has label -1", NULL, 0 },
		{ "bad-vector", "00000/img00000004.png has a vector label", NULL, 0 },
		{ "bad-twice", "dataset.json labels 00000/img00000001.png twice", NULL, 0 },
		{ "bad-size", "00000/img00000005.png is 13x10x3 but 00000/img00000000.png (the first image) is 12x10x3",
		  NULL, 0 },
		{ "bad-corrupt", "00000/img00000002.png: CRC-32", "corrupt member", 0 },
		{ "bad-json", "dataset.json: JSON:", NULL, 0 },
		{ "bad-nokey", "dataset.json has no \"labels\"", NULL, 0 },
		{ "labelled", "00000/img00000002.png has label 4: expected a class index in 0..2", "classes=", 3 },
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		char *zip = path_fmt("%s/%s.zip", gen, cases[k].zip), *out = path_fmt("%s/bad-%zu", dir, k);
		int rc = convert(zip, out, cases[k].classes, NULL, NULL);
		const char *msg = gf_errmsg();
		if (!rc || !strstr(msg, zip) || !strstr(msg, cases[k].what) ||
		    (cases[k].what2 && !strstr(msg, cases[k].what2)))
			fail_msg("%s: rc %d, message '%s', expected the zip's path and '%s'", cases[k].zip, rc, msg,
			         cases[k].what);
		struct stat sb;
		char *tmp = path_fmt("%s.tmp", out);
		assert_int_not_equal(stat(out, &sb), 0);
		assert_int_not_equal(stat(tmp, &sb), 0);
		free(tmp);
		free(zip);
		free(out);
	}
	/* a given resize makes images of different sizes one size */
	char *zip = path_fmt("%s/bad-size.zip", gen), *out = path_fmt("%s/resized", dir);
	gf_convert_opts o;
	gf_convert_defaults(&o);
	o.resize_w = o.resize_h = 8;
	if (convert(zip, out, 0, &o, NULL))
		fail_msg("%s", gf_errmsg());
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	assert_int_equal(gf_dataset_metadata(ds)->count, 6);
	assert_int_equal(gf_dataset_metadata(ds)->max_width, 8);
	assert_int_equal(gf_dataset_metadata(ds)->min_width, 8);
	gf_dataset_close(ds);
	free(zip);
	free(out);
}

/* The command: options, the summary, messages, `folder` on a zip. */
static void test_command(void **st)
{
	(void)st;
	const char *g = ganflow_bin();
	char *zip = path_fmt("%s/labelled.zip", gen), *out = path_fmt("%s/cmd", dir), *log = path_fmt("%s/cmd.log", dir);
	assert_int_equal(run_cmd("%s dataset stylegan %s %s classes=7 encoding=jpeg quality=95 >%s 2>&1", g, zip, out,
	                         log),
	                 0);
	char *txt = slurp(log);
	if (!strstr(txt, "40 records in 1 shard") || !strstr(txt, "1 non-image files ignored"))
		fail_msg("summary: %s", txt);
	free(txt);
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	assert_int_equal(m->count, N);
	assert_int_equal(m->nclasses, 7);
	assert_int_equal(m->enc_count[GF_ENC_JPEG], N);
	assert_int_equal(m->class_count[5] + m->class_count[6], 0);
	gf_dataset_close(ds);

	char *bad = path_fmt("%s/bad-range.zip", gen);
	assert_int_equal(run_cmd("%s dataset stylegan %s %s/cmd2 >%s 2>&1", g, bad, dir, log), 1);
	txt = slurp(log);
	if (!strstr(txt, bad) || !strstr(txt, "00000/img00000002.png has label -1"))
		fail_msg("message: %s", txt);
	free(txt);
	assert_int_equal(run_cmd("%s dataset folder %s %s/cmd3 >%s 2>&1", g, zip, dir, log), 1);
	txt = slurp(log);
	if (!strstr(txt, "dataset stylegan"))
		fail_msg("folder on a zip: %s", txt);
	free(txt);
	assert_int_equal(run_cmd("%s dataset stylegan %s %s/cmd4 classes=0 >%s 2>&1", g, zip, dir, log), 2);
	free(bad);
	free(zip);
	free(out);
	free(log);
}

/* The zip reader alone: names in directory order, members read back. */
static void test_zip_reader(void **st)
{
	(void)st;
	char *zip = path_fmt("%s/zip64.zip", gen), *f = path_fmt("%s/labelled/00001/img00000017.png", gen);
	gf_zip *z;
	assert_int_equal(gf_zip_open(zip, &z), 0);
	assert_int_equal(gf_zip_count(z), N + 2); /* dataset.json, README.txt */
	assert_string_equal(gf_zip_name(z, 0), "dataset.json");
	uint8_t *want, *buf = NULL;
	size_t wlen, len, cap = 0;
	assert_int_equal(gf_read_file(f, 0, &want, &wlen), 0);
	size_t found = 0;
	for (size_t i = 0; i < gf_zip_count(z); i++)
		if (!strcmp(gf_zip_name(z, i), "00001/img00000017.png")) {
			assert_int_equal(gf_zip_read(z, i, &buf, &cap, &len), 0);
			assert_int_equal(len, wlen);
			assert_memory_equal(buf, want, len);
			found++;
		}
	assert_int_equal(found, 1);
	gf_zip_close(z);
	/* not a zip; a truncated one */
	assert_int_not_equal(gf_zip_open(f, &z), 0);
	assert_non_null(strstr(gf_errmsg(), "not a zip file"));
	char *cut = path_fmt("%s/cut.zip", dir);
	assert_int_equal(run_cmd("head -c 3000 %s/labelled.zip > %s", gen, cut), 0);
	assert_int_not_equal(gf_zip_open(cut, &z), 0);
	assert_non_null(strstr(gf_errmsg(), cut));
	free(cut);
	free(buf);
	free(want);
	free(f);
	free(zip);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zip_reader),
		cmocka_unit_test(test_labelled_zip),
		cmocka_unit_test(test_folder_zip64_nested),
		cmocka_unit_test(test_unlabelled_and_limit),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_command),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
