/* The label_shard stage: reader -> label_shard in a graph. An explicit
 * class list keeps exactly those records, in order; the round-robin over
 * parts (defaulting to the run's rank / world) splits the labelled records
 * into disjoint sets that cover them; unlabelled records are dropped; bad
 * parameters fail with the parameter named.
 */
#include "test_shard_util.h"

static char *dir, *ds_path, *unl_path;

enum { N = 400, NC = 7 };

static int setup(void **st)
{
	(void)st;
	dir = tmpdir_make();
	ds_path = path_fmt("%s/ds", dir);
	unl_path = path_fmt("%s/unlabelled", dir);
	ds_spec s = { .n = N, .nclasses = NC, .shard_records = 150, .encoding = GF_ENC_RAW, .w = 3, .h = 3, .c = 1 };
	make_dataset(ds_path, &s);
	ds_spec u = { .n = 20, .nclasses = 0, .encoding = GF_ENC_RAW, .w = 2, .h = 2, .c = 1 };
	make_dataset(unl_path, &u);
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	gf_remove_tree(dir);
	free(dir);
	free(ds_path);
	free(unl_path);
	sink_reset();
	return 0;
}

static int run_shard(const char *path, gf_value params, const gf_run_info *info, char *err, size_t errsize)
{
	sink_reset();
	step s[2] = {
		{ "lmdb_reader", NULL, "samples",
		  kv("path", gf_value_str(path), "epochs", gf_value_int(1), "shuffle", gf_value_bool(0), "parts",
		     gf_value_int(1), NULL),
		  1 },
		{ "label_shard", "records", "records", params, 1 },
	};
	return run_chain(s, 2, info, err, errsize);
}

static void test_list(void **st)
{
	(void)st;
	char err[1024];
	int64_t cls[2] = { 0, 2 };
	assert_int_equal(run_shard(ds_path, kv("classes", int_list(2, cls), NULL), NULL, err, sizeof(err)), 0);
	size_t k = 0;
	for (uint64_t key = 0; key < N; key++) {
		int32_t l = label_of(key, NC);
		if (l != 0 && l != 2)
			continue;
		assert_true(k < sink_n);
		assert_int_equal(sink_items[k].key, key); /* exactly these, in order */
		assert_int_equal(sink_items[k].label, l);
		assert_int_equal(sink_items[k].ntensors, 2); /* forwarded as is */
		k++;
	}
	assert_int_equal(sink_n, k);
}

static void test_round_robin(void **st)
{
	(void)st;
	char err[1024];
	uint8_t seen[N];
	memset(seen, 0, sizeof(seen));
	for (int part = 0; part < 3; part++) {
		assert_int_equal(run_shard(ds_path, kv("part", gf_value_int(part), "parts", gf_value_int(3), NULL), NULL, err,
		                           sizeof(err)),
		                 0);
		for (size_t i = 0; i < sink_n; i++) {
			assert_int_equal(sink_items[i].label % 3, part);
			assert_int_equal(seen[sink_items[i].key], 0);
			seen[sink_items[i].key] = 1;
		}
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(seen[i], 1);
	/* defaults: the run's rank and world */
	gf_run_info info = { .rank = 1, .world = 2, .seed = 1 };
	assert_int_equal(run_shard(ds_path, gf_value_map(), &info, err, sizeof(err)), 0);
	size_t odd = 0;
	for (uint64_t key = 0; key < N; key++)
		odd += label_of(key, NC) % 2 == 1;
	assert_int_equal(sink_n, odd);
	for (size_t i = 0; i < sink_n; i++)
		assert_int_equal(sink_items[i].label % 2, 1);
}

static void test_unlabelled_and_errors(void **st)
{
	(void)st;
	char err[1024];
	assert_int_equal(run_shard(unl_path, gf_value_map(), NULL, err, sizeof(err)), 0);
	assert_int_equal(sink_n, 0);
	assert_int_equal(run_shard(ds_path, kv("classes", gf_value_list(), NULL), NULL, err, sizeof(err)), GF_EFAIL);
	if (!strstr(err, "'classes' is empty"))
		fail_msg("unexpected: %s", err);
	int64_t cls[1] = { 1 };
	assert_int_equal(
	    run_shard(ds_path, kv("classes", int_list(1, cls), "part", gf_value_int(0), NULL), NULL, err, sizeof(err)),
	    GF_EFAIL);
	if (!strstr(err, "either 'classes' or 'part'"))
		fail_msg("unexpected: %s", err);
	assert_int_equal(run_shard(ds_path, kv("part", gf_value_int(2), "parts", gf_value_int(2), NULL), NULL, err,
	                           sizeof(err)),
	                 GF_EFAIL);
	if (!strstr(err, "part 2 of 2"))
		fail_msg("unexpected: %s", err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_round_robin),
		cmocka_unit_test(test_unlabelled_and_errors),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
