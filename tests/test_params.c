/* Tests of parameter checking (<ganflow/params.h>) and descriptor checks
 * (<ganflow/loader.h>): defaults parsed per type, unknown keys with the
 * closest suggestion, wrong types, required parameters, conversions, and
 * malformed descriptors. Messages are checked, not just return codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <ganflow/loader.h>
#include <ganflow/params.h>

static const gf_param_desc params[] = {
	{ "size", GF_PARAM_INT, "64", "batch size" },
	{ "lr", GF_PARAM_NUM, "2e-4", "learning rate" },
	{ "shuffle", GF_PARAM_BOOL, "true", "shuffle records" },
	{ "loss", GF_PARAM_STR, "bce", "loss name" },
	{ "path", GF_PARAM_STR, NULL, "dataset path" },
	{ "betas", GF_PARAM_LIST, "nil", "optimiser betas" },
	{ "net", GF_PARAM_TABLE, "nil", "layer table" },
	{ "extra", GF_PARAM_ANY, "nil", "anything" },
};

static int create(gf_ctx *c, const gf_value *p, void **s)
{
	(void)c;
	(void)p;
	*s = NULL;
	return 0;
}

static int run(void *s, gf_ctx *c)
{
	(void)s;
	(void)c;
	return 0;
}

static const gf_stage_desc desc = {
	.abi = GF_STAGE_ABI, .size = sizeof(gf_stage_desc), .name = "batch", .doc = "test",
	.params = params, .nparams = 8, .create = create, .run = run,
};

static gf_value map_of(const char *k1, gf_value v1, const char *k2, gf_value v2)
{
	gf_value m = gf_value_map();
	if (k1)
		gf_value_set(&m, k1, v1);
	if (k2)
		gf_value_set(&m, k2, v2);
	return m;
}

static int check(const gf_value *given, gf_value *out, char *err)
{
	return gf_params_check(&desc, "b", given, out, err, 1024);
}

static void test_defaults_filled(void **state)
{
	(void)state;
	char err[1024];
	gf_value out, given = map_of("path", gf_value_str("/data"), NULL, gf_value_nil());
	assert_int_equal(check(&given, &out, err), 0);
	assert_int_equal(out.type, GF_VMAP);
	assert_int_equal(gf_value_len(&out), 8);
	/* declaration order, every declared parameter present */
	for (size_t i = 0; i < 8; i++)
		assert_string_equal(out.u.c.keys[i], params[i].name);
	assert_int_equal(gf_value_get(&out, "size")->type, GF_VINT);
	assert_int_equal(gf_value_get(&out, "size")->u.i, 64);
	assert_int_equal(gf_value_get(&out, "lr")->type, GF_VNUM);
	assert_true(gf_value_get(&out, "lr")->u.n == 2e-4);
	assert_int_equal(gf_value_get(&out, "shuffle")->u.b, 1);
	assert_string_equal(gf_value_get(&out, "loss")->u.s, "bce");
	assert_string_equal(gf_value_get(&out, "path")->u.s, "/data");
	assert_int_equal(gf_value_get(&out, "betas")->type, GF_VNIL);
	assert_int_equal(gf_value_get(&out, "net")->type, GF_VNIL);
	gf_value_free(&out);
	gf_value_free(&given);
}

static void test_conversions(void **state)
{
	(void)state;
	char err[1024];
	gf_value out;
	/* integral number for an integer, integer for a number */
	gf_value given = map_of("path", gf_value_str("p"), "size", gf_value_num(128.0));
	gf_value_set(&given, "lr", gf_value_int(1));
	gf_value betas = gf_value_list();
	gf_value_append(&betas, gf_value_num(0.5));
	gf_value_append(&betas, gf_value_num(0.999));
	gf_value_set(&given, "betas", betas);
	gf_value_set(&given, "net", gf_value_list());
	gf_value_set(&given, "extra", gf_value_bool(0));
	assert_int_equal(check(&given, &out, err), 0);
	assert_int_equal(gf_value_get(&out, "size")->type, GF_VINT);
	assert_int_equal(gf_value_get(&out, "size")->u.i, 128);
	assert_int_equal(gf_value_get(&out, "lr")->type, GF_VNUM);
	assert_true(gf_value_get(&out, "lr")->u.n == 1.0);
	assert_int_equal(gf_value_len(gf_value_get(&out, "betas")), 2);
	assert_int_equal(gf_value_get(&out, "extra")->type, GF_VBOOL);
	gf_value_free(&out);
	gf_value_free(&given);
}

