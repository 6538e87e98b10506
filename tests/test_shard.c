/* Shard format: record headers, meta records, writing and opening
 * datasets, bad input (each case named in the error), and epoch orders
 * (exactly-once visits, reproducible shuffles, rank parts, class filter).
 */
#include <fcntl.h>
#include <lmdb.h>

#include <ganflow/crc32c.h>

#include "test_shard_util.h"

#include "../core/data/dataset_int.h"

/* ---- record headers ---- */

static void test_header_roundtrip(void **st)
{
	(void)st;
	gf_record_header h = { .label = 7, .encoding = GF_ENC_RAW, .height = 3, .width = 5, .channels = 3,
		                   .payload = 45 };
	uint8_t v[GF_RECORD_HEADER_SIZE + 45];
	memset(v, 0xab, sizeof(v));
	assert_int_equal(gf_record_header_write(&h, v), 0);
	/* the documented byte layout */
	assert_int_equal(v[0], 'G');
	assert_int_equal(v[1], 'F');
	assert_int_equal(v[2], 1);
	assert_int_equal(v[3], 0);
	assert_int_equal(v[4], 7);
	assert_int_equal(v[8], 3);
	assert_int_equal(v[12], 5);
	assert_int_equal(v[16], 3);
	assert_int_equal(v[20], 45);
	gf_record_header r;
	const uint8_t *pl;
	assert_int_equal(gf_record_parse(v, sizeof(v), &r, &pl), 0);
	assert_memory_equal(&r, &h, sizeof(h));
	assert_ptr_equal(pl, v + GF_RECORD_HEADER_SIZE);
	h.label = -1;
	assert_int_equal(gf_record_header_write(&h, v), 0);
	assert_int_equal(gf_record_parse(v, sizeof(v), &r, NULL), 0);
	assert_int_equal(r.label, -1);
}

static void expect_corrupt(const uint8_t *v, size_t len, const char *needle)
{
	gf_record_header r;
	assert_int_equal(gf_record_parse(v, len, &r, NULL), GF_ECORRUPT);
	if (!strstr(gf_errmsg(), needle))
		fail_msg("'%s' not in '%s'", needle, gf_errmsg());
}

static void test_header_bad(void **st)
{
	(void)st;
	gf_record_header h = { .label = 1, .encoding = GF_ENC_RAW, .height = 2, .width = 2, .channels = 1,
		                   .payload = 4 };
	uint8_t v[GF_RECORD_HEADER_SIZE + 8], b[sizeof(v)];
	assert_int_equal(gf_record_header_write(&h, v), 0);
	expect_corrupt(v, 10, "truncated");
	expect_corrupt(v, GF_RECORD_HEADER_SIZE + 3, "truncated");
	expect_corrupt(v, GF_RECORD_HEADER_SIZE + 5, "payload length");
	memcpy(b, v, sizeof(v));
	b[0] = 'X';
	expect_corrupt(b, GF_RECORD_HEADER_SIZE + 4, "magic");
	memcpy(b, v, sizeof(v));
	b[2] = 9;
	expect_corrupt(b, GF_RECORD_HEADER_SIZE + 4, "version");
	memcpy(b, v, sizeof(v));
	b[18] = 4; /* bit 0 is GF_RECORD_CRC32C, bit 1 GF_RECORD_PAIR: bit 2 is unknown */
	expect_corrupt(b, GF_RECORD_HEADER_SIZE + 4, "flags");
	memcpy(b, v, sizeof(v));
	b[3] = 7;
	expect_corrupt(b, GF_RECORD_HEADER_SIZE + 4, "encoding");
	memcpy(b, v, sizeof(v));
	b[16] = 2;
	expect_corrupt(b, GF_RECORD_HEADER_SIZE + 4, "channels");
	memcpy(b, v, sizeof(v));
	b[8] = 0;
	expect_corrupt(b, GF_RECORD_HEADER_SIZE + 4, "zero");
	memcpy(b, v, sizeof(v));
	b[8] = 3; /* 3x2x1 != 4 */
	expect_corrupt(b, GF_RECORD_HEADER_SIZE + 4, "raw payload");
	/* writing checks too */
	gf_record_header bad = h;
	bad.channels = 2;
	assert_int_equal(gf_record_header_write(&bad, v), GF_EPARAM);
	bad = h;
	bad.payload = 5;
	assert_int_equal(gf_record_header_write(&bad, v), GF_EPARAM);
	bad = h;
	bad.width = 70000;
	bad.payload = 140000;
	assert_int_equal(gf_record_header_write(&bad, v), GF_EPARAM);
}

/* ---- meta records ---- */

