/* Tests of the training-checkpoint module (<ganflow/ckpt.h>) and of the
 * JSON form of values it stores layer tables in (<ganflow/value.h>):
 * JSON round trips keep types and give sorted, stable text, bad JSON names
 * the offset; resume paths resolve through `latest` with messages naming
 * the path; a checkpoint's parts, roles, classes, tables (JSON, and the Lua
 * text of older checkpoints), networks and data positions read back; the
 * formats ganflow wrote are read and others refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <ganflow/ckpt.h>
#include <ganflow/err.h>
#include <ganflow/safetensors.h>
#include <ganflow/value.h>

static char dir[256];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/gf_test_ckpt_mod.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static const char *at(const char *name)
{
	static char buf[4][512];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
	return buf[k];
}

/* ---- JSON ---- */

static void test_json_round_trip(void **state)
{
	(void)state;
	/* a layer table as a backbone builds it: a map mixing positional
	 * entries ("1", "2", ... "10") with named ones */
	gf_value t = gf_value_map(), layer = gf_value_list(), shape = gf_value_list();
	gf_value_append(&layer, gf_value_str("conv"));
	gf_value_append(&layer, gf_value_int(3));
	gf_value_append(&layer, gf_value_num(0.2));
	gf_value_append(&layer, gf_value_num(2.0));
	gf_value_append(&layer, gf_value_bool(1));
	gf_value_append(&shape, gf_value_int(100));
	gf_value_set(&t, "input_shape", shape);
	gf_value_set(&t, "10", gf_value_str("tanh \"quoted\"\n"));
	gf_value_set(&t, "2", gf_value_nil());
	gf_value_set(&t, "1", layer);
	char *j;
	assert_int_equal(gf_value_to_json(&t, &j), 0);
	assert_string_equal(j, "{\"1\": [\"conv\", 3, 0.20000000000000001, 2.0, true], \"2\": null, "
	                       "\"10\": \"tanh \\\"quoted\\\"\\n\", \"input_shape\": [100]}");
	gf_value back;
	assert_int_equal(gf_value_from_json(j, &back), 0);
	const gf_value *l = gf_value_get(&back, "1");
	assert_int_equal(l->type, GF_VLIST);
	assert_int_equal(gf_value_at(l, 1)->type, GF_VINT);
	assert_int_equal(gf_value_at(l, 1)->u.i, 3);
	assert_int_equal(gf_value_at(l, 3)->type, GF_VNUM); /* 2.0 stays a number */
	assert_true(gf_value_at(l, 2)->u.n == 0.2);
	assert_int_equal(gf_value_at(l, 4)->type, GF_VBOOL);
	assert_string_equal(gf_value_get(&back, "10")->u.s, "tanh \"quoted\"\n");
	assert_int_equal(gf_value_get(&back, "2")->type, GF_VNIL);
	/* the same tree, in another insertion order, gives the same bytes */
	char *j2;
	assert_int_equal(gf_value_to_json(&back, &j2), 0);
	assert_string_equal(j, j2);
	free(j);
	free(j2);
	gf_value_free(&back);
	gf_value_free(&t);

	assert_int_equal(gf_value_from_json(" [1, -2, 3e2, \"\\u00e9\", {}, []] ", &back), 0);
	assert_int_equal(gf_value_at(&back, 1)->u.i, -2);
	assert_int_equal(gf_value_at(&back, 2)->type, GF_VNUM);
	assert_string_equal(gf_value_at(&back, 3)->u.s, "\xc3\xa9");
	assert_int_equal(gf_value_at(&back, 4)->type, GF_VMAP);
	assert_int_equal(gf_value_at(&back, 5)->type, GF_VLIST);
	gf_value_free(&back);
}

