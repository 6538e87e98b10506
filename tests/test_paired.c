/* Paired data (pix2pix): pair records (GF_RECORD_PAIR) and their header
 * checks, gf_decode_pair (one crop, resize and flip for both halves; each
 * half equal to decoding it alone; JPEG pairs at a reduced DCT scale), the
 * `paired` converter on A/ B/ folders (bad pairs counted by kind: size
 * mismatch, missing partner, unreadable) and on AB images with
 * direction = BtoA, and the edge maps of edges2fashion.
 */
#include <math.h>
#include <sys/stat.h>

#include "test_shard_util.h"

#include "../datasets/convert.h"

static char *dir;

static int setup(void **st)
{
	(void)st;
	dir = tmpdir_make();
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	gf_remove_tree(dir);
	free(dir);
	return 0;
}

/* A (x, y) and B = 250 - A: B's value after any linear resampling is 250
 * minus A's at the same place, so A + B tells whether both halves got the
 * same window and flip. */
static uint8_t pa(int x, int y)
{
	return (uint8_t)((x * 23 + y * 41 + (x * y) % 7 * 9) % 250);
}

/* The AB image (2w x h gray) of that pair. */
static void make_ab(uint8_t *ab, int w, int h)
{
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			ab[y * 2 * w + x] = pa(x, y);
			ab[y * 2 * w + w + x] = (uint8_t)(250 - pa(x, y));
		}
}

static void test_header(void **st)
{
	(void)st;
	uint8_t out[GF_RECORD_HEADER_SIZE];
	gf_record_header h = { .label = -1, .encoding = GF_ENC_RAW, .height = 3, .width = 5, .channels = 1,
		                   .payload = 15, .flags = GF_RECORD_PAIR };
	assert_int_equal(gf_record_header_write(&h, out), GF_EPARAM); /* odd width */
	assert_non_null(strstr(gf_errmsg(), "odd width"));
	h.width = 6;
	h.payload = 18;
	assert_int_equal(gf_record_header_write(&h, out), 0);
	uint8_t value[GF_RECORD_HEADER_SIZE + 18] = { 0 };
	memcpy(value, out, sizeof(out));
	gf_record_header r;
	assert_int_equal(gf_record_parse(value, sizeof(value), &r, NULL), 0);
	assert_int_equal(r.flags, GF_RECORD_PAIR);
	value[18] |= 0x04; /* an unknown flag is still refused */
	assert_int_equal(gf_record_parse(value, sizeof(value), &r, NULL), GF_ECORRUPT);
	/* gf_pair_shape: one half's output shape; a plain record is refused */
	gf_transform t = { 0 };
	int c, oh, ow;
	h.flags = GF_RECORD_PAIR;
	assert_int_equal(gf_pair_shape(&t, &h, &c, &oh, &ow), 0);
	assert_int_equal(c, 1);
	assert_int_equal(oh, 3);
	assert_int_equal(ow, 3);
	h.flags = 0;
	assert_int_equal(gf_pair_shape(&t, &h, &c, &oh, &ow), GF_EPARAM);
}