static void test_meta_roundtrip(void **st)
{
	(void)st;
	char *names[3] = { "a", "bee", "T-shirt/top" };
	uint32_t i0[2] = { 0, 4 }, i1[1] = { 2 }, i2[2] = { 1, 3 };
	uint32_t *idx[3] = { i0, i1, i2 };
	uint64_t cn[3] = { 2, 1, 2 };
	gf_shard_meta m = { .total = 20, .nshards = 4, .number = 2, .first = 10, .count = 6, .nclasses = 3,
		                .enc_count = { 4, 2 }, .payload_bytes = 1234, .min_h = 1, .max_h = 9, .min_w = 2,
		                .max_w = 8, .min_c = 1, .max_c = 3, .names = names, .class_n = cn, .class_idx = idx,
		                .unlabelled = 1 };
	uint8_t *buf;
	size_t len;
	assert_int_equal(gf_meta_encode(&m, &buf, &len), 0);
	gf_shard_meta r;
	assert_int_equal(gf_meta_decode(buf, len, &r), 0);
	assert_int_equal(r.total, 20);
	assert_int_equal(r.nshards, 4);
	assert_int_equal(r.number, 2);
	assert_int_equal(r.first, 10);
	assert_int_equal(r.count, 6);
	assert_int_equal(r.nclasses, 3);
	assert_int_equal(r.enc_count[1], 2);
	assert_int_equal(r.payload_bytes, 1234);
	assert_int_equal(r.max_c, 3);
	assert_string_equal(r.names[2], "T-shirt/top");
	assert_int_equal(r.class_n[0], 2);
	assert_int_equal(r.class_idx[0][1], 4);
	assert_int_equal(r.class_idx[2][0], 1);
	assert_int_equal(r.unlabelled, 1);
	gf_meta_free(&r);
	/* any flipped byte is caught (CRC), any truncation too */
	for (size_t i = 0; i < len; i += 7) {
		buf[i] ^= 0x10;
		assert_int_equal(gf_meta_decode(buf, len, &r), GF_ECORRUPT);
		buf[i] ^= 0x10;
	}
	for (size_t l = 0; l < len; l += 5)
		assert_int_equal(gf_meta_decode(buf, l, &r), GF_ECORRUPT);
	free(buf);
	/* an index out of order is caught even with a valid CRC */
	i0[1] = 0;
	assert_int_equal(gf_meta_encode(&m, &buf, &len), 0);
	assert_int_equal(gf_meta_decode(buf, len, &r), GF_ECORRUPT);
	assert_non_null(strstr(gf_errmsg(), "ascending"));
	free(buf);
}

/* ---- writing and opening ---- */

static void test_write_open_get(void **st)
{
	(void)st;
	char *dir = tmpdir_make(), *out = path_fmt("%s/ds", dir);
	ds_spec s = { .n = 1000, .nclasses = 10, .shard_records = 300, .encoding = GF_ENC_RAW, .w = 8, .h = 6, .c = 3 };
	make_dataset(out, &s);
	char *tmp = path_fmt("%s.tmp", out);
	assert_int_not_equal(access(tmp, F_OK), 0); /* renamed away */
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	assert_int_equal(m->count, 1000);
	assert_int_equal(m->total, 1000);
	assert_int_equal(m->nshards, 4);
	assert_int_equal(m->nclasses, 10);
	assert_int_equal(m->enc_count[GF_ENC_RAW], 1000);
	assert_int_equal(m->payload_bytes, 1000 * 144);
	assert_int_equal(m->min_height, 6);
	assert_int_equal(m->max_width, 8);
	assert_int_equal(m->max_channels, 3);
	assert_string_equal(m->class_names[3], "3");
	uint64_t total = 0;
	for (uint32_t c = 0; c < 10; c++) {
		uint64_t n = 0;
		for (uint64_t k = 0; k < 1000; k++)
			n += label_of(k, 10) == (int32_t)c;
		assert_int_equal(m->class_count[c], n);
		uint64_t pos[1000];
		assert_int_equal(gf_dataset_class_positions(ds, c, pos), 0);
		for (uint64_t j = 0; j < n; j++) {
			assert_int_equal(label_of(pos[j], 10), (int32_t)c);
			if (j)
				assert_true(pos[j] > pos[j - 1]);
		}
		total += n;
	}
	assert_int_equal(total, 1000);
	for (uint32_t i = 0; i < 4; i++) {
		const gf_shard_info *si = gf_dataset_shard(ds, i);
		assert_int_equal(si->first, 300 * i);
		assert_int_equal(si->count, i < 3 ? 300 : 100);
		assert_true(si->fd >= 0);
	}
	uint8_t buf[GF_RECORD_HEADER_SIZE + 144 + 4]; /* header, payload, CRC-32C */
	for (uint64_t k = 0; k < 1000; k++) {
		gf_record r;
		assert_int_equal(gf_dataset_get(ds, k, &r), 0);
		assert_int_equal(r.key, k);
		assert_int_equal(r.shard, k / 300);
		assert_int_equal(r.h.label, label_of(k, 10));
		assert_int_equal(r.h.payload, 144);
		for (size_t i = 0; i < 144; i++)
			assert_int_equal(r.payload[i], raw_px(k, i));
		/* the offset is where the value lies in data.mdb (io_uring reads it there) */
		const gf_shard_info *si = gf_dataset_shard(ds, r.shard);
		assert_int_equal(pread(si->fd, buf, r.value_len, (off_t)r.offset), (ssize_t)r.value_len);
		assert_memory_equal(buf, r.value, r.value_len);
	}
	gf_record r;
	assert_int_equal(gf_dataset_get(ds, 1000, &r), GF_ENOTFOUND);
	gf_dataset_close(ds);

	/* one shard on its own: positions 0.., keys from its first */
	char *one = path_fmt("%s/shard-00002", out);
	assert_int_equal(gf_dataset_open(one, &ds), 0);
	m = gf_dataset_metadata(ds);
	assert_int_equal(m->count, 300);
	assert_int_equal(m->total, 1000);
	assert_int_equal(gf_dataset_get(ds, 5, &r), 0);
	assert_int_equal(r.key, 605);
	assert_int_equal(r.payload[0], raw_px(605, 0));
	for (uint32_t c = 0; c < 10; c++) {
		uint64_t pos[300];
		assert_int_equal(gf_dataset_class_positions(ds, c, pos), 0);
		for (uint64_t j = 0; j < m->class_count[c]; j++)
			assert_int_equal(label_of(600 + pos[j], 10), (int32_t)c);
	}
	assert_int_equal(gf_dataset_class_positions(ds, 10, NULL), GF_EPARAM);
	gf_dataset_close(ds);

	/* writing over an existing dataset needs overwrite */
	gf_writer_opts wo = { .nclasses = 2 };
	gf_dataset_writer *w;
	assert_int_equal(gf_dataset_writer_open(out, &wo, &w), -EEXIST);
	gf_remove_tree(dir);
	free(one);
	free(tmp);
	free(out);
	free(dir);
}