static void test_json_errors(void **state)
{
	(void)state;
	gf_value v;
	assert_int_equal(gf_value_from_json("{\"a\": 1 \"b\": 2}", &v), GF_EPARAM);
	assert_string_equal(gf_errmsg(), "JSON: expected ',' or '}' at offset 8");
	assert_int_equal(v.type, GF_VNIL);
	assert_int_equal(gf_value_from_json("[1, 2", &v), GF_EPARAM);
	assert_string_equal(gf_errmsg(), "JSON: expected ',' or ']' at offset 5");
	assert_int_equal(gf_value_from_json("\"open", &v), GF_EPARAM);
	assert_string_equal(gf_errmsg(), "JSON: unterminated string at offset 5");
	assert_int_equal(gf_value_from_json("{{\"conv\", 1}, x = 2}", &v), GF_EPARAM); /* Lua text */
	assert_int_equal(gf_value_from_json("1 2", &v), GF_EPARAM);
	assert_string_equal(gf_errmsg(), "JSON: text after the value at offset 2");
	gf_value n = gf_value_num(1.0 / 0.0);
	char *j = NULL;
	assert_int_equal(gf_value_to_json(&n, &j), GF_EPARAM);
	assert_null(j);
}

/* ---- files of a run ---- */

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_resolve(void **state)
{
	(void)state;
	char out[4096], name[600];
	mkdir(at("run"), 0755);
	mkdir(at("run/" GF_CKPT_DIR), 0755);
	gf_ckpt_file_name(at("run/" GF_CKPT_DIR), 42, name, sizeof(name));
	assert_string_equal(name, at("run/checkpoints/ckpt-00000042.safetensors"));
	write_text(name, "x");
	/* no latest yet */
	assert_int_equal(gf_ckpt_resolve(at("run"), out, sizeof(out)), GF_ENOTFOUND);
	assert_non_null(strstr(gf_errmsg(), "is a directory without checkpoints/latest (give a checkpoint file)"));
	assert_int_equal(gf_ckpt_set_latest(at("run/" GF_CKPT_DIR), name), 0);
	assert_int_equal(gf_ckpt_resolve(at("run"), out, sizeof(out)), 0);
	assert_string_equal(out, name);
	assert_int_equal(gf_ckpt_resolve(at("run/" GF_CKPT_DIR), out, sizeof(out)), 0);
	assert_string_equal(out, name);
	assert_int_equal(gf_ckpt_resolve(name, out, sizeof(out)), 0);
	assert_string_equal(out, name);
	/* latest naming a file that is gone, and a path that does not exist */
	write_text(at("run/" GF_CKPT_DIR "/" GF_CKPT_LATEST), "ckpt-00000007.safetensors\n");
	assert_int_equal(gf_ckpt_resolve(at("run"), out, sizeof(out)), -ENOENT);
	assert_non_null(strstr(gf_errmsg(), "names '"));
	assert_non_null(strstr(gf_errmsg(), "ckpt-00000007.safetensors': No such file or directory"));
	assert_int_equal(gf_ckpt_resolve(at("nowhere"), out, sizeof(out)), -ENOENT);
}

/* ---- reading a checkpoint ---- */

/* A checkpoint as a run of two stages leaves it: "g" (generator, JSON
 * table, class 2) and "d" (discriminator, a Lua-text table as older
 * checkpoints have, data position of reader "reader7"). */
static const char *make_checkpoint(void)
{
	static const char *path;
	gf_backend *be;
	gf_backend_opts o = { .threads = 1 };
	assert_int_equal(gf_backend_open("cpu", &o, &be), 0);
	const char *gjson = "{\"1\": [\"linear\", 3, 2], \"input_shape\": [3]}";
	gf_value table;
	assert_int_equal(gf_value_from_json(gjson, &table), 0);
	gf_net *g;
	gf_net_opts no = { .max_batch = 4 };
	assert_int_equal(gf_net_create(&g, be, &table, &no), 0);
	gf_value_free(&table);
	size_t n;
	float *w = malloc(8 * sizeof(float));
	gf_net_block(g, GF_PARAMS, &n);
	assert_int_equal(n, 8); /* 3 x 2 weights, 2 biases */
	for (size_t i = 0; i < n; i++)
		w[i] = 0.25f * (float)i;
	assert_int_equal(gf_net_write(g, GF_PARAMS, w), 0);
	gf_ckpt_part part = { "g.net", g, NULL };
	gf_ckpt_entries ce;
	assert_int_equal(gf_ckpt_collect(&part, 1, &ce), 0);
	gf_st_entry *e = calloc(ce.n + 1, sizeof(*e));
	memcpy(e, ce.e, ce.n * sizeof(*e));
	int64_t pos[2] = { 3, 1234 }, shape[1] = { 2 };
	e[ce.n].name = "d.data_pos";
	e[ce.n].t = gf_tensor_make(pos, GF_I64, 1, shape);
	const char *meta[] = { "format", GF_CKPT_FORMAT, "g.role", "generator", "g.table", gjson, "g.class", "2",
	                       "d.role", "discriminator", "d.table", "{ {\"linear\", 2, 1}, input_shape = {2} }",
	                       "d.reader", "reader7", NULL };
	path = at("two.safetensors");
	assert_int_equal(gf_st_write(path, e, ce.n + 1, meta), 0);
	free(e);
	free(w);
	gf_ckpt_entries_free(&ce);
	gf_net_destroy(g);
	gf_backend_close(be);
	return path;
}

