/* Decoding records: exact normalisation of raw records, area and bilinear
 * resizes against hand-computed values, crops, flips, channel conversion,
 * JPEG decode quality and reduced-DCT decode, bad JPEGs; and the
 * jpeg_decode stage in a graph (several workers give the same images as
 * one, bad records are skipped and counted, then fail the run).
 */
#include "test_shard_util.h"

static gf_decoder *dec;

static int setup(void **st)
{
	(void)st;
	return gf_decoder_create(&dec);
}

static int teardown(void **st)
{
	(void)st;
	gf_decoder_destroy(dec);
	sink_reset();
	return 0;
}

static float nz(uint8_t v)
{
	return v * (1.0f / 127.5f) - 1.0f;
}

/* Decodes a raw image (h x w x c bytes) with t and rnd into out. */
static int decode_raw(const gf_transform *t, const uint8_t *pix, int w, int h, int c, uint64_t rnd, float *out,
                      size_t n)
{
	gf_record_header hd = { .label = 0, .encoding = GF_ENC_RAW, .height = (uint32_t)h, .width = (uint32_t)w,
		                    .channels = (uint32_t)c, .payload = (uint32_t)(w * h * c) };
	return gf_decode_record(dec, t, &hd, pix, rnd, out, n);
}

static void test_raw_identity(void **st)
{
	(void)st;
	uint8_t pix[28 * 28], rgb[5 * 4 * 3];
	for (int i = 0; i < 28 * 28; i++)
		pix[i] = (uint8_t)(i * 13);
	float out[28 * 28];
	gf_transform t = { .height = 28, .width = 28, .channels = 1 };
	assert_int_equal(decode_raw(&t, pix, 28, 28, 1, 0, out, 28 * 28), 0);
	for (int i = 0; i < 28 * 28; i++)
		assert_true(out[i] == nz(pix[i])); /* bit-exact */
	assert_true(fabsf(nz(0) + 1.0f) < 1e-7f && fabsf(nz(255) - 1.0f) < 1e-6f);
	/* RGB HWC in, CHW out; the record's own size when none is given */
	for (int i = 0; i < 60; i++)
		rgb[i] = (uint8_t)(i * 4);
	float o3[60];
	gf_transform t0 = { 0 };
	assert_int_equal(decode_raw(&t0, rgb, 5, 4, 3, 0, o3, 60), 0);
	for (int y = 0; y < 4; y++)
		for (int x = 0; x < 5; x++)
			for (int ch = 0; ch < 3; ch++)
				assert_true(o3[ch * 20 + y * 5 + x] == nz(rgb[(y * 5 + x) * 3 + ch]));
	/* gray to RGB replicates, RGB to gray uses 0.299/0.587/0.114 */
	gf_transform tg = { .channels = 3 };
	assert_int_equal(decode_raw(&tg, pix, 28, 28, 1, 0, out, 28 * 28), GF_ESHAPE); /* too small */
	float big[3 * 28 * 28];
	assert_int_equal(decode_raw(&tg, pix, 28, 28, 1, 0, big, 3 * 28 * 28), 0);
	for (int i = 0; i < 28 * 28; i++)
		assert_true(big[i] == nz(pix[i]) && big[784 + i] == nz(pix[i]) && big[1568 + i] == nz(pix[i]));
	gf_transform t1 = { .channels = 1 };
	assert_int_equal(decode_raw(&t1, rgb, 5, 4, 3, 0, o3, 20), 0);
	for (int i = 0; i < 20; i++) {
		float g = 0.299f * rgb[3 * i] + 0.587f * rgb[3 * i + 1] + 0.114f * rgb[3 * i + 2];
		assert_true(fabsf(o3[i] - (g / 127.5f - 1.0f)) < 1e-5f);
	}
}

