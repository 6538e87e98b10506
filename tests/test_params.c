/* Tests of parameter checking (<ganflow/params.h>) and descriptor checks
 * (<ganflow/loader.h>): defaults parsed per type, unknown keys with the
 * closest suggestion, wrong types, required parameters, conversions,
 * malformed descriptors, and the ranges and choices the shipped stages
 * declare (lmdb_reader, jpeg_decode, ...). Messages are checked, not just
 * return codes. Also gf_value_format (<ganflow/value.h>), which shows
 * values in those messages: a text that does not fit is reported and
 * marked. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <ganflow/loader.h>
#include <ganflow/params.h>

static const gf_param_desc params[] = {
	{ "size", GF_PARAM_INT, "64", "batch size", "1..1048576" },
	{ "lr", GF_PARAM_NUM, "2e-4", "learning rate", "0.." },
	{ "shuffle", GF_PARAM_BOOL, "true", "shuffle records", NULL },
	{ "loss", GF_PARAM_STR, "bce", "loss name", "bce|hinge|ls" },
	{ "path", GF_PARAM_STR, NULL, "dataset path", NULL },
	{ "betas", GF_PARAM_LIST, "nil", "optimiser betas", NULL },
	{ "net", GF_PARAM_TABLE, "nil", "layer table", NULL },
	{ "extra", GF_PARAM_ANY, "nil", "anything", NULL },
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
	gf_param_desc p = { "x", GF_PARAM_INT, "0x10", "", NULL };
	assert_int_equal(gf_param_default(&p, &v, err, sizeof(err)), 0);
	assert_int_equal(v.u.i, 16);
	p = (gf_param_desc){ "x", GF_PARAM_INT, "12abc", "", NULL };
	assert_int_equal(gf_param_default(&p, &v, err, sizeof(err)), GF_EPARAM);
	assert_non_null(strstr(err, "default \"12abc\" is not a valid integer"));
	p = (gf_param_desc){ "x", GF_PARAM_BOOL, "yes", "", NULL };
	assert_int_equal(gf_param_default(&p, &v, err, sizeof(err)), GF_EPARAM);
	p = (gf_param_desc){ "x", GF_PARAM_TABLE, "{}", "", NULL };
	assert_int_equal(gf_param_default(&p, &v, err, sizeof(err)), GF_EPARAM);
	assert_non_null(strstr(err, "only NULL or \"nil\""));
	p = (gf_param_desc){ "x", GF_PARAM_NUM, NULL, "", NULL };
	assert_int_equal(gf_param_default(&p, &v, err, sizeof(err)), GF_ENOTFOUND);
	p = (gf_param_desc){ "x", GF_PARAM_STR, "nil", "", NULL };
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
	char want[128];
	snprintf(want, sizeof(want), "stage ABI version %u, but this runtime speaks version %u", GF_STAGE_ABI + 1,
	         GF_STAGE_ABI);
	expect_bad(&d, want);
	d.abi = 1; /* a stage built before parameters carried their ranges */
	snprintf(want, sizeof(want), "stage ABI version 1, but this runtime speaks version %u (rebuild the stage",
	         GF_STAGE_ABI);
	expect_bad(&d, want);
	d.abi = GF_STAGE_ABI;
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
	static const gf_param_desc reserved[] = { { "workers", GF_PARAM_INT, "1", "", NULL } };
	d = desc;
	d.params = reserved;
	d.nparams = 1;
	expect_bad(&d, "parameter 'workers' is reserved");
	static const gf_param_desc baddef[] = { { "n", GF_PARAM_INT, "many", "", NULL } };
	d.params = baddef;
	expect_bad(&d, "default \"many\" is not a valid integer");
	static const gf_param_desc badrange[] = { { "n", GF_PARAM_INT, "1", "", "1-10" } };
	d.params = badrange;
	expect_bad(&d, "parameter 'n': allowed \"1-10\" is not a range lo..hi of integers");
	static const gf_param_desc emptyrange[] = { { "n", GF_PARAM_NUM, "1", "", ".." } };
	d.params = emptyrange;
	expect_bad(&d, "is not a range lo..hi of numbers");
	static const gf_param_desc reversed[] = { { "n", GF_PARAM_INT, "1", "", "10..1" } };
	d.params = reversed;
	expect_bad(&d, "is not a range");
	static const gf_param_desc outside[] = { { "n", GF_PARAM_INT, "0", "", "1.." } };
	d.params = outside;
	expect_bad(&d, "parameter 'n': default 0 lies outside its range 1..");
	static const gf_param_desc nochoice[] = { { "m", GF_PARAM_STR, "fast", "", "sync|async" } };
	d.params = nochoice;
	expect_bad(&d, "parameter 'm': default \"fast\" is not one of sync|async");
	static const gf_param_desc emptychoice[] = { { "m", GF_PARAM_STR, "sync", "", "sync||async" } };
	d.params = emptychoice;
	expect_bad(&d, "has an empty choice");
	static const gf_param_desc boolrange[] = { { "b", GF_PARAM_BOOL, "true", "", "0..1" } };
	d.params = boolrange;
	expect_bad(&d, "a boolean parameter cannot declare allowed values");
	static const gf_param_desc fine[] = { { "n", GF_PARAM_INT, "nil", "", "-3..0x10" },
		                              { "x", GF_PARAM_NUM, "0.5", "", "..1" },
		                              { "m", GF_PARAM_STR, NULL, "", "sync|async" } };
	d.params = fine;
	d.nparams = 3;
	assert_int_equal(gf_stage_check_desc(&d, "x.so", err, sizeof(err)), 0);
}