static void test_shard_bytes(void **st)
{
	(void)st;
	char *dir = tmpdir_make(), *out = path_fmt("%s/ds", dir);
	const char *names[2] = { "zero", "one" };
	gf_writer_opts wo = { .shard_bytes = 1000, .nclasses = 2, .class_names = names };
	gf_dataset_writer *w;
	assert_int_equal(gf_dataset_writer_open(out, &wo, &w), 0);
	uint8_t pix[100];
	for (uint64_t k = 0; k < 95; k++) {
		memset(pix, (int)k, sizeof(pix));
		gf_record_header h = { .label = (int32_t)(k % 2), .encoding = GF_ENC_RAW, .height = 10, .width = 10,
			                   .channels = 1, .payload = 100 };
		assert_int_equal(gf_dataset_writer_add(w, &h, pix), 0);
	}
	/* label out of range is refused, naming the record */
	gf_record_header h = { .label = 2, .encoding = GF_ENC_RAW, .height = 10, .width = 10, .channels = 1,
		                   .payload = 100 };
	assert_int_equal(gf_dataset_writer_add(w, &h, pix), GF_EPARAM);
	assert_non_null(strstr(gf_errmsg(), "record 95"));
	assert_int_equal(gf_dataset_writer_count(w), 95);
	assert_int_equal(gf_dataset_writer_finish(w), 0);
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	/* 128-byte values (header, 100 pixels, checksum), at most 1000 bytes
	 * per shard: 7 per shard */
	assert_int_equal(m->nshards, 14);
	assert_int_equal(gf_dataset_shard(ds, 0)->count, 7);
	assert_int_equal(gf_dataset_shard(ds, 13)->count, 4);
	assert_string_equal(m->class_names[1], "one");
	for (uint64_t k = 0; k < 95; k++) {
		gf_record r;
		assert_int_equal(gf_dataset_get(ds, k, &r), 0);
		assert_int_equal(r.payload[50], (uint8_t)k);
	}
	gf_dataset_close(ds);
	gf_remove_tree(dir);
	free(out);
	free(dir);
}

/* ---- bad input ---- */

static void expect_open_fails(const char *path, int rc, const char *needle)
{
	gf_dataset *ds = NULL;
	int got = gf_dataset_open(path, &ds);
	if (got != rc)
		fail_msg("open %s: %d (%s), expected %d", path, got, gf_errmsg(), rc);
	assert_null(ds);
	if (!strstr(gf_errmsg(), needle))
		fail_msg("'%s' not in '%s'", needle, gf_errmsg());
}

/* Makes an LMDB environment in dir with the given (key, value) pairs. */
static void make_env(const char *dir, int n, const char *const *keys, const char *const *vals)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	mkdir(dir, 0777);
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_open(env, dir, 0, 0644), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
	for (int i = 0; i < n; i++) {
		MDB_val k = { 8, (void *)keys[i] }, v = { strlen(vals[i]), (void *)vals[i] };
		assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
	}
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
}