static void test_resize(void **st)
{
	(void)st;
	/* area 8x8 -> 4x4: means of 2x2 blocks */
	uint8_t pix[64];
	for (int i = 0; i < 64; i++)
		pix[i] = (uint8_t)((i * 37) % 251);
	float out[16];
	gf_transform t = { .height = 4, .width = 4, .channels = 1, .resize = GF_RESIZE_AREA };
	assert_int_equal(decode_raw(&t, pix, 8, 8, 1, 0, out, 16), 0);
	for (int y = 0; y < 4; y++)
		for (int x = 0; x < 4; x++) {
			float m = (pix[(2 * y) * 8 + 2 * x] + pix[(2 * y) * 8 + 2 * x + 1] + pix[(2 * y + 1) * 8 + 2 * x] +
			           pix[(2 * y + 1) * 8 + 2 * x + 1]) / 4.0f;
			assert_true(fabsf(out[y * 4 + x] - (m / 127.5f - 1.0f)) < 1e-5f);
		}
	/* area 3 -> 2 along a row: [a, b/2] / 1.5 and [b/2, c] / 1.5 */
	uint8_t row[3] = { 30, 90, 150 };
	float o2[2];
	gf_transform tr = { .height = 1, .width = 2, .channels = 1, .crop = GF_CROP_NONE };
	assert_int_equal(decode_raw(&tr, row, 3, 1, 1, 0, o2, 2), 0);
	assert_true(fabsf(o2[0] - ((30 + 45) / 1.5f / 127.5f - 1.0f)) < 1e-5f);
	assert_true(fabsf(o2[1] - ((45 + 150) / 1.5f / 127.5f - 1.0f)) < 1e-5f);
	/* bilinear 2 -> 4 (centre-aligned): 0, 0.25, 0.75, 1 of the way, clamped */
	uint8_t two[2] = { 0, 200 };
	float o4[4];
	gf_transform tb = { .height = 1, .width = 4, .channels = 1, .resize = GF_RESIZE_BILINEAR, .crop = GF_CROP_NONE };
	assert_int_equal(decode_raw(&tb, two, 2, 1, 1, 0, o4, 4), 0);
	float want[4] = { 0, 50, 150, 200 };
	for (int i = 0; i < 4; i++)
		assert_true(fabsf(o4[i] - (want[i] / 127.5f - 1.0f)) < 1e-5f);
}

static void test_crop_flip(void **st)
{
	(void)st;
	/* 8 wide, 4 high -> 4x4: the centre 4x4 window, copied exactly */
	uint8_t pix[32];
	for (int i = 0; i < 32; i++)
		pix[i] = (uint8_t)(i * 7);
	float out[16];
	gf_transform t = { .height = 4, .width = 4, .channels = 1, .crop = GF_CROP_CENTER };
	assert_int_equal(decode_raw(&t, pix, 8, 4, 1, 0, out, 16), 0);
	for (int y = 0; y < 4; y++)
		for (int x = 0; x < 4; x++)
			assert_true(out[y * 4 + x] == nz(pix[y * 8 + x + 2]));
	/* flip: the top bit of rnd mirrors the row */
	t.flip = 1;
	assert_int_equal(decode_raw(&t, pix, 8, 4, 1, 1ull << 63, out, 16), 0);
	for (int y = 0; y < 4; y++)
		for (int x = 0; x < 4; x++)
			assert_true(out[y * 4 + x] == nz(pix[y * 8 + (3 - x) + 2]));
	assert_int_equal(decode_raw(&t, pix, 8, 4, 1, 0, out, 16), 0); /* no flip */
	assert_true(out[0] == nz(pix[2]));
	/* random crop: every offset 0..4 appears, each an exact window */
	t.flip = 0;
	t.crop = GF_CROP_RANDOM;
	int seen[5] = { 0 };
	for (uint64_t r = 0; r < 64; r++) {
		assert_int_equal(decode_raw(&t, pix, 8, 4, 1, gf_hash3(1, r, 0), out, 16), 0);
		int x0 = -1;
		for (int o = 0; o <= 4; o++)
			if (out[0] == nz(pix[o]))
				x0 = o;
		assert_true(x0 >= 0);
		for (int y = 0; y < 4; y++)
			for (int x = 0; x < 4; x++)
				assert_true(out[y * 4 + x] == nz(pix[y * 8 + x + x0]));
		seen[x0]++;
	}
	for (int o = 0; o <= 4; o++)
		assert_true(seen[o] > 0);
	/* none: the whole image squeezed */
	t.crop = GF_CROP_NONE;
	assert_int_equal(decode_raw(&t, pix, 8, 4, 1, 0, out, 16), 0);
	assert_true(fabsf(out[0] - ((pix[0] + pix[1]) / 2.0f / 127.5f - 1.0f)) < 1e-5f);
}