static void expect_param_error(const char *key, gf_value v, const char *want)
{
	char err[1024];
	gf_value given = gf_value_map(), out;
	assert_int_equal(gf_value_set(&given, "path", gf_value_str("/d")), 0);
	assert_int_equal(gf_value_set(&given, key, v), 0);
	assert_int_equal(check(&given, &out, err), GF_EPARAM);
	if (!strstr(err, want))
		fail_msg("got \"%s\", want \"%s\"", err, want);
	assert_int_equal(out.type, GF_VNIL);
	gf_value_free(&given);
}

static void test_ranges_and_choices(void **state)
{
	(void)state;
	expect_param_error("size", gf_value_int(0), "stage 'b' (batch): parameter 'size' is 0, outside its range 1..1048576");
	expect_param_error("size", gf_value_int(1048577), "parameter 'size' is 1048577, outside its range 1..1048576");
	expect_param_error("size", gf_value_num(-2.0), "parameter 'size' is -2, outside its range");
	expect_param_error("lr", gf_value_num(-1e-3), "parameter 'lr' is -0.001, outside its range 0..");
	expect_param_error("loss", gf_value_str("hinj"),
	                   "parameter 'loss' is \"hinj\", not one of bce|hinge|ls; did you mean 'hinge'?");
	expect_param_error("loss", gf_value_str("wasserstein"), "not one of bce|hinge|ls");
	/* a far-off value gets no suggestion */
	char err[1024];
	gf_value given = gf_value_map(), out;
	assert_int_equal(gf_value_set(&given, "path", gf_value_str("/d")), 0);
	assert_int_equal(gf_value_set(&given, "loss", gf_value_str("wasserstein")), 0);
	assert_int_equal(check(&given, &out, err), GF_EPARAM);
	assert_null(strstr(err, "did you mean"));
	gf_value_free(&given);

	/* the bounds themselves are allowed, and the checked values read back
	 * through gf_param_* without restating defaults */
	given = gf_value_map();
	assert_int_equal(gf_value_set(&given, "path", gf_value_str("/d")), 0);
	assert_int_equal(gf_value_set(&given, "size", gf_value_int(1048576)), 0);
	assert_int_equal(gf_value_set(&given, "lr", gf_value_int(0)), 0);
	assert_int_equal(gf_value_set(&given, "loss", gf_value_str("ls")), 0);
	assert_int_equal(check(&given, &out, err), 0);
	assert_int_equal(gf_param_int(&out, "size"), 1048576);
	assert_true(gf_param_num(&out, "lr") == 0.0);
	assert_string_equal(gf_param_str(&out, "loss"), "ls");
	assert_int_equal(gf_param_bool(&out, "shuffle"), 1);
	assert_string_equal(gf_param_str(&out, "path"), "/d");
	assert_int_equal(gf_param_given(&out, "net"), 0);
	assert_null(gf_param(&out, "net"));
	assert_null(gf_param_str(&out, "no_such_key")); /* a stage bug: logged, reads as NULL */
	assert_int_equal(gf_param_int(&out, "no_such_key"), 0);
	gf_value_free(&out);
	gf_value_free(&given);
}