static void test_bad_datasets(void **st)
{
	(void)st;
	char *dir = tmpdir_make();
	char *p;

	/* missing path */
	p = path_fmt("%s/nothing-here", dir);
	expect_open_fails(p, -ENOENT, p);
	free(p);

	/* a directory that is no dataset */
	p = path_fmt("%s/empty", dir);
	mkdir(p, 0777);
	expect_open_fails(p, GF_ENOTFOUND, "not a ganflow dataset");
	free(p);

	/* a shard that is not LMDB */
	p = path_fmt("%s/notlmdb/shard-00000", dir);
	char *q = path_fmt("%s/notlmdb", dir);
	mkdir(q, 0777);
	mkdir(p, 0777);
	char *f = path_fmt("%s/data.mdb", p);
	FILE *fp = fopen(f, "wb");
	for (int i = 0; i < 3000; i++)
		fputs("this is not an lmdb file ", fp);
	fclose(fp);
	gf_dataset *ds;
	assert_int_not_equal(gf_dataset_open(q, &ds), 0);
	if (!strstr(gf_errmsg(), "not an LMDB") || !strstr(gf_errmsg(), f))
		fail_msg("unexpected: %s", gf_errmsg());
	free(f);
	free(p);
	free(q);

	/* empty shard (an LMDB environment without records) and missing meta */
	p = path_fmt("%s/emptyenv", dir);
	make_env(p, 0, NULL, NULL);
	expect_open_fails(p, GF_ENOTFOUND, "no __meta__ record");
	free(p);
	p = path_fmt("%s/nometa", dir);
	const char *keys[1] = { "\0\0\0\0\0\0\0\0" }, *vals[1] = { "GF..." };
	make_env(p, 1, keys, vals);
	expect_open_fails(p, GF_ENOTFOUND, "no __meta__ record");
	free(p);

	/* a meta record that is garbage */
	p = path_fmt("%s/badmeta", dir);
	const char *keys2[1] = { GF_META_KEY }, *vals2[1] = { "GFMD but nothing else that makes sense......"
		                                                   "............................................"
		                                                   "............................................" };
	make_env(p, 1, keys2, vals2);
	expect_open_fails(p, GF_ECORRUPT, p);
	free(p);

	/* a shard missing from the numbering, and one missing at the end */
	p = path_fmt("%s/holes", dir);
	ds_spec s = { .n = 30, .nclasses = 3, .shard_records = 10, .encoding = GF_ENC_RAW, .w = 2, .h = 2, .c = 1 };
	make_dataset(p, &s);
	char *s1 = path_fmt("%s/shard-00001", p), *s1x = path_fmt("%s/moved", dir);
	assert_int_equal(rename(s1, s1x), 0);
	expect_open_fails(p, GF_ENOTFOUND, "shard-00001 is missing");
	assert_int_equal(rename(s1x, s1), 0);
	char *s2 = path_fmt("%s/shard-00002", p);
	assert_int_equal(rename(s2, s1x), 0);
	expect_open_fails(p, GF_ENOTFOUND, "shard-00002 is missing");
	free(s1);
	free(s1x);
	free(s2);
	free(p);

	/* an empty dataset is valid, but there is nothing to stream */
	p = path_fmt("%s/zero", dir);
	gf_writer_opts wo = { .nclasses = 2 };
	gf_dataset_writer *w;
	assert_int_equal(gf_dataset_writer_open(p, &wo, &w), 0);
	assert_int_equal(gf_dataset_writer_finish(w), 0);
	assert_int_equal(gf_dataset_open(p, &ds), 0);
	assert_int_equal(gf_dataset_metadata(ds)->count, 0);
	gf_stream *str;
	gf_stream_opts so = { .epochs = 1 };
	assert_int_equal(gf_stream_open(ds, &so, &str), GF_EPARAM);
	assert_non_null(strstr(gf_errmsg(), "nothing to read"));
	gf_dataset_close(ds);
	free(p);
	gf_remove_tree(dir);
	free(dir);
}