static void test_jpeg(void **st)
{
	(void)st;
	enum { S = 256 };
	uint8_t *pix = malloc(S * S * 3);
	smooth_image(pix, S, S, 3, 3);
	const uint8_t *jpg;
	size_t len;
	assert_int_equal(gf_jpeg_encode(dec, pix, S, S, 3, 95, GF_SUBSAMP_444, &jpg, &len), 0);
	uint8_t *copy = malloc(len);
	memcpy(copy, jpg, len);
	gf_record_header h = { .label = 1, .encoding = GF_ENC_JPEG, .height = S, .width = S, .channels = 3,
		                   .payload = (uint32_t)len };
	/* full size: PSNR against the original */
	const uint8_t *dp;
	int w, hh;
	assert_int_equal(gf_decode_pixels(dec, &h, copy, 0, &dp, &w, &hh), 0);
	assert_int_equal(w, S);
	assert_true(psnr_u8(dp, pix, S * S * 3) > 35.0);
	/* 32x32 output: decoded at 1/8 DCT scale, close to an area resize of
	 * the original */
	float *out = malloc(3 * 32 * 32 * sizeof(float)), *ref = malloc(3 * 32 * 32 * sizeof(float));
	gf_transform t = { .height = 32, .width = 32, .channels = 3 };
	assert_int_equal(gf_decode_record(dec, &t, &h, copy, 0, out, 3 * 32 * 32), 0);
	assert_int_equal(decode_raw(&t, pix, S, S, 3, 0, ref, 3 * 32 * 32), 0);
	double err = 0;
	for (int i = 0; i < 3 * 32 * 32; i++) {
		err += fabs(out[i] - ref[i]);
		assert_true(out[i] >= -1.0f && out[i] <= 1.0f);
	}
	assert_true(err / (3 * 32 * 32) < 0.03); /* < 2 grey levels on average */
	/* gray output straight from the decoder (luma) */
	gf_transform tg = { .height = 32, .width = 32, .channels = 1 };
	assert_int_equal(gf_decode_record(dec, &tg, &h, copy, 0, out, 32 * 32), 0);
	/* corrupt: bad header mismatch, garbage, truncated (strict / lenient) */
	gf_record_header bad = h;
	bad.width = 100;
	assert_int_equal(gf_decode_record(dec, &t, &bad, copy, 0, out, 3 * 32 * 32), GF_ECORRUPT);
	assert_non_null(strstr(gf_errmsg(), "header says"));
	uint8_t *garbage = malloc(len);
	memcpy(garbage, copy, len);
	memset(garbage, 0x55, 64);
	assert_int_equal(gf_decode_record(dec, &t, &h, garbage, 0, out, 3 * 32 * 32), GF_ECORRUPT);
	assert_non_null(strstr(gf_errmsg(), "corrupt JPEG"));
	gf_record_header tr = h;
	tr.payload = (uint32_t)(len / 2);
	assert_int_equal(gf_decode_record(dec, &t, &tr, copy, 0, out, 3 * 32 * 32), GF_ECORRUPT);
	t.lenient = 1;
	assert_int_equal(gf_decode_record(dec, &t, &tr, copy, 0, out, 3 * 32 * 32), 0);
	free(garbage);
	free(out);
	free(ref);
	free(copy);
	free(pix);
}

/* The frame header is found by walking the JPEG's marker segments: extra
 * segments and fill bytes before it change nothing; a JPEG whose frame
 * header disagrees with the record header is refused; where the walk finds
 * none, TurboJPEG's own message comes back. */