/* ---- the stages' own declarations ----
 *
 * The shipped stages declare their ranges and choices, so the runtime
 * refuses what they used to check by hand, with its own message, before
 * create() runs: the real .so files, loaded from the build. */

/* Checks `given` (key/value pairs, NULL-terminated; required parameters
 * left out get a placeholder: 1, "/d" or an empty table) against stage's
 * descriptor as instance `inst`: returns the gf_params_check code, the
 * message in err and the checked map in *out. */
static int check_stage(const char *stage, const char *inst, gf_value *out, char *err, size_t errsize, ...)
{
	const gf_stage_desc *d;
	char lerr[1024];
	if (gf_stage_load(stage, &d, NULL, lerr, sizeof(lerr)))
		fail_msg("cannot load %s: %s", stage, lerr);
	gf_value given = gf_value_map();
	va_list ap;
	va_start(ap, errsize);
	for (const char *k; (k = va_arg(ap, const char *));)
		assert_int_equal(gf_value_set(&given, k, va_arg(ap, gf_value)), 0);
	va_end(ap);
	for (uint32_t i = 0; i < d->nparams; i++) {
		const gf_param_desc *p = &d->params[i];
		if (p->def || gf_value_get(&given, p->name))
			continue;
		gf_value v = p->type == GF_PARAM_INT   ? gf_value_int(1)
		             : p->type == GF_PARAM_NUM ? gf_value_num(1)
		             : p->type == GF_PARAM_STR ? gf_value_str("/d")
		                                       : gf_value_map();
		assert_int_equal(gf_value_set(&given, p->name, v), 0);
	}
	int rc = gf_params_check(d, inst, &given, out, err, errsize);
	gf_value_free(&given);
	return rc;
}

static void expect_stage_error(const char *stage, const char *inst, const char *key, gf_value v, const char *want)
{
	char err[1024];
	gf_value out;
	assert_int_equal(check_stage(stage, inst, &out, err, sizeof(err), key, v, (const char *)NULL), GF_EPARAM);
	assert_int_equal(out.type, GF_VNIL);
	if (strcmp(err, want))
		fail_msg("got \"%s\", want \"%s\"", err, want);
}

