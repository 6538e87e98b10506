/* safetensors files (<ganflow/safetensors.h>): round trips of every dtype,
 * metadata and awkward names, the byte layout, atomic replacement that
 * leaves the old file when a write fails, and rejection of corrupt and
 * truncated files with messages naming the file. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "test_nn_util.h"

static char dir[256];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/gf_test_st.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static const char *path(const char *name)
{
	static char buf[512];
	snprintf(buf, sizeof(buf), "%s/%s", dir, name);
	return buf;
}

static void write_bytes(const char *p, const void *data, size_t n)
{
	FILE *f = fopen(p, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	fclose(f);
}

static size_t read_bytes(const char *p, unsigned char *buf, size_t max)
{
	FILE *f = fopen(p, "rb");
	assert_non_null(f);
	size_t n = fread(buf, 1, max, f);
	fclose(f);
	return n;
}

/* ---- round trip ---- */

static void test_roundtrip(void **state)
{
	(void)state;
	float w[6] = { 1, -2, 3.5f, 1e-30f, -0.0f, 7 };
	int32_t l[3] = { -1, 0, 2147483647 };
	int64_t s[2] = { INT64_MIN, 42 };
	uint8_t u[5] = { 0, 1, 127, 128, 255 };
	uint16_t h[2] = { 0x3c00, 0xbc00 };
	float scalar = 3.0f;
	gf_st_entry e[] = {
		{ "layer.0.weight", gf_tensor_make(w, GF_F32, 2, (int64_t[]){ 2, 3 }) },
		{ "labels", gf_tensor_make(l, GF_I32, 1, (int64_t[]){ 3 }) },
		{ "step", gf_tensor_make(s, GF_I64, 1, (int64_t[]){ 2 }) },
		{ "bytes", gf_tensor_make(u, GF_U8, 1, (int64_t[]){ 5 }) },
		{ "half", gf_tensor_make(h, GF_F16, 1, (int64_t[]){ 2 }) },
		{ "bhalf", gf_tensor_make(h, GF_BF16, 2, (int64_t[]){ 1, 2 }) },
		{ "scalar", gf_tensor_make(&scalar, GF_F32, 0, NULL) },
		{ "empty", gf_tensor_make(NULL, GF_F32, 2, (int64_t[]){ 0, 4 }) },
		{ "we\"ird\\name\n\x01 \xc3\xa9", gf_tensor_make(w, GF_F32, 1, (int64_t[]){ 1 }) },
	};
	const char *meta[] = { "format", "test", "quote\"d", "a\\b", NULL };
	const size_t n = sizeof(e) / sizeof(e[0]);
	NN_OK(gf_st_write(path("a.safetensors"), e, n, meta));

	gf_st_file *f;
	NN_OK(gf_st_open(&f, path("a.safetensors")));
	assert_int_equal(gf_st_count(f), n);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(gf_st_name(f, i), e[i].name);   /* file order = given order */
		gf_tensor t;
		NN_OK(gf_st_get(f, e[i].name, &t));
		assert_int_equal(t.dtype, e[i].t.dtype);
		assert_true(gf_tensor_same_shape(&t, &e[i].t));
		if (gf_tensor_bytes(&t))
			assert_memory_equal(t.data, e[i].t.data, gf_tensor_bytes(&t));
	}
	assert_string_equal(gf_st_meta(f, "format"), "test");
	assert_string_equal(gf_st_meta(f, "quote\"d"), "a\\b");
	assert_null(gf_st_meta(f, "nope"));
	assert_null(gf_st_name(f, n));

	/* checked reads */
	float w2[6];
	NN_OK(gf_st_read(f, "layer.0.weight", GF_F32, 2, (int64_t[]){ 2, 3 }, w2));
	assert_memory_equal(w, w2, sizeof(w));
	assert_int_equal(gf_st_read(f, "layer.0.weight", GF_F32, 2, (int64_t[]){ 3, 2 }, w2), GF_ESHAPE);
	assert_non_null(strstr(gf_errmsg(), "layer.0.weight"));
	assert_non_null(strstr(gf_errmsg(), "(2, 3)"));
	assert_int_equal(gf_st_read(f, "layer.0.weight", GF_I32, 2, (int64_t[]){ 2, 3 }, w2), GF_ESHAPE);
	assert_int_equal(gf_st_read(f, "missing", GF_F32, 1, (int64_t[]){ 1 }, w2), GF_ENOTFOUND);
	assert_non_null(strstr(gf_errmsg(), "missing"));
	gf_st_close(f);

	/* bad entries are refused before anything is written */
	gf_st_entry dup[2] = { e[0], e[0] };
	assert_int_equal(gf_st_write(path("b.safetensors"), dup, 2, NULL), GF_EPARAM);
	gf_st_entry res = { "__metadata__", e[0].t };
	assert_int_equal(gf_st_write(path("b.safetensors"), &res, 1, NULL), GF_EPARAM);
	gf_st_entry dev = e[0];
	dev.t.device = GF_CUDA;
	assert_int_equal(gf_st_write(path("b.safetensors"), &dev, 1, NULL), GF_EPARAM);
	assert_int_equal(access(path("b.safetensors"), F_OK), -1);
}

