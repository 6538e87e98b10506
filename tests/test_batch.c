/* The batch stage: reader -> jpeg_decode -> batch in a graph. Batch
 * shapes, labels and pixels against the samples decoded one by one,
 * batches never spanning epochs, drop_last, resume metadata, and a shape
 * mismatch failing with a message that names the record.
 */
#include "test_shard_util.h"

static char *dir, *ds_path, *mixed_path;

enum { N = 50, H = 5, W = 6 };

static int setup(void **st)
{
	(void)st;
	dir = tmpdir_make();
	ds_path = path_fmt("%s/ds", dir);
	mixed_path = path_fmt("%s/mixed", dir);
	ds_spec s = { .n = N, .nclasses = 5, .shard_records = 20, .encoding = GF_ENC_RAW, .w = W, .h = H, .c = 1 };
	make_dataset(ds_path, &s);
	/* records of two sizes */
	gf_writer_opts wo = { .nclasses = 2 };
	gf_dataset_writer *w;
	assert_int_equal(gf_dataset_writer_open(mixed_path, &wo, &w), 0);
	uint8_t pix[25] = { 0 };
	for (int k = 0; k < 10; k++) {
		uint32_t sz = k == 6 ? 5 : 4;
		gf_record_header h = { .label = k % 2, .encoding = GF_ENC_RAW, .height = sz, .width = sz, .channels = 1,
			                   .payload = sz * sz };
		assert_int_equal(gf_dataset_writer_add(w, &h, pix), 0);
	}
	assert_int_equal(gf_dataset_writer_finish(w), 0);
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	gf_remove_tree(dir);
	free(dir);
	free(ds_path);
	free(mixed_path);
	sink_reset();
	return 0;
}

/* The samples of a reference run, in order. */
static float *ref_px;   /* (n, H * W) */
static int32_t *ref_lab;
static int64_t *ref_epoch;
static size_t ref_n, ref_cursor;

static const char *keep_sample(const gf_msg *m)
{
	memcpy(ref_px + ref_n * H * W, m->t[0].data, H * W * sizeof(float));
	ref_lab[ref_n] = (int32_t)m->label;
	ref_epoch[ref_n] = m->epoch;
	ref_n++;
	return NULL;
}

static const char *check_batch(const gf_msg *m)
{
	if (m->ntensors != 2 || m->t[0].dtype != GF_F32 || m->t[0].ndim != 4 || m->t[1].dtype != GF_I32)
		return "not a batch";
	int64_t n = m->t[0].shape[0];
	if (m->t[1].shape[0] != n || m->t[0].shape[1] != 1 || m->t[0].shape[2] != H || m->t[0].shape[3] != W)
		return "bad shapes";
	const float *px = m->t[0].data;
	const int32_t *lab = m->t[1].data;
	while (ref_cursor < ref_n && ref_epoch[ref_cursor] < m->epoch)
		ref_cursor++; /* samples of a dropped short batch */
	for (int64_t i = 0; i < n; i++, ref_cursor++) {
		if (ref_cursor >= ref_n)
			return "more samples than the reference";
		if (memcmp(px + i * H * W, ref_px + ref_cursor * H * W, H * W * sizeof(float)))
			return "pixels differ from the sample decoded alone";
		if (lab[i] != ref_lab[ref_cursor])
			return "label differs";
		if (m->epoch != ref_epoch[ref_cursor])
			return "a batch spans two epochs";
	}
	return NULL;
}

static step reader_step(void)
{
	return (step){ "lmdb_reader", NULL, "samples",
		           kv("path", gf_value_str(ds_path), "epochs", gf_value_int(2), "window", gf_value_int(16), NULL),
		           1 };
}

static void test_batches(void **st)
{
	(void)st;
	char err[1024];
	ref_px = malloc(2 * N * H * W * sizeof(float));
	ref_lab = malloc(2 * N * sizeof(int32_t));
	ref_epoch = malloc(2 * N * sizeof(int64_t));
	ref_n = 0;
	sink_reset();
	sink_check = keep_sample;
	step s1[2] = { reader_step(), { "jpeg_decode", "records", "samples", gf_value_map(), 2 } };
	assert_int_equal(run_chain(s1, 2, NULL, err, sizeof(err)), 0);
	assert_int_equal(ref_n, 2 * N);

	for (int drop = 0; drop < 2; drop++) {
		sink_reset();
		sink_check = check_batch;
		ref_cursor = 0;
		step s[3] = { reader_step(),
			          { "jpeg_decode", "records", "samples", gf_value_map(), 2 },
			          { "batch", "samples", "batch", kv("size", gf_value_int(7), "drop_last", gf_value_bool(drop), NULL),
			            1 } };
		int rc = run_chain(s, 3, NULL, err, sizeof(err));
		if (rc)
			fail_msg("run: %s", err);
		if (sink_bad)
			fail_msg("%s", sink_why);
		/* per epoch: 7 batches of 7, then 1 of 1 unless dropped */
		assert_int_equal(sink_n, drop ? 14 : 16);
		for (size_t i = 0; i < sink_n; i++) {
			got *g = &sink_items[i];
			size_t in_epoch = drop ? i % 7 : i % 8;
			int64_t n = in_epoch == 7 ? 1 : 7;
			assert_int_equal(g->t0.shape[0], n);
			assert_int_equal(g->epoch, (int64_t)(drop ? i / 7 : i / 8));
			/* pos of the last sample: resume continues after it */
			assert_int_equal(g->pos, in_epoch == 7 ? N : 7 * (in_epoch + 1));
			int ends = drop ? 0 : in_epoch == 7;
			assert_int_equal((g->flags & GF_MSG_LAST) != 0, ends);
		}
		/* every sample checked, but the dropped last one of epoch 1 */
		assert_int_equal(ref_cursor, drop ? 2 * N - 1 : 2 * N);
	}
	free(ref_px);
	free(ref_lab);
	free(ref_epoch);
}