static void test_unknown_key_suggests(void **state)
{
	(void)state;
	char err[1024];
	gf_value out, given = map_of("path", gf_value_str("p"), "szie", gf_value_int(3));
	assert_int_equal(check(&given, &out, err), GF_EPARAM);
	assert_int_equal(out.type, GF_VNIL);
	assert_non_null(strstr(err, "stage 'b' (batch)"));
	assert_non_null(strstr(err, "unknown parameter 'szie'"));
	assert_non_null(strstr(err, "did you mean 'size'?"));
	assert_non_null(strstr(err, "parameters: size, lr, shuffle"));
	gf_value_free(&given);
	given = map_of("shufle", gf_value_bool(1), NULL, gf_value_nil());
	assert_int_equal(check(&given, &out, err), GF_EPARAM);
	assert_non_null(strstr(err, "did you mean 'shuffle'?"));
	gf_value_free(&given);
}

static void test_wrong_types(void **state)
{
	(void)state;
	char err[1024];
	gf_value out;
	struct {
		const char *key;
		gf_value v;
		const char *want;
	} cases[] = {
		{ "size", gf_value_str("ten"), "parameter 'size' must be an integer, got string \"ten\"" },
		{ "size", gf_value_num(2.5), "parameter 'size' must be an integer, got number 2.5" },
		{ "lr", gf_value_bool(1), "parameter 'lr' must be a number, got boolean true" },
		{ "shuffle", gf_value_int(1), "parameter 'shuffle' must be a boolean, got integer 1" },
		{ "loss", gf_value_int(3), "parameter 'loss' must be a string, got integer 3" },
		{ "betas", gf_value_map(), "parameter 'betas' must be a list, got table" },
		{ "net", gf_value_str("x"), "parameter 'net' must be a table, got string" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gf_value given = map_of("path", gf_value_str("p"), cases[i].key, cases[i].v);
		if (cases[i].v.type == GF_VMAP)
			gf_value_set((gf_value *)gf_value_get(&given, cases[i].key), "a", gf_value_int(1));
		assert_int_equal(check(&given, &out, err), GF_EPARAM);
		if (!strstr(err, cases[i].want))
			fail_msg("case %zu: got \"%s\", want \"%s\"", i, err, cases[i].want);
		assert_non_null(strstr(err, "stage 'b' (batch)"));
		gf_value_free(&given);
	}
}

static void test_required_and_shape(void **state)
{
	(void)state;
	char err[1024];
	gf_value out;
	assert_int_equal(check(NULL, &out, err), GF_EPARAM);
	assert_non_null(strstr(err, "missing required parameter 'path' (dataset path)"));
	/* a nil value counts as absent */
	gf_value given = map_of("path", gf_value_nil(), NULL, gf_value_nil());
	assert_int_equal(check(&given, &out, err), GF_EPARAM);
	assert_non_null(strstr(err, "missing required parameter 'path'"));
	gf_value_free(&given);
	/* positional values are not parameters */
	given = gf_value_list();
	gf_value_append(&given, gf_value_int(1));
	assert_int_equal(check(&given, &out, err), GF_EPARAM);
	assert_non_null(strstr(err, "must be a table of name = value"));
	gf_value_free(&given);
	/* an empty Lua table ({}) arrives as an empty list: fine */
	given = gf_value_list();
	gf_value one = map_of("path", gf_value_str("x"), NULL, gf_value_nil());
	assert_int_equal(check(&one, &out, err), 0);
	gf_value_free(&out);
	gf_value_free(&one);
	gf_value_free(&given);
}

static void test_defaults_parse(void **state)
{
	(void)state;
	char err[256];
	gf_value v;
	gf_param_desc p = { "x", GF_PARAM_INT, "0x10", "" };
	assert_int_equal(gf_param_default(&p, &v, err, sizeof(err)), 0);
	assert_int_equal(v.u.i, 16);
	p = (gf_param_desc){ "x", GF_PARAM_INT, "12abc", "" };
	assert_int_equal(gf_param_default(&p, &v, err, sizeof(err)), GF_EPARAM);
	assert_non_null(strstr(err, "default \"12abc\" is not a valid integer"));
	p = (gf_param_desc){ "x", GF_PARAM_BOOL, "yes", "" };
	assert_int_equal(gf_param_default(&p, &v, err, sizeof(err)), GF_EPARAM);
	p = (gf_param_desc){ "x", GF_PARAM_TABLE, "{}", "" };
	assert_int_equal(gf_param_default(&p, &v, err, sizeof(err)), GF_EPARAM);
	assert_non_null(strstr(err, "only NULL or \"nil\""));
	p = (gf_param_desc){ "x", GF_PARAM_NUM, NULL, "" };
	assert_int_equal(gf_param_default(&p, &v, err, sizeof(err)), GF_ENOTFOUND);
	p = (gf_param_desc){ "x", GF_PARAM_STR, "nil", "" };
	assert_int_equal(gf_param_default(&p, &v, err, sizeof(err)), 0);
	assert_int_equal(v.type, GF_VNIL);
}

static void test_edit_distance(void **state)
{
	(void)state;
	assert_int_equal(gf_edit_distance("", ""), 0);
	assert_int_equal(gf_edit_distance("size", "size"), 0);
	assert_int_equal(gf_edit_distance("szie", "size"), 1); /* transposition */
	assert_int_equal(gf_edit_distance("kitten", "sitting"), 3);
	assert_int_equal(gf_edit_distance("", "abc"), 3);
	const char *c[] = { "steps", "seed", "dir" };
	assert_string_equal(gf_closest("stpes", c, 3), "steps");
	assert_string_equal(gf_closest("sed", c, 3), "seed");
	assert_null(gf_closest("x", c, 0));
}

static void expect_bad(const gf_stage_desc *d, const char *want)
{
	char err[512];
	assert_int_equal(gf_stage_check_desc(d, "x.so", err, sizeof(err)), GF_EABI);
	if (!strstr(err, want))
		fail_msg("got \"%s\", want \"%s\"", err, want);
	assert_non_null(strstr(err, "x.so"));
}

static void test_descriptor_checks(void **state)
{
	(void)state;
	char err[512];
	gf_stage_desc d = desc;
	assert_int_equal(gf_stage_check_desc(&d, "x.so", err, sizeof(err)), 0);
	d.abi = GF_STAGE_ABI + 1;
	expect_bad(&d, "stage ABI version 2, but this runtime speaks version 1");
	d = desc;
	d.size = 8;
	expect_bad(&d, "descriptor is 8 bytes");
	d = desc;
	d.run = NULL;
	expect_bad(&d, "lacks a name, create() or run()");
	static const gf_port_desc nokind[] = { { "inp", NULL, 0, "" } };
	d = desc;
	d.inputs = nokind;
	d.ninputs = 1;
	expect_bad(&d, "input port 0 has no name or no kind");
	static const gf_port_desc twice[] = { { "out", "items", 0, "" }, { "out", "batch", 0, "" } };
	d = desc;
	d.outputs = twice;
	d.noutputs = 2;
	expect_bad(&d, "two output ports named 'out'");
	d = desc;
	d.flags = GF_STAGE_WORKERS;
	expect_bad(&d, "GF_STAGE_WORKERS but has 0 inputs and 0 outputs");
	static const gf_param_desc reserved[] = { { "workers", GF_PARAM_INT, "1", "" } };
	d = desc;
	d.params = reserved;
	d.nparams = 1;
	expect_bad(&d, "parameter 'workers' is reserved");
	static const gf_param_desc baddef[] = { { "n", GF_PARAM_INT, "many", "" } };
	d.params = baddef;
	expect_bad(&d, "default \"many\" is not a valid integer");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults_filled),
		cmocka_unit_test(test_conversions),
		cmocka_unit_test(test_unknown_key_suggests),
		cmocka_unit_test(test_wrong_types),
		cmocka_unit_test(test_required_and_shape),
		cmocka_unit_test(test_defaults_parse),
		cmocka_unit_test(test_edit_distance),
		cmocka_unit_test(test_descriptor_checks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