static void test_jpeg_header(void **st)
{
	(void)st;
	enum { W = 40, H = 24 };
	uint8_t pix[W * H * 3];
	smooth_image(pix, W, H, 3, 9);
	const uint8_t *jpg;
	size_t len;
	assert_int_equal(gf_jpeg_encode(dec, pix, W, H, 3, 90, GF_SUBSAMP_420, &jpg, &len), 0);
	/* SOI, an APP1 segment of 10 bytes, three fill bytes, then the rest */
	static const uint8_t app1[] = { 0xff, 0xe1, 0x00, 0x0a, 'g', 'a', 'n', 'f', 'l', 'o', 'w', 0, 0xff, 0xff, 0xff };
	uint8_t *a = malloc(len), *b = malloc(len + sizeof(app1));
	memcpy(a, jpg, len);
	memcpy(b, jpg, 2);
	memcpy(b + 2, app1, sizeof(app1));
	memcpy(b + 2 + sizeof(app1), jpg + 2, len - 2);
	gf_record_header ha = { .encoding = GF_ENC_JPEG, .height = H, .width = W, .channels = 3,
		                    .payload = (uint32_t)len };
	gf_record_header hb = ha;
	hb.payload = (uint32_t)(len + sizeof(app1));
	gf_transform t = { .height = 16, .width = 16, .channels = 3 };
	float oa[3 * 16 * 16], ob[3 * 16 * 16];
	assert_int_equal(gf_decode_record(dec, &t, &ha, a, 0, oa, 3 * 16 * 16), 0);
	assert_int_equal(gf_decode_record(dec, &t, &hb, b, 0, ob, 3 * 16 * 16), 0);
	assert_memory_equal(oa, ob, sizeof(oa));
	/* the frame header says 40 wide, the record 41 */
	gf_record_header wrong = hb;
	wrong.width = W + 1;
	assert_int_equal(gf_decode_record(dec, &t, &wrong, b, 0, ob, 3 * 16 * 16), GF_ECORRUPT);
	assert_non_null(strstr(gf_errmsg(), "JPEG is 24x40x3 but the record header says 24x41x3"));
	/* a gray record of a colour JPEG */
	wrong = hb;
	wrong.channels = 1;
	assert_int_equal(gf_decode_record(dec, &t, &wrong, b, 0, ob, 3 * 16 * 16), GF_ECORRUPT);
	/* a segment length past the end: no frame header found, TurboJPEG's message */
	b[2 + 2] = 0xff;
	assert_int_equal(gf_decode_record(dec, &t, &hb, b, 0, ob, 3 * 16 * 16), GF_ECORRUPT);
	assert_non_null(strstr(gf_errmsg(), "corrupt JPEG"));
	free(a);
	free(b);
}

/* The AVX2 paths (the default where the CPU has AVX2) against the scalar
 * ones (GF_DECODE_SCALAR=1): the same bits for every transform, raw RGB
 * and gray sources of many sizes (odd rows, last rows, 1-pixel edges),
 * pairs (a row stride wider than the window) and a JPEG at reduced DCT
 * scales. */