static void test_decode_pair(void **st)
{
	(void)st;
	enum { W = 20, H = 16, O = 8 };
	uint8_t ab[2 * W * H], a_only[W * H];
	make_ab(ab, W, H);
	for (int y = 0; y < H; y++)
		memcpy(a_only + y * W, ab + y * 2 * W, W);
	gf_decoder *d;
	assert_int_equal(gf_decoder_create(&d), 0);
	gf_record_header hp = { .label = -1, .encoding = GF_ENC_RAW, .height = H, .width = 2 * W, .channels = 1,
		                    .payload = sizeof(ab), .flags = GF_RECORD_PAIR };
	gf_record_header ha = hp;
	ha.width = W;
	ha.payload = sizeof(a_only);
	ha.flags = 0;
	static float out[2 * O * O], ref[O * O];
	int flipped = 0, moved = 0;
	for (int mode = 0; mode < 2; mode++)
		for (uint64_t rnd = 1; rnd < 40; rnd += 3) {
			uint64_t r = rnd * 0x9e3779b97f4a7c15ull;
			gf_transform t = { .height = O, .width = O, .channels = 1, .crop = GF_CROP_RANDOM, .flip = 1,
				               .resize = mode ? GF_RESIZE_BILINEAR : GF_RESIZE_AREA };
			assert_int_equal(gf_decode_pair(d, &t, &hp, ab, r, out, 2 * O * O), 0);
			assert_int_equal(gf_decode_record(d, &t, &ha, a_only, r, ref, O * O), 0);
			for (int i = 0; i < O * O; i++) {
				/* A half = A decoded alone with the same random draw */
				assert_float_equal(out[i], ref[i], 0.0f);
				/* B = 250 - A at the same place: same window, same flip */
				float a = (out[i] + 1) * 127.5f, b = (out[O * O + i] + 1) * 127.5f;
				assert_float_equal(a + b, 250.0f, 2e-3f);
			}
			flipped += (int)(r >> 63);
			moved += (int)((r & 0xffffffffu) % (W - H + 1)) != 0;
		}
	assert_true(flipped > 0 && moved > 0); /* the draws did flip and shift the window */
	/* too small an output buffer */
	gf_transform t = { .height = O, .width = O, .channels = 1 };
	assert_int_equal(gf_decode_pair(d, &t, &hp, ab, 1, out, 2 * O * O - 1), GF_ESHAPE);

	/* JPEG pair 8x larger than the output: decoded once at a reduced DCT
	 * scale; each half stays within JPEG error of the raw pair's */
	enum { JW = 128, JH = 128 };
	uint8_t *big = malloc(2 * JW * JH);
	make_ab(big, JW, JH);
	const uint8_t *jpg;
	size_t len;
	assert_int_equal(gf_jpeg_encode(d, big, 2 * JW, JH, 1, 98, GF_SUBSAMP_444, &jpg, &len), 0);
	uint8_t *jcopy = malloc(len);
	memcpy(jcopy, jpg, len);
	gf_record_header hj = { .label = -1, .encoding = GF_ENC_JPEG, .height = JH, .width = 2 * JW, .channels = 1,
		                    .payload = (uint32_t)len, .flags = GF_RECORD_PAIR };
	gf_record_header hr = { .label = -1, .encoding = GF_ENC_RAW, .height = JH, .width = 2 * JW, .channels = 1,
		                    .payload = 2 * JW * JH, .flags = GF_RECORD_PAIR };
	static float jo[2 * 16 * 16], ro[2 * 16 * 16];
	gf_transform ts = { .height = 16, .width = 16, .channels = 1 };
	assert_int_equal(gf_decode_pair(d, &ts, &hj, jcopy, 5, jo, sizeof(jo) / 4), 0);
	assert_int_equal(gf_decode_pair(d, &ts, &hr, big, 5, ro, sizeof(ro) / 4), 0);
	double worst = 0;
	for (size_t i = 0; i < sizeof(jo) / 4; i++)
		worst = fmax(worst, fabs((double)jo[i] - ro[i]) * 127.5);
	assert_true(worst < 12.0); /* gray levels; a half shifted by one column would be far off */
	free(big);
	free(jcopy);
	gf_decoder_destroy(d);
}

/* ---- the paired converter ---- */

static void save_png(const char *sub, const char *name, const uint8_t *pix, int w, int h, int c)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s/%s", dir, sub, name);
	assert_int_equal(gf_png_save(p, pix, w, h, c), 0);
}

