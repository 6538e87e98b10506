/* Data paths that can never fill a batch fail at once instead of cycling
 * the data forever with the run at step 0: a dataset with fewer records
 * per epoch than a drop_last batch (the batch stage names the dataset and
 * both counts), and a label_shard whose classes no record arriving from
 * upstream has (two chained shards with disjoint classes: the stage names
 * its own classes and those it saw). Both are looping readers (epochs = 0):
 * without the checks these runs never end.
 */
#include "test_shard_util.h"

static char *dir, *ds_path;

enum { N = 10, NC = 4 };

static int setup(void **st)
{
	(void)st;
	dir = tmpdir_make();
	ds_path = path_fmt("%s/ten", dir);
	ds_spec s = { .n = N, .nclasses = NC, .encoding = GF_ENC_RAW, .w = 3, .h = 3, .c = 1 };
	make_dataset(ds_path, &s);
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	gf_remove_tree(dir);
	free(dir);
	free(ds_path);
	sink_reset();
	return 0;
}

static step reader_forever(void)
{
	return (step){ "lmdb_reader", NULL, "samples", kv("path", gf_value_str(ds_path), "epochs", gf_value_int(0), NULL), 1 };
}

static void test_batch_larger_than_the_data(void **st)
{
	(void)st;
	char err[2048];
	sink_reset();
	step s[3] = { reader_forever(), { "jpeg_decode", "records", "samples", gf_value_map(), 1 },
		      { "batch", "samples", "batch", kv("size", gf_value_int(64), "drop_last", gf_value_bool(1), NULL), 1 } };
	assert_int_equal(run_chain(s, 3, NULL, err, sizeof(err)), GF_EFAIL);
	if (!strstr(err, "the data has 10 records per epoch (dataset ") || !strstr(err, "ten") ||
	    !strstr(err, "batch 64 with drop_last: no batch can be made"))
		fail_msg("unexpected: %s", err);
	assert_int_equal(sink_n, 0);
}

static void test_batch_fits_once(void **st)
{
	(void)st;
	/* 10 records, batches of 10 with drop_last: one per epoch, no failure */
	char err[2048];
	sink_reset();
	step s[3] = { { "lmdb_reader", NULL, "samples", kv("path", gf_value_str(ds_path), "epochs", gf_value_int(3), NULL), 1 },
		      { "jpeg_decode", "records", "samples", gf_value_map(), 1 },
		      { "batch", "samples", "batch", kv("size", gf_value_int(10), "drop_last", gf_value_bool(1), NULL), 1 } };
	if (run_chain(s, 3, NULL, err, sizeof(err)))
		fail_msg("run: %s", err);
	assert_int_equal(sink_n, 3);
}

static void test_disjoint_label_shards(void **st)
{
	(void)st;
	char err[2048];
	sink_reset();
	int64_t a[2] = { 0, 1 }, b[1] = { 2 };
	step s[3] = { reader_forever(), { "label_shard", "records", "records", kv("classes", int_list(2, a), NULL), 1 },
		      { "label_shard", "records", "records", kv("classes", int_list(1, b), NULL), 1 } };
	assert_int_equal(run_chain(s, 3, NULL, err, sizeof(err)), GF_EFAIL);
	if (!strstr(err, "stage 'label_shard2' failed: passes no class: its classes 2") || !strstr(err, "classes 0, 1"))
		fail_msg("unexpected: %s", err);
	assert_int_equal(sink_n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_larger_than_the_data),
		cmocka_unit_test(test_batch_fits_once),
		cmocka_unit_test(test_disjoint_label_shards),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