static void test_simd_matches_scalar(void **st)
{
	(void)st;
	gf_decoder *ds, *dv;
	setenv("GF_DECODE_SCALAR", "1", 1);
	assert_int_equal(gf_decoder_create(&ds), 0);
	unsetenv("GF_DECODE_SCALAR");
	assert_int_equal(gf_decoder_create(&dv), 0);
	if (!__builtin_cpu_supports("avx2"))
		printf("note: no AVX2 on this CPU: both decoders take the scalar paths\n");
	enum { MAXS = 150, MAXO = 100 };
	uint8_t *pix = malloc(MAXS * MAXS * 3);
	float *a = malloc(2 * 3 * MAXO * MAXO * sizeof(float)), *b = malloc(2 * 3 * MAXO * MAXO * sizeof(float));
	uint64_t x = 12345;
	for (int it = 0; it < 600; it++) {
		x = gf_hash3(x, (uint64_t)it, 7);
		int sw = 1 + (int)(x % MAXS), sh = 1 + (int)((x >> 8) % MAXS), sc = (x >> 16) & 1 ? 3 : 1;
		int pair = it % 5 == 4;
		if (pair)
			sw += sw % 2;
		for (int i = 0; i < sw * sh * sc; i++)
			pix[i] = (uint8_t)gf_hash3(x, (uint64_t)i, 1);
		gf_transform t = { .height = 1 + (int)((x >> 24) % MAXO), .width = 1 + (int)((x >> 32) % MAXO),
			               .channels = (int)((x >> 40) % 4 == 2 ? 0 : (x >> 40) % 4),
			               .resize = (x >> 42) & 1 ? GF_RESIZE_BILINEAR : GF_RESIZE_AREA,
			               .crop = (gf_crop_mode)((x >> 43) % 3), .flip = (int)((x >> 45) & 1) };
		gf_record_header h = { .encoding = GF_ENC_RAW, .height = (uint32_t)sh, .width = (uint32_t)sw,
			                   .channels = (uint32_t)sc, .payload = (uint32_t)(sw * sh * sc),
			                   .flags = pair ? GF_RECORD_PAIR : 0 };
		/* a heap copy of exactly the payload: ASan sees any read past it */
		uint8_t *p = malloc(h.payload);
		memcpy(p, pix, h.payload);
		size_t n = 2 * 3 * MAXO * MAXO;
		int c, oh, ow;
		assert_int_equal(pair ? gf_pair_shape(&t, &h, &c, &oh, &ow) : gf_transform_shape(&t, &h, &c, &oh, &ow), 0);
		size_t len = (size_t)(pair ? 2 : 1) * c * oh * ow;
		for (int rep = 0; rep < 2; rep++) { /* the second with the random window of another key */
			uint64_t rnd = gf_hash3(x, (uint64_t)rep, 3);
			memset(a, 0x7f, len * sizeof(float));
			memset(b, 0x7f, len * sizeof(float));
			assert_int_equal(pair ? gf_decode_pair(ds, &t, &h, p, rnd, a, n) : gf_decode_record(ds, &t, &h, p, rnd, a, n),
			                 0);
			assert_int_equal(pair ? gf_decode_pair(dv, &t, &h, p, rnd, b, n) : gf_decode_record(dv, &t, &h, p, rnd, b, n),
			                 0);
			if (memcmp(a, b, len * sizeof(float)))
				fail_msg("case %d: %dx%dx%d%s -> %dx%dx%d (resize %d crop %d flip %d): AVX2 and scalar differ", it,
				         sh, sw, sc, pair ? " pair" : "", oh, ow, c, t.resize, t.crop, t.flip);
		}
		free(p);
	}
	/* a JPEG at DCT scales 1, 1/2, 1/4 and 1/8 */
	enum { S = 140 };
	smooth_image(pix, S, S - 30, 3, 5);
	const uint8_t *jpg;
	size_t jlen;
	assert_int_equal(gf_jpeg_encode(dv, pix, S, S - 30, 3, 90, GF_SUBSAMP_420, &jpg, &jlen), 0);
	uint8_t *copy = malloc(jlen);
	memcpy(copy, jpg, jlen);
	gf_record_header hj = { .encoding = GF_ENC_JPEG, .height = S - 30, .width = S, .channels = 3,
		                    .payload = (uint32_t)jlen };
	const int sizes[4] = { 90, 50, 27, 13 };
	for (int k = 0; k < 4; k++)
		for (int fl = 0; fl < 2; fl++) {
			gf_transform t = { .height = sizes[k], .width = sizes[k] + 3, .channels = 3, .flip = fl,
				               .crop = GF_CROP_RANDOM };
			size_t len = (size_t)3 * t.height * t.width;
			assert_int_equal(gf_decode_record(ds, &t, &hj, copy, 99, a, len), 0);
			assert_int_equal(gf_decode_record(dv, &t, &hj, copy, 99, b, len), 0);
			assert_memory_equal(a, b, len * sizeof(float));
		}
	free(copy);
	free(pix);
	free(a);
	free(b);
	gf_decoder_destroy(ds);
	gf_decoder_destroy(dv);
}

/* ---- the jpeg_decode stage ---- */

static char *dir, *jpg_path, *raw_path;

static int setup_stage(void **st)
{
	(void)st;
	dir = tmpdir_make();
	jpg_path = path_fmt("%s/jpg", dir);
	raw_path = path_fmt("%s/raw", dir);
	ds_spec s = { .n = 120, .nclasses = 4, .shard_records = 50, .encoding = GF_ENC_JPEG, .w = 40, .h = 30, .c = 3 };
	make_dataset(jpg_path, &s);
	ds_spec r = { .n = 90, .nclasses = 3, .shard_records = 0, .encoding = GF_ENC_RAW, .w = 12, .h = 12, .c = 1 };
	make_dataset(raw_path, &r);
	return 0;
}