static void test_parts(void **state)
{
	(void)state;
	const char *path = make_checkpoint();
	gf_ckpt *c;
	assert_int_equal(gf_ckpt_open(&c, path), 0);
	assert_string_equal(gf_ckpt_path(c), path);
	assert_int_equal(gf_ckpt_nparts(c), 2);
	int g = gf_ckpt_find(c, "generator"), d = gf_ckpt_find(c, "discriminator");
	assert_true(g >= 0 && d >= 0 && g != d);
	assert_int_equal(gf_ckpt_find(c, "classifier"), -1);
	assert_string_equal(gf_ckpt_part_name(c, g), "g");
	assert_int_equal(gf_ckpt_part_class(c, g), 2);
	assert_int_equal(gf_ckpt_part_class(c, d), -1);
	assert_string_equal(gf_ckpt_part_meta(c, d, "reader"), "reader7");
	assert_null(gf_ckpt_part_meta(c, g, "reader"));

	/* tables: JSON, and the Lua text of older checkpoints */
	gf_value t;
	assert_int_equal(gf_ckpt_table(c, g, &t), 0);
	assert_int_equal(gf_value_at(gf_value_get(&t, "input_shape"), 0)->u.i, 3);
	gf_value_free(&t);
	assert_int_equal(gf_ckpt_table(c, d, &t), 0);
	assert_int_equal(gf_value_nargs(&t), 1);
	gf_value_free(&t);

	/* the generator's network, weights loaded */
	gf_backend *be;
	gf_backend_opts o = { .threads = 1 };
	assert_int_equal(gf_backend_open("cpu", &o, &be), 0);
	gf_net *net;
	assert_int_equal(gf_ckpt_net(c, g, be, 4, &net), 0);
	float w[8];
	assert_int_equal(gf_net_read(net, GF_PARAMS, w), 0);
	for (int i = 0; i < 8; i++)
		assert_true(w[i] == 0.25f * (float)i);
	gf_net_destroy(net);
	/* d has a table but no tensors: the missing one is named */
	assert_int_not_equal(gf_ckpt_net(c, d, be, 4, &net), 0);
	assert_null(net);
	assert_non_null(strstr(gf_errmsg(), "d.net."));
	gf_backend_close(be);

	/* data positions */
	int64_t pos[2] = { -1, -1 };
	int found;
	assert_int_equal(gf_ckpt_data_pos(c, "reader7", pos, &found), 0);
	assert_int_equal(found, 1);
	assert_int_equal(pos[0], 3);
	assert_int_equal(pos[1], 1234);
	assert_int_equal(gf_ckpt_data_pos(c, "reader", pos, &found), 0);
	assert_int_equal(found, 0);
	gf_ckpt_close(c);
}

static void test_bad_table(void **state)
{
	(void)state;
	const char *meta[] = { "format", GF_CKPT_FORMAT, "x.role", "generator", "x.table", "{\"1\": [\"linear\", 3 2]}",
	                       "y.role", "classifier", NULL };
	assert_int_equal(gf_st_write(at("bad.safetensors"), NULL, 0, meta), 0);
	gf_ckpt *c;
	gf_value t;
	assert_int_equal(gf_ckpt_open(&c, at("bad.safetensors")), 0);
	assert_int_equal(gf_ckpt_table(c, gf_ckpt_find(c, "generator"), &t), GF_ECORRUPT);
	assert_non_null(strstr(gf_errmsg(), "the layer table of 'x' is neither JSON (JSON: expected ',' or ']' at "
	                                    "offset 19) nor the Lua text of older checkpoints"));
	assert_int_equal(gf_ckpt_table(c, gf_ckpt_find(c, "classifier"), &t), GF_ECORRUPT);
	assert_non_null(strstr(gf_errmsg(), "part 'y' (classifier) has no layer table (metadata 'y.table')"));
	gf_ckpt_close(c);
	assert_int_not_equal(gf_ckpt_open(&c, at("missing.safetensors")), 0);
}