static void test_convert_folders(void **st)
{
	(void)st;
	enum { W = 12, H = 10 };
	char p[4096];
	snprintf(p, sizeof(p), "%s/ab", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/ab/A", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/ab/B", dir);
	mkdir(p, 0755);
	uint8_t a[W * H], b[W * H], big[2 * W * 2 * H];
	for (int i = 0; i < W * H; i++) {
		a[i] = pa(i % W, i / W);
		b[i] = (uint8_t)(250 - a[i]);
	}
	memset(big, 7, sizeof(big));
	/* good pairs 1, 2 (B as .jpg-named PNG is not used: names match on the stem) and 4 */
	save_png("ab/A", "1.png", a, W, H, 1);
	save_png("ab/B", "1.png", b, W, H, 1);
	save_png("ab/A", "2.png", b, W, H, 1);
	save_png("ab/B", "2.png", a, W, H, 1);
	save_png("ab/A", "4.png", a, W, H, 1);
	save_png("ab/B", "4.png", b, W, H, 1);
	save_png("ab/A", "3.png", a, W, H, 1); /* size mismatch */
	save_png("ab/B", "3.png", big, 2 * W, 2 * H, 1);
	save_png("ab/A", "5.png", a, W, H, 1); /* missing partner (A side) */
	save_png("ab/B", "6.png", b, W, H, 1); /* missing partner (B side) */
	save_png("ab/A", "7.png", a, W, H, 1); /* unreadable B */
	snprintf(p, sizeof(p), "%s/ab/B/7.png", dir);
	FILE *f = fopen(p, "wb");
	fputs("not a png", f);
	fclose(f);
	gf_convert_opts o;
	gf_convert_defaults(&o);
	o.quiet = 1;
	gf_convert_stats s;
	char out[4096];
	snprintf(out, sizeof(out), "%s/ab.ds", dir);
	snprintf(p, sizeof(p), "%s/ab", dir);
	assert_int_equal(gf_convert_paired(p, out, &o, 0, &s), 0);
	assert_int_equal(s.records, 3);
	assert_int_equal(s.bad_size, 1);
	assert_int_equal(s.bad_missing, 2);
	assert_int_equal(s.bad_unreadable, 1);
	assert_int_equal(s.skipped, 4);
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	assert_int_equal(gf_dataset_metadata(ds)->count, 3);
	/* the five matched stems 1 2 3 4 7 in a seeded order (shuffle, the
	 * default), of which 3 and 7 are bad: the records are the others in that
	 * order; pairs 1 and 4 hold (a, b), pair 2 (b, a) */
	static const int stem[5] = { 1, 2, 3, 4, 7 };
	int order[3], first_is_a[3], nw = 0;
	for (uint64_t k = 0; k < 5; k++) {
		int st_k = stem[gf_permute(k, 5, o.seed)];
		if (st_k != 3 && st_k != 7) {
			order[nw] = st_k;
			first_is_a[nw++] = st_k != 2;
		}
	}
	assert_int_equal(nw, 3);
	for (int k = 0; k < 3; k++) {
		gf_record r;
		assert_int_equal(gf_dataset_get(ds, (uint64_t)k, &r), 0);
		assert_int_equal(r.h.flags & GF_RECORD_PAIR, GF_RECORD_PAIR);
		assert_int_equal(r.h.width, 2 * W);
		assert_int_equal(r.h.height, H);
		const uint8_t *left = first_is_a[k] ? a : b, *right = first_is_a[k] ? b : a;
		for (int y = 0; y < H; y++) {
			assert_memory_equal(r.payload + y * 2 * W, left + y * W, W);
			assert_memory_equal(r.payload + y * 2 * W + W, right + y * W, W);
		}
	}
	gf_dataset_close(ds);
	/* the same with direction = BtoA: halves swapped */
	snprintf(out, sizeof(out), "%s/ba.ds", dir);
	assert_int_equal(gf_convert_paired(p, out, &o, 1, &s), 0);
	assert_int_equal(s.records, 3);
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	gf_record r;
	assert_int_equal(gf_dataset_get(ds, 0, &r), 0); /* the same order, halves swapped */
	assert_memory_equal(r.payload, first_is_a[0] ? b : a, W);
	assert_memory_equal(r.payload + W, first_is_a[0] ? a : b, W);
	gf_dataset_close(ds);
	/* shuffle = 0: the pairs in name order (1, 2, 4) */
	o.shuffle = 0;
	snprintf(out, sizeof(out), "%s/ab-names.ds", dir);
	assert_int_equal(gf_convert_paired(p, out, &o, 0, &s), 0);
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	for (int k = 0; k < 3; k++) {
		assert_int_equal(gf_dataset_get(ds, (uint64_t)k, &r), 0);
		assert_memory_equal(r.payload, k == 1 ? b : a, W);
	}
	(void)order;
	gf_dataset_close(ds);
}