static int teardown_stage(void **st)
{
	(void)st;
	gf_remove_tree(dir);
	free(dir);
	free(jpg_path);
	free(raw_path);
	sink_reset();
	return 0;
}

/* Decodes every record of path directly, for comparison: fnv1a of the
 * floats by key. */
static uint64_t *direct_sums(const char *path, const gf_transform *t, uint64_t seed, uint64_t epoch, size_t *n)
{
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(path, &ds), 0);
	*n = gf_dataset_metadata(ds)->count;
	uint64_t *s = calloc(*n, sizeof(uint64_t));
	float *out = malloc(3 * 64 * 64 * sizeof(float));
	for (uint64_t k = 0; k < *n; k++) {
		gf_record r;
		assert_int_equal(gf_dataset_get(ds, k, &r), 0);
		int c, oh, ow;
		assert_int_equal(gf_transform_shape(t, &r.h, &c, &oh, &ow), 0);
		assert_int_equal(gf_decode_record(dec, t, &r.h, r.payload, gf_hash3(seed, k, epoch), out, 3 * 64 * 64), 0);
		s[k] = fnv1a(out, (size_t)c * oh * ow * sizeof(float));
	}
	free(out);
	gf_dataset_close(ds);
	return s;
}

static void test_stage_workers(void **st)
{
	(void)st;
	char err[1024];
	gf_transform t = { .height = 24, .width = 24, .channels = 3, .crop = GF_CROP_RANDOM, .flip = 1 };
	size_t n;
	uint64_t *want = direct_sums(jpg_path, &t, 5, 0, &n);
	for (int workers = 1; workers <= 3; workers += 2) {
		sink_reset();
		step s[2] = {
			{ "lmdb_reader", NULL, "samples", kv("path", gf_value_str(jpg_path), "epochs", gf_value_int(1), NULL), 1 },
			{ "jpeg_decode", "records", "samples",
			  kv("size", gf_value_int(24), "channels", gf_value_int(3), "crop", gf_value_str("random"), "flip",
			     gf_value_bool(1), "seed", gf_value_int(5), NULL),
			  workers },
		};
		int rc = run_chain(s, 2, NULL, err, sizeof(err));
		if (rc)
			fail_msg("run: %s", err);
		assert_int_equal(sink_n, n);
		uint8_t *seen = calloc(n, 1);
		for (size_t i = 0; i < sink_n; i++) {
			got *g = &sink_items[i];
			assert_int_equal(g->t0.dtype, GF_F32);
			assert_int_equal(g->t0.ndim, 3);
			assert_int_equal(g->t0.shape[0], 3);
			assert_int_equal(g->t0.shape[1], 24);
			assert_int_equal(g->t0.shape[2], 24);
			assert_int_equal(g->label, label_of(g->key, 4));
			assert_int_equal(g->epoch, 0);
			assert_int_equal(g->pos, i + 1); /* order restored across workers */
			assert_true(g->sum == want[g->key]); /* same pixels whatever the worker count */
			seen[g->key]++;
		}
		for (size_t k = 0; k < n; k++)
			assert_int_equal(seen[k], 1);
		free(seen);
	}
	free(want);
	/* raw records pass through the same transforms, own size by default */
	sink_reset();
	gf_transform tr = { 0 };
	uint64_t *wr = direct_sums(raw_path, &tr, 1, 0, &n);
	step s[2] = {
		{ "lmdb_reader", NULL, "samples", kv("path", gf_value_str(raw_path), "epochs", gf_value_int(1), NULL), 1 },
		{ "jpeg_decode", "records", "samples", gf_value_map(), 2 },
	};
	assert_int_equal(run_chain(s, 2, NULL, err, sizeof(err)), 0);
	assert_int_equal(sink_n, n);
	for (size_t i = 0; i < sink_n; i++) {
		assert_int_equal(sink_items[i].t0.shape[1], 12);
		assert_true(sink_items[i].sum == wr[sink_items[i].key]);
	}
	free(wr);
}