/* The bytes of a small file, as the format defines them. */
static void test_layout(void **state)
{
	(void)state;
	float v[2] = { 1.0f, 2.0f };
	gf_st_entry e = { "x", gf_tensor_make(v, GF_F32, 1, (int64_t[]){ 2 }) };
	NN_OK(gf_st_write(path("l.safetensors"), &e, 1, NULL));
	unsigned char b[256];
	size_t n = read_bytes(path("l.safetensors"), b, sizeof(b));
	uint64_t hl = 0;
	for (int i = 0; i < 8; i++)
		hl |= (uint64_t)b[i] << (8 * i);
	assert_true(8 + hl + 8 == n);
	assert_int_equal((8 + hl) % 8, 0);   /* data 8-byte aligned */
	const char *want = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
	assert_memory_equal(b + 8, want, strlen(want));
	for (size_t i = 8 + strlen(want); i < 8 + hl; i++)
		assert_int_equal(b[i], ' ');
	assert_memory_equal(b + 8 + hl, v, 8);   /* little-endian f32 */
}

/* An image in memory: the bytes of the file, and readable as one. */
static void test_memory(void **state)
{
	(void)state;
	float v[5] = { 1, 2, 3, 4, 5 };
	int64_t s[1] = { 99 };
	gf_st_entry e[2] = {
		{ "g.net.0.weight", gf_tensor_make(v, GF_F32, 2, (int64_t[]){ 1, 5 }) },
		{ "g.step", gf_tensor_make(s, GF_I64, 1, (int64_t[]){ 1 }) },
	};
	const char *meta[] = { "g.role", "generator", "g.table", "{ {\"linear\", 5, 1} }", NULL };
	void *img;
	size_t len;
	NN_OK(gf_st_encode(e, 2, meta, &img, &len));
	NN_OK(gf_st_write(path("m.safetensors"), e, 2, meta));
	unsigned char fb[1024];
	size_t fn = read_bytes(path("m.safetensors"), fb, sizeof(fb));
	assert_int_equal(fn, len);
	assert_memory_equal(fb, img, len);
	gf_st_file *f;
	NN_OK(gf_st_open_mem(&f, img, len, "part from g"));
	memset(img, 0, len);   /* the file keeps its own copy */
	free(img);
	assert_int_equal(gf_st_count(f), 2);
	assert_int_equal(gf_st_meta_count(f), 2);
	assert_string_equal(gf_st_meta_key(f, 0), "g.role");
	assert_string_equal(gf_st_meta_key(f, 1), "g.table");
	assert_null(gf_st_meta_key(f, 2));
	assert_string_equal(gf_st_meta(f, "g.table"), "{ {\"linear\", 5, 1} }");
	float r[5];
	NN_OK(gf_st_read(f, "g.net.0.weight", GF_F32, 2, (int64_t[]){ 1, 5 }, r));
	assert_memory_equal(r, v, sizeof(v));
	gf_st_close(f);
	/* a corrupt image names what it was given as */
	unsigned char bad[12] = { 200, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ' };
	assert_int_equal(gf_st_open_mem(&f, bad, sizeof(bad), "part from d"), GF_ECORRUPT);
	assert_non_null(strstr(gf_errmsg(), "part from d"));
	gf_st_entry dup[2] = { e[0], e[0] };
	assert_int_equal(gf_st_encode(dup, 2, NULL, &img, &len), GF_EPARAM);
}

/* A failed write leaves the previous file untouched and names the path. */
static void test_atomic(void **state)
{
	(void)state;
	float v[3] = { 1, 2, 3 }, w[3] = { 4, 5, 6 };
	gf_st_entry e = { "v", gf_tensor_make(v, GF_F32, 1, (int64_t[]){ 3 }) };
	char p[512];
	snprintf(p, sizeof(p), "%s", path("c.safetensors"));
	NN_OK(gf_st_write(p, &e, 1, NULL));
	unsigned char before[512], after[512];
	size_t nb = read_bytes(p, before, sizeof(before));

	/* the temporary file cannot be created: a directory sits at its name */
	char tmp[600];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", p, (long)getpid());
	assert_int_equal(mkdir(tmp, 0700), 0);
	e.t.data = w;
	int rc = gf_st_write(p, &e, 1, NULL);
	assert_true(rc < 0);
	assert_non_null(strstr(gf_errmsg(), p));
	size_t na = read_bytes(p, after, sizeof(after));
	assert_int_equal(na, nb);
	assert_memory_equal(before, after, nb);
	rmdir(tmp);

	/* a missing directory: error naming the path */
	assert_true(gf_st_write(path("no/such/dir/x.safetensors"), &e, 1, NULL) < 0);
	assert_non_null(strstr(gf_errmsg(), "no/such/dir"));

	/* success replaces the file, and no temporary file is left behind */
	NN_OK(gf_st_write(p, &e, 1, NULL));
	gf_st_file *f;
	NN_OK(gf_st_open(&f, p));
	float r[3];
	NN_OK(gf_st_read(f, "v", GF_F32, 1, (int64_t[]){ 3 }, r));
	assert_memory_equal(r, w, sizeof(w));
	gf_st_close(f);
	assert_int_equal(access(tmp, F_OK), -1);
}

/* ---- corrupt input ---- */

static void put_header(unsigned char *b, size_t *n, const char *json, size_t data_bytes)
{
	uint64_t hl = strlen(json);
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(hl >> (8 * i));
	memcpy(b + 8, json, hl);
	memset(b + 8 + hl, 0x5a, data_bytes);
	*n = 8 + hl + data_bytes;
}

static void expect_corrupt(const char *name, const void *bytes, size_t n, const char *what)
{
	const char *p = path(name);
	write_bytes(p, bytes, n);
	gf_st_file *f = NULL;
	int rc = gf_st_open(&f, p);
	if (rc != GF_ECORRUPT) {
		fprintf(stderr, "%s: expected GF_ECORRUPT, got %s (%s)\n", name, gf_strerror(rc), gf_errmsg());
		gf_st_close(f);
		fail();
	}
	assert_null(f);
	assert_non_null(strstr(gf_errmsg(), p));
	if (what && !strstr(gf_errmsg(), what)) {
		fprintf(stderr, "%s: message '%s' does not mention '%s'\n", name, gf_errmsg(), what);
		fail();
	}
}

static void test_corrupt(void **state)
{
	(void)state;
	unsigned char b[1024];
	size_t n;

	expect_corrupt("short", "\x05\x00\x00", 3, "truncated");
	put_header(b, &n, "{}", 0);
	b[0] = 0xff;
	b[5] = 0x01;   /* header length far beyond the file */
	expect_corrupt("hlen", b, n, "header length");
	/* truncated: the data section is shorter than the offsets say */
	put_header(b, &n, "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8);
	expect_corrupt("trunc", b, n, "truncated");
	/* a whole valid file cut short inside its header */
	float v[4] = { 1, 2, 3, 4 };
	gf_st_entry e = { "v", gf_tensor_make(v, GF_F32, 1, (int64_t[]){ 4 }) };
	NN_OK(gf_st_write(path("good.safetensors"), &e, 1, NULL));
	unsigned char g[512];
	size_t gn = read_bytes(path("good.safetensors"), g, sizeof(g));
	expect_corrupt("cut_header", g, 20, NULL);
	expect_corrupt("cut_data", g, gn - 3, NULL);

	put_header(b, &n, "{\"x\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", 16);
	expect_corrupt("size", b, n, "bytes");
	put_header(b, &n, "{\"x\":{\"dtype\":\"Q9\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16);
	expect_corrupt("dtype", b, n, "dtype");
	put_header(b, &n, "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
	                  "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 16);
	expect_corrupt("overlap", b, n, "overlap");
	put_header(b, &n, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	                  "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
	expect_corrupt("dup", b, n, "twice");
	put_header(b, &n, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4);
	expect_corrupt("unclosed", b, n, NULL);
	put_header(b, &n, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} junk", 4);
	expect_corrupt("trailing", b, n, "trailing");
	put_header(b, &n, "{\"x\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4);
	expect_corrupt("negative", b, n, NULL);
	put_header(b, &n, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4);
	expect_corrupt("float", b, n, NULL);
	put_header(b, &n, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8);
	expect_corrupt("reversed", b, n, NULL);
	put_header(b, &n, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4);
	expect_corrupt("nooffsets", b, n, NULL);
	put_header(b, &n, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}", 4);
	expect_corrupt("extra", b, n, "extra");
	put_header(b, &n, "{\"__metadata__\":{\"a\":1}}", 0);
	expect_corrupt("meta", b, n, "__metadata__");
	put_header(b, &n, "{\"x\\q\":{}}", 0);
	expect_corrupt("escape", b, n, NULL);
	put_header(b, &n, "{\"x\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}", 4);
	expect_corrupt("overflow", b, n, NULL);
	put_header(b, &n, "[1,2]", 0);
	expect_corrupt("array", b, n, NULL);

	/* a valid dtype ganflow has no type for: the file opens, the tensor is refused */
	put_header(b, &n, "{\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8);
	write_bytes(path("f64"), b, n);
	gf_st_file *f;
	NN_OK(gf_st_open(&f, path("f64")));
	gf_tensor t;
	assert_int_equal(gf_st_get(f, "d", &t), GF_EUNSUPPORTED);
	gf_st_close(f);

	/* a missing file is -ENOENT naming it */
	assert_int_equal(gf_st_open(&f, path("absent")), -ENOENT);
	assert_non_null(strstr(gf_errmsg(), "absent"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_memory),
		cmocka_unit_test(test_atomic),
		cmocka_unit_test(test_corrupt),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