/* The formats: every one ganflow ever wrote opens (training checkpoints,
 * "ganflow-checkpoint-1" since the first, with JSON or older Lua-text
 * tables; single networks, "ganflow-nn-1", as the evaluator's classifier
 * and `ganflow weights import` save them); any other, or none, is refused
 * naming the file, what it holds and what is read. */
static void test_formats(void **state)
{
	(void)state;
	/* the training checkpoint of make_checkpoint (JSON and Lua-text tables) */
	gf_ckpt *c;
	assert_int_equal(gf_ckpt_check_format(make_checkpoint()), 0);
	/* a network saved as the classifier export and `weights import` do */
	gf_backend *be;
	gf_backend_opts o = { .threads = 1 };
	assert_int_equal(gf_backend_open("cpu", &o, &be), 0);
	const char *json = "{\"1\": [\"linear\", 3, 2], \"input_shape\": [3]}";
	gf_value table;
	assert_int_equal(gf_value_from_json(json, &table), 0);
	gf_net *net;
	gf_net_opts no = { .max_batch = 2 };
	assert_int_equal(gf_net_create(&net, be, &table, &no), 0);
	gf_value_free(&table);
	gf_ckpt_part part = { "clf.net", net, NULL };
	const char *nmeta[] = { "clf.role", "classifier", "clf.table", json, NULL };
	assert_int_equal(gf_ckpt_save(at("clf.safetensors"), &part, 1, 5, NULL, nmeta), 0);
	assert_int_equal(gf_ckpt_open(&c, at("clf.safetensors")), 0);
	gf_net *back;
	assert_int_equal(gf_ckpt_net(c, gf_ckpt_find(c, "classifier"), be, 2, &back), 0);
	gf_net_destroy(back);
	gf_ckpt_close(c);
	gf_net_destroy(net);
	gf_backend_close(be);

	static const struct {
		const char *file, *format, *want[3];
	} bad[] = {
		{ "v99.safetensors", "ganflow-checkpoint-99",
		  { "v99.safetensors: checkpoint format 'ganflow-checkpoint-99' is not one this version reads (written by "
		    "another version of ganflow)", "it reads formats ganflow-checkpoint-1, ganflow-nn-1" } },
		{ "foreign.safetensors", "pt",
		  { "foreign.safetensors: checkpoint format 'pt' is not one this version reads (not a ganflow checkpoint)",
		    "ganflow-checkpoint-1, ganflow-nn-1" } },
		{ "none.safetensors", NULL,
		  { "none.safetensors: no checkpoint format in its metadata (\"format\"): not a ganflow checkpoint",
		    "reads formats ganflow-checkpoint-1, ganflow-nn-1" } },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *meta[] = { "format", bad[i].format, "g.role", "generator", "g.table", json, NULL };
		assert_int_equal(gf_st_write(at(bad[i].file), NULL, 0, bad[i].format ? meta : meta + 2), 0);
		for (int k = 0; k < 2; k++) {
			c = NULL;
			int rc = k ? gf_ckpt_open(&c, at(bad[i].file)) : gf_ckpt_check_format(at(bad[i].file));
			assert_int_equal(rc, GF_ECORRUPT);
			assert_null(c);
			for (int j = 0; bad[i].want[j]; j++)
				if (!strstr(gf_errmsg(), bad[i].want[j]))
					fail_msg("%s: \"%s\" lacks \"%s\"", bad[i].file, gf_errmsg(), bad[i].want[j]);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_round_trip),
		cmocka_unit_test(test_json_errors),
		cmocka_unit_test(test_resolve),
		cmocka_unit_test(test_parts),
		cmocka_unit_test(test_bad_table),
		cmocka_unit_test(test_formats),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