/* A copy of the JPEG dataset with some records' JPEG bytes spoiled:
 * with keep_crc = 0 the records lose their checksums (as in shards written
 * before records had one), so what catches the damage is the decoder; with
 * keep_crc = 1 the checksum, written before the damage, catches it. `at`
 * is the spoiled range's offset in the JPEG bytes, from its end when
 * negative (the entropy-coded data, which TurboJPEG decodes regardless). */
static char *spoiled_at(int every, int keep_crc, long at)
{
	char *out = path_fmt("%s/spoiled-%d-%d", dir, every, keep_crc);
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(jpg_path, &ds), 0);
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	gf_writer_opts wo = { .nclasses = m->nclasses, .overwrite = 1 };
	gf_dataset_writer *w;
	assert_int_equal(gf_dataset_writer_open(out, &wo, &w), 0);
	for (uint64_t k = 0; k < m->count; k++) {
		gf_record r;
		assert_int_equal(gf_dataset_get(ds, k, &r), 0);
		uint8_t *v = malloc(r.value_len);
		size_t len = r.value_len;
		memcpy(v, r.value, len);
		if (!keep_crc && (r.h.flags & GF_RECORD_CRC32C)) { /* drop flag and checksum */
			v[18] &= (uint8_t)~GF_RECORD_CRC32C;
			len -= 4;
		}
		long off = at >= 0 ? at : (long)r.h.payload + at;
		if (k % (uint64_t)every == 7)
			for (int i = 0; i < 40 && at >= 0; i++)
				v[GF_RECORD_HEADER_SIZE + off + i] = 0x11; /* no SOI marker: corrupt JPEG */
		if (k % (uint64_t)every == 7 && at < 0)
			for (int i = 0; i < 16; i++)
				v[GF_RECORD_HEADER_SIZE + off + i] ^= 0x01; /* 16 flipped bits of image data */
		assert_int_equal(gf_dataset_writer_add_value(w, r.h.label, v, len), 0);
		free(v);
	}
	assert_int_equal(gf_dataset_writer_finish(w), 0);
	gf_dataset_close(ds);
	return out;
}

static char *spoiled(int every)
{
	return spoiled_at(every, 0, 0);
}

static void test_stage_bad(void **st)
{
	(void)st;
	char err[1024];
	/* 1 of 120 corrupt: skipped, counted, the others arrive in order */
	char *p1 = spoiled(1000);
	sink_reset();
	step s[2] = {
		{ "lmdb_reader", NULL, "samples", kv("path", gf_value_str(p1), "epochs", gf_value_int(1), "shuffle",
		                                     gf_value_bool(0), NULL), 1 },
		{ "jpeg_decode", "records", "samples", kv("size", gf_value_int(16), NULL), 2 },
	};
	int rc = run_chain(s, 2, NULL, err, sizeof(err));
	if (rc)
		fail_msg("run: %s", err);
	assert_int_equal(sink_n, 119);
	for (size_t i = 0; i < sink_n; i++) {
		assert_int_equal(sink_items[i].key, i < 7 ? i : i + 1);
		assert_int_equal(sink_items[i].ntensors, 1);
	}
	/* 1 in 10 corrupt: above 1%, the stage fails with a clear message */
	char *p2 = spoiled(10);
	sink_reset();
	step s2[2] = {
		{ "lmdb_reader", NULL, "samples", kv("path", gf_value_str(p2), "epochs", gf_value_int(1), NULL), 1 },
		{ "jpeg_decode", "records", "samples", kv("size", gf_value_int(16), NULL), 1 },
	};
	assert_int_equal(run_chain(s2, 2, NULL, err, sizeof(err)), GF_EFAIL);
	if (!strstr(err, "max_bad_fraction") || !strstr(err, "corrupt JPEG") || !strstr(err, "/shard-00000 key"))
		fail_msg("unexpected: %s", err);
	free(p1);
	free(p2);
}

/* 16 flipped bits in a JPEG's image data: the record's checksum catches
 * them in the reader (skipped and counted, naming shard, key and
 * checksums), before any decoder sees the bytes; with checksums = false
 * the reader passes them on as before. */