static void test_convert_ab(void **st)
{
	(void)st;
	enum { W = 9, H = 7 };
	char p[4096];
	snprintf(p, sizeof(p), "%s/abimg", dir);
	mkdir(p, 0755);
	uint8_t ab[2 * W * H * 3], odd[(2 * W + 1) * H * 3];
	for (int i = 0; i < 2 * W * H * 3; i++)
		ab[i] = (uint8_t)(i * 13 % 256);
	memset(odd, 1, sizeof(odd));
	save_png("abimg", "a.png", ab, 2 * W, H, 3);
	save_png("abimg", "b.png", odd, 2 * W + 1, H, 3); /* odd width: not two halves */
	gf_convert_opts o;
	gf_convert_defaults(&o);
	o.quiet = 1;
	gf_convert_stats s;
	char out[4096];
	snprintf(out, sizeof(out), "%s/abimg.ds", dir);
	assert_int_equal(gf_convert_paired(p, out, &o, 1, &s), 0); /* BtoA */
	assert_int_equal(s.records, 1);
	assert_int_equal(s.bad_size, 1);
	gf_dataset *ds;
	gf_record r;
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	assert_int_equal(gf_dataset_get(ds, 0, &r), 0);
	assert_int_equal(r.h.channels, 3);
	for (int y = 0; y < H; y++) { /* left of the record = right of the file */
		assert_memory_equal(r.payload + y * 2 * W * 3, ab + (y * 2 * W + W) * 3, W * 3);
		assert_memory_equal(r.payload + (y * 2 * W + W) * 3, ab + y * 2 * W * 3, W * 3);
	}
	gf_dataset_close(ds);
	/* resize applies per half; JPEG output keeps the flag */
	o.resize_w = o.resize_h = 4;
	o.encoding = GF_ENC_JPEG;
	snprintf(out, sizeof(out), "%s/abimg4.ds", dir);
	assert_int_equal(gf_convert_paired(p, out, &o, 0, &s), 0);
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	assert_int_equal(gf_dataset_get(ds, 0, &r), 0);
	assert_int_equal(r.h.width, 8);
	assert_int_equal(r.h.height, 4);
	assert_int_equal(r.h.encoding, GF_ENC_JPEG);
	assert_int_equal(r.h.flags & GF_RECORD_PAIR, GF_RECORD_PAIR);
	gf_dataset_close(ds);
	/* nothing to pair */
	snprintf(p, sizeof(p), "%s/empty", dir);
	mkdir(p, 0755);
	snprintf(out, sizeof(out), "%s/empty.ds", dir);
	assert_int_equal(gf_convert_paired(p, out, &o, 0, &s), GF_ENOTFOUND);
}

static void test_edge_map(void **st)
{
	(void)st;
	/* a bright square on black: edges on its border only, white elsewhere */
	enum { N = 12 };
	uint8_t g[N * N] = { 0 }, e[N * N];
	for (int y = 4; y < 8; y++)
		for (int x = 4; x < 8; x++)
			g[y * N + x] = 255;
	gf_edge_map(e, g, N, N, 255.0);
	for (int y = 0; y < N; y++)
		for (int x = 0; x < N; x++) {
			int near = x >= 3 && x <= 8 && y >= 3 && y <= 8, inside = x >= 5 && x <= 6 && y >= 5 && y <= 6;
			if (!near || inside)
				assert_int_equal(e[y * N + x], 255);
		}
	assert_int_equal(e[4 * N + 4], 0);  /* corner of the square */
	assert_int_equal(e[6 * N + 3], 0);  /* left border, outside */
	assert_int_equal(e[6 * N + 4], 0);  /* left border, inside */
	/* a gentle ramp (step 10 per pixel: Sobel 80) is not an edge */
	for (int i = 0; i < N * N; i++)
		g[i] = (uint8_t)(10 * (i % N));
	gf_edge_map(e, g, N, N, 255.0);
	for (int i = 0; i < N * N; i++)
		assert_int_equal(e[i], 255);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_decode_pair),
		cmocka_unit_test_setup_teardown(test_convert_folders, setup, teardown),
		cmocka_unit_test_setup_teardown(test_convert_ab, setup, teardown),
		cmocka_unit_test(test_edge_map),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