/* Bad records are found by gf_dataset_get, naming shard and key. */
static void test_bad_records(void **st)
{
	(void)st;
	char *dir = tmpdir_make(), *out = path_fmt("%s/ds", dir);
	gf_writer_opts wo = { .nclasses = 4, .shard_records = 5 };
	gf_dataset_writer *w;
	assert_int_equal(gf_dataset_writer_open(out, &wo, &w), 0);
	uint8_t v[GF_RECORD_HEADER_SIZE + 4] = { 0 }, pix[4] = { 1, 2, 3, 4 };
	gf_record_header h = { .label = 1, .encoding = GF_ENC_RAW, .height = 2, .width = 2, .channels = 1, .payload = 4 };
	for (int k = 0; k < 10; k++) {
		if (k == 3) { /* truncated value */
			gf_record_header_write(&h, v);
			assert_int_equal(gf_dataset_writer_add_value(w, 1, v, GF_RECORD_HEADER_SIZE + 2), 0);
		} else if (k == 6) { /* bad header */
			gf_record_header_write(&h, v);
			v[0] = 'Z';
			assert_int_equal(gf_dataset_writer_add_value(w, 1, v, sizeof(v)), 0);
		} else if (k == 8) { /* label >= class count */
			gf_record_header h9 = h;
			h9.label = 9;
			gf_record_header_write(&h9, v);
			memcpy(v + GF_RECORD_HEADER_SIZE, pix, 4);
			assert_int_equal(gf_dataset_writer_add_value(w, 1, v, sizeof(v)), 0);
		} else {
			assert_int_equal(gf_dataset_writer_add(w, &h, pix), 0);
		}
	}
	assert_int_equal(gf_dataset_writer_finish(w), 0);
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	for (uint64_t k = 0; k < 10; k++) {
		gf_record r;
		int rc = gf_dataset_get(ds, k, &r);
		if (k != 3 && k != 6 && k != 8) {
			assert_int_equal(rc, 0);
			continue;
		}
		assert_int_equal(rc, GF_ECORRUPT);
		char want[64];
		snprintf(want, sizeof(want), "shard-0000%d key %d:", (int)k / 5, (int)k);
		if (!strstr(gf_errmsg(), want))
			fail_msg("'%s' not in '%s'", want, gf_errmsg());
		const char *why = k == 3 ? "truncated" : k == 6 ? "magic" : "label 9 >= class count 4";
		if (!strstr(gf_errmsg(), why))
			fail_msg("'%s' not in '%s'", why, gf_errmsg());
	}
	gf_dataset_close(ds);
	gf_remove_tree(dir);
	free(out);
	free(dir);
}

/* ---- epoch orders ---- */

static gf_dataset *ord_ds;
static char *ord_dir;

static int setup_orders(void **st)
{
	(void)st;
	ord_dir = tmpdir_make();
	char *out = path_fmt("%s/ds", ord_dir);
	ds_spec s = { .n = 1000, .nclasses = 10, .shard_records = 128, .encoding = GF_ENC_RAW, .w = 1, .h = 1, .c = 1 };
	make_dataset(out, &s);
	int rc = gf_dataset_open(out, &ord_ds);
	free(out);
	return rc;
}

static int teardown_orders(void **st)
{
	(void)st;
	gf_dataset_close(ord_ds);
	gf_remove_tree(ord_dir);
	free(ord_dir);
	return 0;
}

/* Fills an epoch's order; returns it (malloc'ed) and its length. */
static uint64_t *order_of(const gf_order_opts *o, uint64_t epoch, uint64_t *len)
{
	gf_order *ord;
	assert_int_equal(gf_order_create(ord_ds, o, &ord), 0);
	*len = gf_order_len(ord);
	uint64_t *v = malloc((*len + 1) * sizeof(uint64_t));
	assert_int_equal(gf_order_fill(ord, epoch, v), 0);
	gf_order_destroy(ord);
	return v;
}

static void assert_permutation(const uint64_t *v, uint64_t n, uint64_t total)
{
	uint8_t *seen = calloc(total, 1);
	for (uint64_t i = 0; i < n; i++) {
		assert_true(v[i] < total);
		assert_int_equal(seen[v[i]], 0);
		seen[v[i]] = 1;
	}
	free(seen);
}

static void test_order_plain(void **st)
{
	(void)st;
	gf_order_opts o = { 0 };
	uint64_t n, *v = order_of(&o, 3, &n);
	assert_int_equal(n, 1000);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(v[i], i);
	free(v);
}

static void test_order_shuffle(void **st)
{
	(void)st;
	gf_order_opts o = { .shuffle = 1, .window = 100, .seed = 42 };
	uint64_t n, *e0 = order_of(&o, 0, &n), *e1 = order_of(&o, 1, &n), *again = order_of(&o, 0, &n);
	assert_int_equal(n, 1000);
	assert_permutation(e0, n, 1000); /* every record exactly once */
	assert_permutation(e1, n, 1000);
	assert_memory_equal(e0, again, n * sizeof(uint64_t)); /* same seed, same order */
	int same = 0, fixed = 0;
	for (uint64_t i = 0; i < n; i++) {
		same += e0[i] == e1[i];
		fixed += e0[i] == i;
	}
	assert_true(same < 50);  /* epochs differ */
	assert_true(fixed < 50); /* and it is shuffled */
	o.seed = 43;
	uint64_t *other = order_of(&o, 0, &n);
	assert_memory_not_equal(e0, other, n * sizeof(uint64_t));
	free(other);
	/* window 1: blocks in a permuted order over the whole set, each in key
	 * order (blocks of 128: 7 whole ones and the last, 104 long) */
	o.window = 1;
	o.block = 128;
	uint64_t *w1 = order_of(&o, 5, &n);
	assert_permutation(w1, n, 1000);
	int runs = 1;
	assert_int_equal(w1[0] % 128, 0);
	for (uint64_t i = 1; i < n; i++)
		if (w1[i] != w1[i - 1] + 1) {
			runs++;
			assert_int_equal(w1[i] % 128, 0);
			assert_true((w1[i - 1] + 1) % 128 == 0 || w1[i - 1] == 999);
		}
	assert_int_equal(runs, 8);
	assert_int_not_equal(w1[0], 0); /* (seed-dependent) block order is permuted */
	o.block = 0;
	/* window 0 = the whole set: a full shuffle */
	o.window = 0;
	uint64_t *full = order_of(&o, 0, &n);
	assert_permutation(full, n, 1000);
	free(full);
	free(w1);
	free(e0);
	free(e1);
	free(again);
}