static void test_stage_checksum(void **st)
{
	(void)st;
	char err[1024];
	char *p = spoiled_at(1000, 1, -120);
	for (int on = 1; on >= 0; on--) {
		sink_reset();
		step s[1] = {
			{ "lmdb_reader", NULL, "samples", kv("path", gf_value_str(p), "epochs", gf_value_int(1), "shuffle",
			                                     gf_value_bool(0), "checksums", gf_value_bool(on), NULL), 1 },
		};
		if (run_chain(s, 1, NULL, err, sizeof(err)))
			fail_msg("run: %s", err);
		assert_int_equal(sink_n, on ? 119 : 120);
		for (size_t i = 0; i < sink_n; i++)
			assert_int_equal(sink_items[i].key, !on || i < 7 ? i : i + 1);
	}
	free(p);
}

/* The same damage with jpeg_decode after the reader: every consumer checks
 * the CRC, so the reader passes it along and the decoder workers check it
 * before decoding (also through a label_shard); the record is skipped,
 * counted and named by the decoder, which fails above max_bad_fraction
 * naming the mismatch. With checksums = false this damage (at the end of
 * the entropy-coded data) is still caught as a corrupt JPEG. */
static void test_stage_checksum_decoder(void **st)
{
	(void)st;
	char err[1024];
	char *p = spoiled_at(1000, 1, -120);
	for (int mode = 0; mode < 3; mode++) { /* 0: on, 1: on through label_shard, 2: off */
		sink_reset();
		step s[3] = {
			{ "lmdb_reader", NULL, "samples", kv("path", gf_value_str(p), "epochs", gf_value_int(1), "shuffle",
			                                     gf_value_bool(0), "checksums", gf_value_bool(mode < 2), NULL), 1 },
			{ "label_shard", "records", "records", kv("parts", gf_value_int(1), "part", gf_value_int(0), NULL), 1 },
			{ "jpeg_decode", "records", "samples", kv("size", gf_value_int(16), NULL), 2 },
		};
		if (mode != 1) {
			gf_value_free(&s[1].params);
			s[1] = s[2];
		}
		if (run_chain(s, mode == 1 ? 3 : 2, NULL, err, sizeof(err)))
			fail_msg("run: %s", err);
		assert_int_equal(sink_n, 119);
		for (size_t i = 0; i < sink_n; i++) {
			assert_int_equal(sink_items[i].key, i < 7 ? i : i + 1);
			assert_int_equal(sink_items[i].ntensors, 1);
		}
	}
	/* 1 in 10 damaged: the decoder fails, naming shard, key and the mismatch */
	char *p2 = spoiled_at(10, 1, -120);
	sink_reset();
	step s2[2] = {
		{ "lmdb_reader", NULL, "samples", kv("path", gf_value_str(p2), "epochs", gf_value_int(1), NULL), 1 },
		{ "jpeg_decode", "records", "samples", kv("size", gf_value_int(16), NULL), 2 },
	};
	assert_int_equal(run_chain(s2, 2, NULL, err, sizeof(err)), GF_EFAIL);
	if (!strstr(err, "max_bad_fraction") || !strstr(err, "payload checksum mismatch") ||
	    !strstr(err, "/shard-00000 key"))
		fail_msg("unexpected: %s", err);
	free(p);
	free(p2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_raw_identity),
		cmocka_unit_test(test_resize),
		cmocka_unit_test(test_crop_flip),
		cmocka_unit_test(test_jpeg),
		cmocka_unit_test(test_jpeg_header),
		cmocka_unit_test(test_simd_matches_scalar),
	};
	const struct CMUnitTest stage_tests[] = {
		cmocka_unit_test(test_stage_workers),
		cmocka_unit_test(test_stage_bad),
		cmocka_unit_test(test_stage_checksum),
		cmocka_unit_test(test_stage_checksum_decoder),
	};
	int rc = cmocka_run_group_tests(tests, setup, NULL);
	rc |= cmocka_run_group_tests(stage_tests, setup_stage, teardown_stage);
	teardown(NULL);
	return rc;
}