static void test_stage_declarations(void **state)
{
	(void)state;
	/* lmdb_reader: its own get_int(..., lo, hi) and the 0..1 fraction check are gone */
	expect_stage_error("lmdb_reader", "reader", "readahead", gf_value_int(0),
	                   "stage 'reader' (lmdb_reader): parameter 'readahead' is 0, outside its range 1..65536");
	expect_stage_error("lmdb_reader", "reader", "readahead", gf_value_int(65537),
	                   "stage 'reader' (lmdb_reader): parameter 'readahead' is 65537, outside its range 1..65536");
	expect_stage_error("lmdb_reader", "reader", "max_bad_fraction", gf_value_num(1.5),
	                   "stage 'reader' (lmdb_reader): parameter 'max_bad_fraction' is 1.5, outside its range 0..1");
	expect_stage_error("lmdb_reader", "reader", "parts", gf_value_int(0),
	                   "stage 'reader' (lmdb_reader): parameter 'parts' is 0, outside its range 1..1048576");
	expect_stage_error("lmdb_reader", "reader", "part", gf_value_int(-1),
	                   "stage 'reader' (lmdb_reader): parameter 'part' is -1, outside its range 0..");
	/* jpeg_decode: the choices of resize and crop, the range of channels */
	expect_stage_error("jpeg_decode", "decode", "crop", gf_value_str("centr"),
	                   "stage 'decode' (jpeg_decode): parameter 'crop' is \"centr\", not one of "
	                   "center|random|none|centre; did you mean 'center'?");
	expect_stage_error("jpeg_decode", "decode", "resize", gf_value_str("bicubic"),
	                   "stage 'decode' (jpeg_decode): parameter 'resize' is \"bicubic\", not one of area|bilinear");
	expect_stage_error("jpeg_decode", "decode", "channels", gf_value_int(4),
	                   "stage 'decode' (jpeg_decode): parameter 'channels' is 4, outside its range 0..3");
	expect_stage_error("jpeg_decode", "decode", "size", gf_value_int(65536),
	                   "stage 'decode' (jpeg_decode): parameter 'size' is 65536, outside its range 0..65535");
	/* a few more stages that used to check by hand */
	expect_stage_error("checkpoint", "ckpt", "keep", gf_value_int(0),
	                   "stage 'ckpt' (checkpoint): parameter 'keep' is 0, outside its range 1..1024");
	expect_stage_error("exchange", "xd", "mode", gf_value_str("allreduse"),
	                   "stage 'xd' (exchange): parameter 'mode' is \"allreduse\", not one of "
	                   "allreduce|zero1|gossip|none; did you mean 'allreduce'?");
	expect_stage_error("exchange", "xd", "rounds", gf_value_int(65),
	                   "stage 'xd' (exchange): parameter 'rounds' is 65, outside its range 1..64");
	expect_stage_error("metrics", "metrics", "every", gf_value_int(0),
	                   "stage 'metrics' (metrics): parameter 'every' is 0, outside its range 1..");
	expect_stage_error("transport_send", "_tx1", "tag", gf_value_int(8001),
	                   "stage '_tx1' (transport_send): parameter 'tag' is 8001, outside its range 1..8000");
	expect_stage_error("transport_recv", "_rx1", "latency", gf_value_str("fast"),
	                   "stage '_rx1' (transport_recv): parameter 'latency' is \"fast\", not one of low|relaxed");

	/* the bounds themselves pass, and what was not given reads as the
	 * declared default (or absent, for run-dependent defaults) */
	char err[1024];
	gf_value out;
	assert_int_equal(check_stage("lmdb_reader", "reader", &out, err, sizeof(err), "readahead", gf_value_int(65536),
	                             "max_bad_fraction", gf_value_int(1), (const char *)NULL),
	                 0);
	assert_int_equal(gf_param_int(&out, "readahead"), 65536);
	assert_true(gf_param_num(&out, "max_bad_fraction") == 1.0);
	assert_int_equal(gf_param_int(&out, "window"), 65536);
	assert_int_equal(gf_param_int(&out, "min_records"), 100);
	assert_int_equal(gf_param_given(&out, "seed"), 0);
	assert_int_equal(gf_param_given(&out, "parts"), 0);
	gf_value_free(&out);
	assert_int_equal(check_stage("jpeg_decode", "decode", &out, err, sizeof(err), "crop", gf_value_str("none"),
	                             "channels", gf_value_int(3), (const char *)NULL),
	                 0);
	assert_string_equal(gf_param_str(&out, "crop"), "none");
	assert_string_equal(gf_param_str(&out, "resize"), "area");
	assert_int_equal(gf_param_int(&out, "channels"), 3);
	assert_int_equal(gf_param_given(&out, "size"), 0);
	gf_value_free(&out);
}

static void test_value_format(void **state)
{
	(void)state;
	char buf[64];
	gf_value t = gf_value_map();
	gf_value_set(&t, "lr", gf_value_num(0.5));
	gf_value_set(&t, "name", gf_value_str("d"));
	assert_int_equal(gf_value_format(&t, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "{lr = 0.5, name = \"d\"}");
	/* exactly fits: 22 characters and the NUL */
	char exact[23];
	assert_int_equal(gf_value_format(&t, exact, sizeof(exact)), 0);
	assert_string_equal(exact, "{lr = 0.5, name = \"d\"}");
	/* one byte short: reported, and the cut is visible */
	char small[22];
	assert_int_equal(gf_value_format(&t, small, sizeof(small)), -ENOSPC);
	assert_string_equal(small, "{lr = 0.5, name = ...");
	char tiny[3];
	assert_int_equal(gf_value_format(&t, tiny, sizeof(tiny)), -ENOSPC);
	assert_string_equal(tiny, "{l");
	assert_int_equal(gf_value_format(&t, NULL, 0), -ENOSPC);
	gf_value_free(&t);

	/* a long table given for a number: the message shows its start */
	gf_value list = gf_value_list();
	for (int i = 0; i < 100; i++)
		gf_value_append(&list, gf_value_int(1000 + i));
	gf_value out, given = map_of("path", gf_value_str("p"), "size", list);
	char err[1024];
	assert_int_equal(check(&given, &out, err), GF_EPARAM);
	assert_non_null(strstr(err, "parameter 'size' must be an integer, got list {1000, 1001, "));
	assert_non_null(strstr(err, "..."));
	gf_value_free(&given);
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
		cmocka_unit_test(test_ranges_and_choices),
		cmocka_unit_test(test_stage_declarations),
		cmocka_unit_test(test_value_format),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