static void test_order_ranks(void **st)
{
	(void)st;
	for (int shuffle = 0; shuffle < 2; shuffle++) {
		uint64_t *parts[3], n = 0, missing[2] = { 0, 0 };
		for (uint64_t epoch = 0; epoch < 2; epoch++) {
			uint8_t *seen = calloc(1000, 1);
			for (uint32_t r = 0; r < 3; r++) {
				gf_order_opts o = { .shuffle = shuffle, .window = 64, .seed = 7, .rank = r, .world = 3 };
				parts[r] = order_of(&o, epoch, &n);
				assert_int_equal(n, 333); /* equal length: floor(1000 / 3) */
				for (uint64_t i = 0; i < n; i++) {
					assert_int_equal(seen[parts[r][i]], 0); /* disjoint */
					seen[parts[r][i]] = 1;
				}
				free(parts[r]);
			}
			uint64_t covered = 0;
			for (int i = 0; i < 1000; i++)
				if (seen[i])
					covered++;
				else
					missing[epoch] = (uint64_t)i;
			assert_int_equal(covered, 999); /* one record left out per epoch */
			free(seen);
		}
		if (shuffle)
			assert_int_not_equal(missing[0], missing[1]); /* and a different one each epoch */
		else
			assert_int_equal(missing[0], 999);
	}
	gf_order *ord;
	gf_order_opts bad = { .rank = 3, .world = 3 };
	assert_int_equal(gf_order_create(ord_ds, &bad, &ord), GF_EPARAM);
}

static void test_order_classes(void **st)
{
	(void)st;
	int64_t cls[2] = { 2, 5 };
	for (int shuffle = 0; shuffle < 2; shuffle++) {
		gf_order_opts o = { .shuffle = shuffle, .window = 50, .seed = 1, .classes = cls, .nclasses = 2 };
		uint64_t n, *v = order_of(&o, 0, &n);
		uint64_t want = 0;
		for (uint64_t k = 0; k < 1000; k++)
			want += label_of(k, 10) == 2 || label_of(k, 10) == 5;
		assert_int_equal(n, want);
		assert_permutation(v, n, 1000);
		for (uint64_t i = 0; i < n; i++) {
			int32_t l = label_of(v[i], 10);
			assert_true(l == 2 || l == 5);
		}
		free(v);
	}
	int64_t badc[1] = { 10 };
	gf_order_opts o = { .classes = badc, .nclasses = 1 };
	gf_order *ord;
	assert_int_equal(gf_order_create(ord_ds, &o, &ord), GF_EPARAM);
	assert_non_null(strstr(gf_errmsg(), "class 10 not in the dataset"));
}

/* The permutation behind block orders and shuffled conversions: a
 * bijection for every size, a different one per seed. */
static void test_permute(void **st)
{
	(void)st;
	static const uint64_t sizes[] = { 1, 2, 3, 4, 5, 17, 1000, 4096, 4097, 65537 };
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint64_t n = sizes[k], *v = malloc(n * sizeof(uint64_t));
		for (uint64_t i = 0; i < n; i++)
			v[i] = gf_permute(i, n, 9);
		assert_permutation(v, n, n);
		if (n >= 1000) {
			uint64_t same = 0, fixed = 0;
			for (uint64_t i = 0; i < n; i++) {
				same += v[i] == gf_permute(i, n, 10);
				fixed += v[i] == i;
			}
			assert_true(same < n / 100 && fixed < n / 100);
		}
		free(v);
	}
}

/* Seeking to any position of any epoch continues exactly as one pass:
 * in the window's fill, in its middle, in its drain, at the end; with and
 * without shuffle, a class filter, parts of both kinds. */