static void test_mismatch(void **st)
{
	(void)st;
	char err[1024];
	sink_reset();
	step s[3] = {
		{ "lmdb_reader", NULL, "samples", kv("path", gf_value_str(mixed_path), "shuffle", gf_value_bool(0), "epochs",
		                                     gf_value_int(1), NULL), 1 },
		{ "jpeg_decode", "records", "samples", gf_value_map(), 1 },
		{ "batch", "samples", "batch", kv("size", gf_value_int(4), NULL), 1 },
	};
	assert_int_equal(run_chain(s, 3, NULL, err, sizeof(err)), GF_EFAIL);
	if (!strstr(err, "sample key 6") || !strstr(err, "give jpeg_decode a size"))
		fail_msg("unexpected: %s", err);
	/* with a size every record fits */
	sink_reset();
	step s2[3] = {
		{ "lmdb_reader", NULL, "samples", kv("path", gf_value_str(mixed_path), "epochs", gf_value_int(1), NULL), 1 },
		{ "jpeg_decode", "records", "samples", kv("size", gf_value_int(4), NULL), 1 },
		{ "batch", "samples", "batch", kv("size", gf_value_int(4), NULL), 1 },
	};
	assert_int_equal(run_chain(s2, 3, NULL, err, sizeof(err)), 0);
	assert_int_equal(sink_n, 3);
	assert_int_equal(sink_items[2].t0.shape[0], 2);
}

/* The whole data path from a Lua pipeline through `ganflow run`: the
 * collect test stage fails the run unless exactly `expect` batches
 * arrive. */
static void test_lua_pipeline(void **st)
{
	(void)st;
	const char *g = ganflow_bin();
	char *so = path_fmt("%s/stages/collect.so", getenv("GF_BINARY_DIR") ? getenv("GF_BINARY_DIR") : ".");
	if (access(g, X_OK) || access(so, R_OK)) {
		free(so);
		skip(); /* the command or the runtime's test stages are not built */
	}
	free(so);
	int per_epoch = 0;
	for (uint64_t k = 0; k < N; k++)
		per_epoch += label_of(k, 5) == 0 || label_of(k, 5) == 2;
	int expect = 2 * (per_epoch / 8); /* drop_last */
	char *lua = path_fmt("%s/pipeline.lua", dir), *log = path_fmt("%s/run.log", dir);
	FILE *f = fopen(lua, "w");
	assert_non_null(f);
	fprintf(f,
	        "local gf = require \"ganflow\"\n"
	        "local r = gf.stage \"lmdb_reader\" { path = \"%s\", epochs = 2, window = 16 }\n"
	        "local l = gf.stage \"label_shard\" { classes = { 0, 2 } }\n"
	        "local d = gf.stage \"jpeg_decode\" { size = 4, channels = 3, crop = \"random\", flip = true, workers = 2 }\n"
	        "local b = gf.stage \"batch\" { size = 8, drop_last = true }\n"
	        "local c = gf.stage \"collect\" { expect = %d }\n"
	        "gf.connect(r.samples, l.records)\n"
	        "gf.connect(l.records, d.records)\n"
	        "gf.connect(d.samples, b.samples)\n"
	        "gf.connect(b.batch, c.inp)\n"
	        "gf.run { steps = 0 }\n",
	        ds_path, expect);
	fclose(f);
	int rc = run_cmd("%s run %s >%s 2>&1", g, lua, log);
	char *txt = slurp(log);
	if (rc != 0)
		fail_msg("ganflow run exited %d:\n%s", rc, txt ? txt : "");
	free(txt);
	/* a misspelt parameter stops the run before anything reads */
	char *bad = path_fmt("%s/bad.lua", dir);
	f = fopen(bad, "w");
	fprintf(f,
	        "local gf = require \"ganflow\"\n"
	        "local r = gf.stage \"lmdb_reader\" { path = \"%s\", epochs = 1, clases = { 1 } }\n"
	        "local c = gf.stage \"collect\" { }\n"
	        "gf.connect(r.samples, c.inp)\n"
	        "gf.run { steps = 0 }\n",
	        ds_path);
	fclose(f);
	assert_int_not_equal(run_cmd("%s run %s >%s 2>&1", g, bad, log), 0);
	txt = slurp(log);
	if (!txt || !strstr(txt, "clases"))
		fail_msg("a misspelt parameter was not named:\n%s", txt ? txt : "");
	free(txt);
	free(bad);
	free(lua);
	free(log);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batches),
		cmocka_unit_test(test_mismatch),
		cmocka_unit_test(test_lua_pipeline),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