static void test_order_seek(void **st)
{
	(void)st;
	int64_t cls[3] = { 1, 4, 7 };
	gf_order_opts cases[] = {
		{ .shuffle = 1, .window = 64, .block = 3, .seed = 5 },
		{ .shuffle = 1, .window = 64, .seed = 5, .rank = 2, .world = 3 },
		{ .shuffle = 1, .window = 0, .seed = 6, .rank = 1, .world = 7, .spread_remainder = 1 },
		{ .shuffle = 1, .window = 16, .block = 5, .seed = 7, .classes = cls, .nclasses = 3 },
		{ .shuffle = 0, .rank = 1, .world = 3 },
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		gf_order *ord;
		assert_int_equal(gf_order_create(ord_ds, &cases[c], &ord), 0);
		uint64_t len = gf_order_len(ord), *all = malloc((len + 1) * sizeof(uint64_t));
		for (uint64_t epoch = 0; epoch < 3; epoch++) {
			assert_int_equal(gf_order_fill(ord, epoch, all), 0);
			const uint64_t cuts[] = { 0, 1, 15, 16, 17, 63, 64, 65, len / 2, len - 64, len - 63, len - 1, len };
			for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
				if (cuts[k] > len)
					continue;
				gf_order_seek(ord, epoch, cuts[k]);
				for (uint64_t i = cuts[k]; i < len; i++)
					assert_int_equal(gf_order_next(ord), all[i]);
				assert_int_equal(gf_order_next(ord), UINT64_MAX); /* past the end */
			}
		}
		free(all);
		gf_order_destroy(ord);
	}
}

/* Every record exactly once per epoch over many parts (spread), or at
 * most once with parts of equal length (drop: the M mod parts left over
 * are the same count every epoch, different records). */
static void test_order_parts_exact(void **st)
{
	(void)st;
	char *d = tmpdir_make(), *out = path_fmt("%s/prime", d);
	const uint64_t n = 10007; /* prime: no part count divides it */
	ds_spec s = { .n = n, .nclasses = 10, .shard_records = 4096, .encoding = GF_ENC_RAW, .w = 1, .h = 1, .c = 1,
	              .class_sorted = 1 };
	make_dataset(out, &s);
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	uint64_t *v = malloc(n * sizeof(uint64_t));
	uint8_t *seen = malloc(n);
	static const uint32_t worlds[] = { 2, 8, 64, 512 };
	for (size_t k = 0; k < sizeof(worlds) / sizeof(worlds[0]); k++)
		for (int spread = 0; spread < 2; spread++) {
			uint64_t missing_first[2] = { UINT64_MAX, UINT64_MAX };
			for (uint64_t epoch = 0; epoch < 2; epoch++) {
				memset(seen, 0, n);
				uint64_t total = 0;
				for (uint32_t r = 0; r < worlds[k]; r++) {
					gf_order_opts o = { .shuffle = 1, .seed = 3, .rank = r, .world = worlds[k],
					                    .spread_remainder = spread };
					gf_order *ord;
					assert_int_equal(gf_order_create(ds, &o, &ord), 0);
					uint64_t len = gf_order_len(ord);
					if (spread)
						assert_true(len == n / worlds[k] || len == n / worlds[k] + 1);
					else
						assert_int_equal(len, n / worlds[k]);
					assert_int_equal(gf_order_fill(ord, epoch, v), 0);
					for (uint64_t i = 0; i < len; i++) {
						assert_true(v[i] < n);
						if (seen[v[i]])
							fail_msg("parts=%u %s: record %llu read twice in epoch %llu", worlds[k],
							         spread ? "spread" : "drop", (unsigned long long)v[i], (unsigned long long)epoch);
						seen[v[i]] = 1;
					}
					total += len;
					gf_order_destroy(ord);
				}
				assert_int_equal(total, spread ? n : n - n % worlds[k]);
				for (uint64_t i = 0; i < n && missing_first[epoch] == UINT64_MAX; i++)
					if (!seen[i])
						missing_first[epoch] = i;
			}
			if (!spread)
				assert_int_not_equal(missing_first[0], missing_first[1]); /* other records left out */
		}
	free(v);
	free(seen);
	gf_dataset_close(ds);
	gf_remove_tree(d);
	free(out);
	free(d);
}

/* Class mix of batches of 256 on a class-sorted set (1000 classes, as a
 * folder import or a Caffe LMDB made without --shuffle) with the default
 * order: distinct classes per batch and the chi-square of per-batch class
 * counts against uniform sampling's expectation, >= 0.95 of it. The set
 * is 320,000 tiny records, five times the default window (ImageNet's
 * 1.28 M is twenty times it): the shard-order-and-window order before it
 * gave 188.4 classes (0.83) and chi2 1429 (0.70) here, and 109.6 (0.49)
 * and 3289 (0.30) on a class-sorted 1.28 M. */
static void test_order_class_mix(void **st)
{
	(void)st;
	char *d = tmpdir_make(), *out = path_fmt("%s/sorted", d);
	const uint64_t n = 320000, k = 1000, batch = 256;
	ds_spec s = { .n = n, .nclasses = (uint32_t)k, .encoding = GF_ENC_RAW, .w = 1, .h = 1, .c = 1,
	              .class_sorted = 1 };
	make_dataset(out, &s);
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	gf_order_opts o = { .shuffle = 1, .window = 65536, .seed = 1 }; /* lmdb_reader's defaults */
	gf_order *ord;
	assert_int_equal(gf_order_create(ds, &o, &ord), 0);
	assert_int_equal(gf_order_block(ord), 8); /* 65536 / 8192 */
	uint64_t *v = malloc(n * sizeof(uint64_t));
	assert_int_equal(gf_order_fill(ord, 0, v), 0);
	uint32_t count[1000];
	double distinct = 0, chi2 = 0, e = (double)batch / (double)k;
	uint64_t nb = n / batch;
	for (uint64_t b = 0; b < nb; b++) {
		memset(count, 0, sizeof(count));
		for (uint64_t i = b * batch; i < (b + 1) * batch; i++)
			count[spec_label(&s, v[i])]++;
		for (uint64_t c = 0; c < k; c++) {
			distinct += count[c] > 0;
			chi2 += (count[c] - e) * (count[c] - e) / e;
		}
	}
	distinct /= (double)nb;
	chi2 /= (double)nb;
	double u_distinct = (double)k * (1.0 - pow(1.0 - 1.0 / (double)k, (double)batch));
	double u_chi2 = (double)(k - 1) * (double)(n - batch) / (double)(n - 1); /* without replacement */
	print_message("class mix: %.1f distinct classes per batch (uniform %.1f), chi2 %.0f (uniform %.0f)\n", distinct,
	              u_distinct, chi2, u_chi2);
	if (distinct < 0.95 * u_distinct || u_chi2 < 0.95 * chi2)
		fail_msg("class mix %.3f (distinct) / %.3f (chi2) of uniform sampling's, under 0.95", distinct / u_distinct,
		         u_chi2 / chi2);
	free(v);
	gf_order_destroy(ord);
	gf_dataset_close(ds);
	gf_remove_tree(d);
	free(out);
	free(d);
}

static void test_misc(void **st)
{
	(void)st;
	assert_int_equal(gf_hash3(1, 2, 3), gf_hash3(1, 2, 3));
	assert_int_not_equal(gf_hash3(1, 2, 3), gf_hash3(1, 2, 4));
	assert_int_equal(gf_bad_exceeded(0, 10, 0.01, 100, 1), 0);
	assert_int_equal(gf_bad_exceeded(5, 50, 0.01, 100, 0), 0);  /* too early to tell */
	assert_int_equal(gf_bad_exceeded(5, 50, 0.01, 100, 1), 1);  /* end of data: decide */
	assert_int_equal(gf_bad_exceeded(1, 200, 0.01, 100, 0), 0); /* 0.5% */
	assert_int_equal(gf_bad_exceeded(3, 200, 0.01, 100, 0), 1); /* 1.5% */
	assert_string_equal(gf_encoding_name(GF_ENC_JPEG), "jpeg");
}

/* CRC-32C: the standard check value, and the hardware path (three
 * interleaved streams combined by shifts, where the CPU has SSE 4.2)
 * against a bit-by-bit reference at every alignment and length around its
 * block sizes; continuing a CRC equals one pass. */
static uint32_t crc_bitwise(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
	}
	return ~c;
}

static void test_crc32c(void **state)
{
	(void)state;
	assert_int_equal(gf_crc32c(0, "123456789", 9), 0xe3069283u);
	assert_int_equal(gf_crc32c(0, "", 0), 0);
	size_t cap = 3 * 4096 * 2 + 64;
	uint8_t *buf = malloc(cap);
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < cap; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	static const size_t lens[] = { 1, 7, 8, 9, 100, 4095, 12287, 12288, 12289, 12300, 24576, 24577, 24600 };
	for (size_t off = 0; off < 8; off++)
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			size_t n = lens[k];
			uint32_t want = crc_bitwise(buf + off, n);
			assert_int_equal(gf_crc32c(0, buf + off, n), want);
			size_t h = n / 3;
			assert_int_equal(gf_crc32c(gf_crc32c(0, buf + off, h), buf + off + h, n - h), want);
		}
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c),
		cmocka_unit_test(test_header_roundtrip),
		cmocka_unit_test(test_header_bad),
		cmocka_unit_test(test_meta_roundtrip),
		cmocka_unit_test(test_write_open_get),
		cmocka_unit_test(test_shard_bytes),
		cmocka_unit_test(test_bad_datasets),
		cmocka_unit_test(test_bad_records),
		cmocka_unit_test(test_misc),
		cmocka_unit_test(test_permute),
		cmocka_unit_test(test_order_parts_exact),
		cmocka_unit_test(test_order_class_mix),
	};
	const struct CMUnitTest order_tests[] = {
		cmocka_unit_test(test_order_plain),
		cmocka_unit_test(test_order_shuffle),
		cmocka_unit_test(test_order_ranks),
		cmocka_unit_test(test_order_classes),
		cmocka_unit_test(test_order_seek),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	return rc | cmocka_run_group_tests(order_tests, setup_orders, teardown_orders);
}
