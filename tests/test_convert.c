/* Converters: IDX (gzip and plain) round trip bit-exact, JPEG at quality
 * 95 above 35 dB PSNR, a Fashion-MNIST subset from the Debian package
 * (skipped without it), image folders (JPEG kept as is, PNG lossless,
 * unreadable files skipped), shard splitting, the ImageNet-like generator,
 * and the `ganflow dataset` command (info, verify finding a bad record by
 * key, export, fashion-mnist's errors and idempotence; verify's account of
 * checksums with missing, empty and truncated records, info's size of a
 * sparse LMDB, synth refusing what the disk cannot hold).
 */
#include <lmdb.h>
#include <zlib.h>

#include "test_shard_util.h"

#include "../datasets/convert.h"

#define FMNIST "/usr/share/datasets/fashion-mnist"

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

/* ---- IDX ---- */

enum { IN = 53, IR = 7, IC = 5 };

static uint8_t idx_px(int i, int p)
{
	return (uint8_t)((i * 17 + p * 3 + (p % 4) * 50) & 255);
}

/* Writes images (IN, IR, IC) and labels (IN) as IDX files, gzipped or not. */
static void write_idx(const char *images, const char *labels, int gz, int bad_label)
{
	uint8_t hi[16] = { 0, 0, 8, 3, 0, 0, 0, IN, 0, 0, 0, IR, 0, 0, 0, IC };
	uint8_t hl[8] = { 0, 0, 8, 1, 0, 0, 0, IN };
	uint8_t *img = malloc(IN * IR * IC), lab[IN];
	for (int i = 0; i < IN; i++) {
		lab[i] = (uint8_t)(i % 4);
		for (int p = 0; p < IR * IC; p++)
			img[i * IR * IC + p] = idx_px(i, p);
	}
	if (bad_label)
		lab[IN - 1] = 9;
	if (gz) {
		gzFile f = gzopen(images, "wb");
		gzwrite(f, hi, 16);
		gzwrite(f, img, IN * IR * IC);
		gzclose(f);
		f = gzopen(labels, "wb");
		gzwrite(f, hl, 8);
		gzwrite(f, lab, IN);
		gzclose(f);
	} else {
		FILE *f = fopen(images, "wb");
		fwrite(hi, 1, 16, f);
		fwrite(img, 1, IN * IR * IC, f);
		fclose(f);
		f = fopen(labels, "wb");
		fwrite(hl, 1, 8, f);
		fwrite(lab, 1, IN, f);
		fclose(f);
	}
	free(img);
}

static void test_idx_raw(void **st)
{
	(void)st;
	for (int gz = 0; gz < 2; gz++) {
		char *im = path_fmt("%s/img%d", dir, gz), *lb = path_fmt("%s/lab%d", dir, gz), *out = path_fmt("%s/idx%d", dir, gz);
		write_idx(im, lb, gz, 0);
		gf_convert_opts o;
		gf_convert_defaults(&o);
		o.quiet = 1;
		o.shard_records = 20;
		o.workers = 3;
		o.shuffle = gz; /* the gzip pass writes in a seeded random order, the other in the source's */
		o.seed = 7;
		const char *names[4] = { "w", "x", "y", "z" };
		gf_convert_stats s;
		assert_int_equal(gf_convert_idx(im, lb, out, &o, names, 4, &s), 0);
		assert_int_equal(s.records, IN);
		assert_int_equal(s.shards, 3);
		gf_dataset *ds;
		assert_int_equal(gf_dataset_open(out, &ds), 0);
		const gf_dataset_meta *m = gf_dataset_metadata(ds);
		assert_int_equal(m->count, IN);
		assert_int_equal(m->nclasses, 4);
		assert_string_equal(m->class_names[2], "y");
		uint64_t fixed = 0;
		for (uint64_t k = 0; k < IN; k++) {
			gf_record r;
			uint64_t src = gz ? gf_permute(k, IN, 7) : k; /* record k holds input src */
			fixed += src == k;
			assert_int_equal(gf_dataset_get(ds, k, &r), 0);
			assert_int_equal(r.h.encoding, GF_ENC_RAW);
			assert_int_equal(r.h.height, IR);
			assert_int_equal(r.h.width, IC);
			assert_int_equal(r.h.channels, 1);
			assert_int_equal(r.h.label, (int32_t)(src % 4));
			for (int p = 0; p < IR * IC; p++)
				assert_int_equal(r.payload[p], idx_px((int)src, p)); /* bit-exact */
		}
		if (gz)
			assert_true(fixed < IN / 4);
		/* the meta index names exactly the records of each class, whatever the order */
		for (uint32_t c = 0; c < 4; c++) {
			uint64_t pos[IN];
			assert_int_equal(gf_dataset_class_positions(ds, c, pos), 0);
			for (uint64_t j = 0; j < m->class_count[c]; j++) {
				gf_record r;
				assert_int_equal(gf_dataset_get(ds, pos[j], &r), 0);
				assert_int_equal(r.h.label, (int32_t)c);
			}
		}
		gf_dataset_close(ds);
		free(im);
		free(lb);
		free(out);
	}
}

static void test_idx_errors(void **st)
{
	(void)st;
	char *im = path_fmt("%s/bimg", dir), *lb = path_fmt("%s/blab", dir), *out = path_fmt("%s/bidx", dir);
	write_idx(im, lb, 1, 1);
	gf_convert_opts o;
	gf_convert_defaults(&o);
	o.quiet = 1;
	gf_convert_stats s;
	const char *names[4] = { "a", "b", "c", "d" };
	assert_int_equal(gf_convert_idx(im, lb, out, &o, names, 4, &s), GF_EPARAM);
	if (!strstr(gf_errmsg(), lb) || !strstr(gf_errmsg(), "label 9"))
		fail_msg("unexpected: %s", gf_errmsg());
	assert_int_not_equal(access(out, F_OK), 0); /* nothing written */
	/* images and labels swapped: wrong dimensions, named */
	assert_int_equal(gf_convert_idx(lb, im, out, &o, NULL, 0, &s), GF_ECORRUPT);
	if (!strstr(gf_errmsg(), lb))
		fail_msg("unexpected: %s", gf_errmsg());
	/* a missing file, named */
	char *none = path_fmt("%s/none.gz", dir);
	assert_int_not_equal(gf_convert_idx(none, lb, out, &o, NULL, 0, &s), 0);
	if (!strstr(gf_errmsg(), none))
		fail_msg("unexpected: %s", gf_errmsg());
	free(none);
	free(im);
	free(lb);
	free(out);
}

/* ---- Fashion-MNIST (skipped without the Debian package) ---- */

static int have_fmnist(void)
{
	return access(FMNIST "/t10k-images-idx3-ubyte.gz", R_OK) == 0 &&
	       access(FMNIST "/t10k-labels-idx1-ubyte.gz", R_OK) == 0;
}

static void test_fmnist_subset(void **st)
{
	(void)st;
	if (!have_fmnist())
		skip();
	uint8_t *ib;
	size_t il;
	assert_int_equal(gf_read_file(FMNIST "/t10k-images-idx3-ubyte.gz", 1, &ib, &il), 0);
	assert_int_equal(il, 16 + 10000 * 784);
	char *raw = path_fmt("%s/fm-raw", dir), *jpg = path_fmt("%s/fm-jpg", dir);
	gf_convert_opts o;
	gf_convert_defaults(&o);
	o.quiet = 1;
	o.limit = 500;
	gf_convert_stats s;
	assert_int_equal(gf_convert_idx(FMNIST "/t10k-images-idx3-ubyte.gz", FMNIST "/t10k-labels-idx1-ubyte.gz", raw, &o,
	                                NULL, 0, &s),
	                 0);
	o.encoding = GF_ENC_JPEG;
	o.quality = 95;
	assert_int_equal(gf_convert_idx(FMNIST "/t10k-images-idx3-ubyte.gz", FMNIST "/t10k-labels-idx1-ubyte.gz", jpg, &o,
	                                NULL, 0, &s),
	                 0);
	gf_dataset *dr, *dj;
	gf_decoder *dec;
	assert_int_equal(gf_dataset_open(raw, &dr), 0);
	assert_int_equal(gf_dataset_open(jpg, &dj), 0);
	assert_int_equal(gf_decoder_create(&dec), 0);
	assert_int_equal(gf_dataset_metadata(dr)->count, 500);
	assert_int_equal(gf_dataset_metadata(dj)->enc_count[GF_ENC_JPEG], 500);
	double sum = 0, worst = 1e9;
	for (uint64_t k = 0; k < 500; k++) {
		gf_record r, j;
		assert_int_equal(gf_dataset_get(dr, k, &r), 0);
		uint64_t src = gf_permute(k, 500, o.seed); /* the first 500, shuffled */
		assert_memory_equal(r.payload, ib + 16 + src * 784, 784); /* raw: bit-exact */
		assert_int_equal(gf_dataset_get(dj, k, &j), 0);
		assert_int_equal(j.h.label, r.h.label);
		const uint8_t *px;
		int w, h;
		assert_int_equal(gf_decode_pixels(dec, &j.h, j.payload, 1, &px, &w, &h), 0);
		double p = psnr_u8(px, r.payload, 784);
		sum += p;
		if (p < worst)
			worst = p;
	}
	print_message("Fashion-MNIST JPEG q95: PSNR mean %.1f dB, worst %.1f dB\n", sum / 500, worst);
	assert_true(worst > 35.0);
	gf_decoder_destroy(dec);
	gf_dataset_close(dr);
	gf_dataset_close(dj);
	free(ib);
	free(raw);
	free(jpg);
}

/* ---- image folders ---- */

static void write_file(const char *path, const void *b, size_t n)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, n, f), n);
	fclose(f);
}

static void test_folder(void **st)
{
	(void)st;
	char *root = path_fmt("%s/folder", dir);
	char *cat = path_fmt("%s/cat", root), *dog = path_fmt("%s/dog", root), *sub = path_fmt("%s/dog/more", root);
	mkdir(root, 0777);
	mkdir(cat, 0777);
	mkdir(dog, 0777);
	mkdir(sub, 0777);
	gf_decoder *dec;
	assert_int_equal(gf_decoder_create(&dec), 0);
	uint8_t pix[16 * 12 * 3];
	/* cat: 3 PNG (RGB), dog: 2 JPEG + 1 gray PNG in a sub-folder */
	uint8_t *jpgs[2];
	size_t jlen[2];
	for (int i = 0; i < 3; i++) {
		smooth_image(pix, 16, 12, 3, (uint64_t)i);
		char *p = path_fmt("%s/c%d.png", cat, i);
		assert_int_equal(gf_png_save(p, pix, 16, 12, 3), 0);
		free(p);
	}
	for (int i = 0; i < 2; i++) {
		const uint8_t *j;
		smooth_image(pix, 16, 12, 3, 10 + (uint64_t)i);
		assert_int_equal(gf_jpeg_encode(dec, pix, 16, 12, 3, 90, GF_SUBSAMP_420, &j, &jlen[i]), 0);
		jpgs[i] = malloc(jlen[i]);
		memcpy(jpgs[i], j, jlen[i]);
		char *p = path_fmt("%s/d%d.JPG", dog, i);
		write_file(p, jpgs[i], jlen[i]);
		free(p);
	}
	smooth_image(pix, 16, 12, 1, 20);
	char *p = path_fmt("%s/g.png", sub);
	assert_int_equal(gf_png_save(p, pix, 16, 12, 1), 0);
	free(p);
	p = path_fmt("%s/notes.txt", cat); /* ignored: not an image name */
	write_file(p, "hello", 5);
	free(p);
	p = path_fmt("%s/broken.jpg", cat); /* skipped: not decodable */
	write_file(p, "\xff\xd8\xff garbage", 12);
	free(p);

	/* raw: PNG pixels exact, JPEGs decoded */
	char *out = path_fmt("%s/folder-raw", dir);
	gf_convert_opts o;
	gf_convert_defaults(&o);
	o.quiet = 1;
	o.workers = 2;
	o.shuffle = 0; /* the source's order: sorted paths, class by class */
	gf_convert_stats s;
	assert_int_equal(gf_convert_folder(root, out, &o, &s), 0);
	assert_int_equal(s.records, 6);
	assert_int_equal(s.skipped, 1);
	assert_int_equal(s.ignored, 1);
	gf_dataset *ds;
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	assert_int_equal(m->nclasses, 2);
	assert_string_equal(m->class_names[0], "cat");
	assert_string_equal(m->class_names[1], "dog");
	assert_int_equal(m->class_count[0], 3);
	assert_int_equal(m->class_count[1], 3);
	gf_record r;
	/* sorted: cat/broken.jpg (skipped), cat/c0..c2.png, then dog/d0.JPG, dog/d1.JPG, dog/more/g.png */
	for (uint64_t k = 0; k < 3; k++) {
		assert_int_equal(gf_dataset_get(ds, k, &r), 0);
		smooth_image(pix, 16, 12, 3, k);
		assert_int_equal(r.h.channels, 3);
		assert_memory_equal(r.payload, pix, sizeof(pix));
	}
	assert_int_equal(gf_dataset_get(ds, 5, &r), 0);
	assert_int_equal(r.h.channels, 1);
	smooth_image(pix, 16, 12, 1, 20);
	assert_memory_equal(r.payload, pix, 16 * 12);
	assert_int_equal(r.h.label, 1);

	/* shuffled (the default): the same records in the order gf_permute of
	 * the 7 inputs, input 0 (broken.jpg) skipped; the meta index exact */
	char *shuf = path_fmt("%s/folder-shuffled", dir);
	o.shuffle = 1;
	assert_int_equal(gf_convert_folder(root, shuf, &o, &s), 0);
	assert_int_equal(s.records, 6);
	gf_dataset *dsh;
	assert_int_equal(gf_dataset_open(shuf, &dsh), 0);
	uint64_t k = 0;
	for (uint64_t i = 0; i < 7; i++) {
		uint64_t src = gf_permute(i, 7, o.seed);
		if (src == 0)
			continue;
		gf_record a, b;
		assert_int_equal(gf_dataset_get(dsh, k++, &a), 0);
		assert_int_equal(gf_dataset_get(ds, src - 1, &b), 0);
		assert_int_equal(a.h.label, b.h.label);
		assert_int_equal(a.value_len, b.value_len);
		assert_memory_equal(a.value, b.value, a.value_len);
	}
	for (uint32_t c = 0; c < 2; c++) {
		uint64_t pos[3];
		assert_int_equal(gf_dataset_metadata(dsh)->class_count[c], 3);
		assert_int_equal(gf_dataset_class_positions(dsh, c, pos), 0);
		for (int j = 0; j < 3; j++) {
			assert_int_equal(gf_dataset_get(dsh, pos[j], &r), 0);
			assert_int_equal(r.h.label, (int32_t)c);
		}
	}
	gf_dataset_close(dsh);
	free(shuf);
	o.shuffle = 0;
	gf_dataset_close(ds);
	free(out);

	/* jpeg: source JPEGs are stored byte for byte, PNGs encoded */
	out = path_fmt("%s/folder-jpg", dir);
	o.encoding = GF_ENC_JPEG;
	assert_int_equal(gf_convert_folder(root, out, &o, &s), 0);
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(gf_dataset_get(ds, 3 + (uint64_t)i, &r), 0);
		assert_int_equal(r.h.encoding, GF_ENC_JPEG);
		assert_int_equal(r.h.payload, jlen[i]);
		assert_memory_equal(r.payload, jpgs[i], jlen[i]);
	}
	assert_int_equal(gf_dataset_get(ds, 0, &r), 0);
	assert_int_equal(r.h.encoding, GF_ENC_JPEG);
	const uint8_t *px;
	int w, h;
	assert_int_equal(gf_decode_pixels(dec, &r.h, r.payload, 0, &px, &w, &h), 0);
	smooth_image(pix, 16, 12, 3, 0);
	assert_true(psnr_u8(px, pix, sizeof(pix)) > 30.0);
	gf_dataset_close(ds);
	free(out);

	/* resize and gray: every record 8x6x1 */
	out = path_fmt("%s/folder-small", dir);
	o.encoding = GF_ENC_RAW;
	o.resize_w = 8;
	o.resize_h = 6;
	o.channels = 1;
	assert_int_equal(gf_convert_folder(root, out, &o, &s), 0);
	assert_int_equal(gf_dataset_open(out, &ds), 0);
	m = gf_dataset_metadata(ds);
	assert_int_equal(m->max_width, 8);
	assert_int_equal(m->min_width, 8);
	assert_int_equal(m->max_height, 6);
	assert_int_equal(m->max_channels, 1);
	gf_dataset_close(ds);
	free(out);
	for (int i = 0; i < 2; i++)
		free(jpgs[i]);
	gf_decoder_destroy(dec);
	free(root);
	free(cat);
	free(dog);
	free(sub);
}

/* ---- ImageNet-like data ---- */

static void test_synth(void **st)
{
	(void)st;
	char *a = path_fmt("%s/synth-a", dir), *b = path_fmt("%s/synth-b", dir);
	gf_synth_opts so = { .count = 12, .width = 500, .height = 375, .quality = 90, .classes = 5, .seed = 3 };
	gf_convert_opts o;
	gf_convert_defaults(&o);
	o.quiet = 1;
	o.workers = 2;
	o.shard_records = 5;
	o.encoding = GF_ENC_JPEG;
	gf_convert_stats s;
	assert_int_equal(gf_convert_synth(a, &so, &o, &s), 0);
	o.workers = 1;
	assert_int_equal(gf_convert_synth(b, &so, &o, &s), 0);
	assert_int_equal(s.shards, 3);
	gf_dataset *da, *db;
	assert_int_equal(gf_dataset_open(a, &da), 0);
	assert_int_equal(gf_dataset_open(b, &db), 0);
	const gf_dataset_meta *m = gf_dataset_metadata(da);
	assert_int_equal(m->count, 12);
	assert_int_equal(m->enc_count[GF_ENC_JPEG], 12);
	assert_int_equal(m->max_width, 500);
	assert_int_equal(m->max_height, 375);
	double avg = (double)m->payload_bytes / 12;
	print_message("synthetic 500x375 q90 JPEG: %.1f KB on average\n", avg / 1000);
	assert_true(avg > 70e3 && avg < 140e3); /* about 100 KB, like ImageNet photos */
	for (uint64_t k = 0; k < 12; k++) {
		gf_record ra, rb;
		assert_int_equal(gf_dataset_get(da, k, &ra), 0);
		assert_int_equal(gf_dataset_get(db, k, &rb), 0);
		/* the inputs are class by class (i * 5 / 12), written shuffled */
		assert_int_equal(ra.h.label, (int32_t)(gf_permute(k, 12, o.seed) * 5 / 12));
		assert_int_equal(ra.value_len, rb.value_len); /* same seed, same bytes, any worker count */
		assert_memory_equal(ra.value, rb.value, ra.value_len);
	}
	gf_dataset_close(da);
	gf_dataset_close(db);
	/* raw, in class order (shuffle = 0): labels ascending, classes of 2 or 3 */
	char *c = path_fmt("%s/synth-class", dir);
	so = (gf_synth_opts){ .count = 12, .width = 8, .height = 4, .quality = 90, .classes = 5, .seed = 3 };
	o.encoding = GF_ENC_RAW;
	o.shuffle = 0;
	assert_int_equal(gf_convert_synth(c, &so, &o, &s), 0);
	assert_int_equal(gf_dataset_open(c, &da), 0);
	m = gf_dataset_metadata(da);
	assert_int_equal(m->enc_count[GF_ENC_RAW], 12);
	for (uint64_t k = 0; k < 12; k++) {
		gf_record r;
		assert_int_equal(gf_dataset_get(da, k, &r), 0);
		assert_int_equal(r.h.label, (int32_t)(k * 5 / 12));
		assert_int_equal(r.h.payload, 8 * 4 * 3);
	}
	gf_dataset_close(da);
	/* a set the disk cannot hold is refused before anything is written,
	 * with the figures */
	char *huge = path_fmt("%s/synth-huge", dir), *tmp = path_fmt("%s/synth-huge.tmp", dir);
	so.count = 1000000000000ull;
	so.width = so.height = 64;
	o.encoding = GF_ENC_JPEG;
	assert_int_equal(gf_convert_synth(huge, &so, &o, &s), GF_EPARAM);
	if (!strstr(gf_errmsg(), "needs about") || !strstr(gf_errmsg(), "1000000000000 records") ||
	    !strstr(gf_errmsg(), "free"))
		fail_msg("synth of 10^12 records: %s", gf_errmsg());
	assert_int_not_equal(access(huge, F_OK), 0);
	assert_int_not_equal(access(tmp, F_OK), 0);
	free(huge);
	free(tmp);
	free(c);
	free(a);
	free(b);
}

/* ---- the command ---- */

static void test_command(void **st)
{
	(void)st;
	const char *g = ganflow_bin();
	if (access(g, X_OK))
		skip();
	char *ds = path_fmt("%s/cmd-ds", dir), *log = path_fmt("%s/cmd.log", dir), *txt;
	assert_int_equal(run_cmd("%s dataset synth %s count=30 width=64 height=48 classes=3 shard_records=10 "
	                         ">%s 2>&1",
	                         g, ds, log),
	                 0);
	assert_int_equal(run_cmd("%s dataset info %s >%s 2>&1", g, ds, log), 0);
	txt = slurp(log);
	if (!strstr(txt, "records    30") || !strstr(txt, "jpeg 30") || !strstr(txt, "shard-00002") ||
	    !strstr(txt, "checksums  CRC-32C of every payload"))
		fail_msg("info printed:\n%s", txt);
	free(txt);
	assert_int_equal(run_cmd("%s dataset verify %s >%s 2>&1", g, ds, log), 0);
	/* spoil record 13's JPEG in place: verify names it and fails */
	gf_dataset *d;
	gf_record r;
	assert_int_equal(gf_dataset_open(ds, &d), 0);
	assert_int_equal(gf_dataset_get(d, 13, &r), 0);
	uint64_t off = r.offset + GF_RECORD_HEADER_SIZE;
	char *file = strdup(gf_dataset_shard(d, r.shard)->file);
	gf_dataset_close(d);
	int fd = open(file, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "\0\0\0\0", 4, (off_t)off), 4);
	close(fd);
	assert_int_equal(run_cmd("%s dataset verify %s >%s 2>&1", g, ds, log), 1);
	txt = slurp(log);
	if (!strstr(txt, "shard-00001 key 13:") || !strstr(txt, "1 bad"))
		fail_msg("verify printed:\n%s", txt);
	free(txt);
	/* one flipped bit in the middle of record 21's JPEG data: the checksum
	 * names it, whether or not the damage still decodes */
	assert_int_equal(gf_dataset_open(ds, &d), 0);
	assert_int_equal(gf_dataset_get(d, 21, &r), 0);
	off = r.offset + GF_RECORD_HEADER_SIZE + r.h.payload / 2;
	uint8_t byte = r.payload[r.h.payload / 2] ^ 0x01;
	free(file);
	file = strdup(gf_dataset_shard(d, r.shard)->file);
	gf_dataset_close(d);
	fd = open(file, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, &byte, 1, (off_t)off), 1);
	close(fd);
	assert_int_equal(run_cmd("%s dataset verify %s >%s 2>&1", g, ds, log), 1);
	txt = slurp(log);
	if (!strstr(txt, "shard-00002 key 21: payload checksum mismatch") || !strstr(txt, "2 bad") ||
	    !strstr(txt, "payload checksums: every record"))
		fail_msg("verify printed:\n%s", txt);
	free(txt);
	/* every label out of range (9 of 3 classes): each record is named bad,
	 * and the checksums their headers announce are still counted */
	char *bl = path_fmt("%s/cmd-labels", dir);
	assert_int_equal(run_cmd("%s dataset synth %s count=5 width=16 height=16 classes=3 >%s 2>&1", g, bl, log), 0);
	assert_int_equal(gf_dataset_open(bl, &d), 0);
	free(file);
	file = strdup(gf_dataset_shard(d, 0)->file);
	fd = open(file, O_WRONLY);
	assert_true(fd >= 0);
	for (uint64_t k = 0; k < 5; k++) {
		static const uint8_t nine[4] = { 9, 0, 0, 0 }; /* i32 label at offset 4 of the header */
		assert_int_equal(gf_dataset_locate(d, k, &r), 0);
		assert_int_equal(pwrite(fd, nine, 4, (off_t)(r.offset + 4)), 4);
	}
	close(fd);
	gf_dataset_close(d);
	assert_int_equal(run_cmd("%s dataset verify %s >%s 2>&1", g, bl, log), 1);
	txt = slurp(log);
	if (!strstr(txt, "key 4: label 9 >= class count 3") || !strstr(txt, "5 records verified, 5 bad") ||
	    !strstr(txt, "payload checksums: every record"))
		fail_msg("verify printed:\n%s", txt);
	free(txt);
	free(bl);
	/* synth order=class: records class by class; order and shuffle must agree */
	char *oc = path_fmt("%s/cmd-class", dir);
	assert_int_equal(run_cmd("%s dataset synth %s count=6 classes=3 width=8 height=8 order=class >%s 2>&1", g, oc, log),
	                 0);
	assert_int_equal(gf_dataset_open(oc, &d), 0);
	for (uint64_t k = 0; k < 6; k++) {
		assert_int_equal(gf_dataset_get(d, k, &r), 0);
		assert_int_equal(r.h.label, (int32_t)(k / 2));
	}
	gf_dataset_close(d);
	assert_int_equal(run_cmd("%s dataset synth %s count=6 order=class shuffle=1 force=1 >%s 2>&1", g, oc, log), 2);
	txt = slurp(log);
	assert_non_null(strstr(txt, "order=class contradicts shuffle=1"));
	free(txt);
	free(oc);
	/* export writes class folders: key 1 is input gf_permute(1, 30, seed 1) of
	 * the 30 inputs in class order (10 a class) */
	char *ex = path_fmt("%s/export", dir),
	     *one = path_fmt("%s/export/%d/00000001.jpg", dir, (int)(gf_permute(1, 30, 1) * 3 / 30));
	assert_int_equal(run_cmd("%s dataset export %s %s >%s 2>&1", g, ds, ex, log), 0);
	assert_int_equal(access(one, R_OK), 0);
	/* usage and option errors */
	assert_int_equal(run_cmd("%s dataset info %s bogus=1 >%s 2>&1", g, ds, log), 2);
	txt = slurp(log);
	assert_non_null(strstr(txt, "unknown option 'bogus'"));
	free(txt);
	assert_int_equal(run_cmd("%s dataset info %s/nope >%s 2>&1", g, ds, log), 1);
	txt = slurp(log);
	assert_non_null(strstr(txt, "nope"));
	free(txt);
	/* fashion-mnist without its files: names them and the package */
	char *fm = path_fmt("%s/fm", dir);
	assert_int_equal(run_cmd("%s dataset fashion-mnist out=%s src=%s/none >%s 2>&1", g, fm, dir, log), 1);
	txt = slurp(log);
	if (!strstr(txt, "train-images-idx3-ubyte.gz is missing"))
		fail_msg("fashion-mnist printed:\n%s", txt);
	free(txt);
	free(file);
	free(ex);
	free(one);
	free(fm);
	free(ds);
	free(log);
}

/* verify tells the truth about checksums when records are missing, empty
 * or cut short (every record was written with one: the truncated one's
 * header still says so, the others cannot say); info reports what the
 * files take on disk, not the length of a sparse file; synth refuses a
 * set the disk cannot hold before writing anything. */
static void test_verify_info(void **st)
{
	(void)st;
	const char *g = ganflow_bin();
	if (access(g, X_OK))
		skip();
	char *ds = path_fmt("%s/vi-ds", dir), *log = path_fmt("%s/vi.log", dir), *txt;
	gf_writer_opts wo = { .nclasses = 2, .overwrite = 1 };
	gf_dataset_writer *w;
	assert_int_equal(gf_dataset_writer_open(ds, &wo, &w), 0);
	uint8_t px[4 * 4 * 3], value[GF_RECORD_HEADER_SIZE + sizeof(px) + 4];
	for (int k = 0; k < 8; k++) {
		memset(px, k * 20, sizeof(px));
		gf_record_header h = { .label = k % 2, .encoding = GF_ENC_RAW, .height = 4, .width = 4, .channels = 3,
		                       .payload = sizeof(px) };
		assert_int_equal(gf_dataset_writer_add(w, &h, px), 0);
	}
	/* key 8: record 0's value cut short; key 9: an empty value */
	gf_dataset_writer_finish(w);
	gf_dataset *d;
	gf_record r;
	assert_int_equal(gf_dataset_open(ds, &d), 0);
	assert_int_equal(gf_dataset_get(d, 0, &r), 0);
	memcpy(value, r.value, r.value_len);
	gf_dataset_close(d);
	assert_int_equal(gf_dataset_writer_open(ds, &wo, &w), 0);
	for (int k = 0; k < 8; k++) {
		memset(px, k * 20, sizeof(px));
		gf_record_header h = { .label = k % 2, .encoding = GF_ENC_RAW, .height = 4, .width = 4, .channels = 3,
		                       .payload = sizeof(px) };
		assert_int_equal(gf_dataset_writer_add(w, &h, px), 0);
	}
	assert_int_equal(gf_dataset_writer_add_value(w, 0, value, sizeof(value) - 10), 0);
	assert_int_equal(gf_dataset_writer_add_value(w, 1, value, 0), 0);
	assert_int_equal(gf_dataset_writer_finish(w), 0);
	/* key 3 deleted from the shard: missing */
	char *shard = path_fmt("%s/shard-00000", ds);
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	uint8_t kb[8] = { 0, 0, 0, 0, 0, 0, 0, 3 };
	MDB_val k = { 8, kb };
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_open(env, shard, 0, 0644), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
	assert_int_equal(mdb_del(txn, dbi, &k, NULL), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	assert_int_equal(run_cmd("%s dataset verify %s >%s 2>&1", g, ds, log), 1);
	txt = slurp(log);
	if (!strstr(txt, "10 records verified, 3 bad") ||
	    !strstr(txt, "payload checksums: every record with a readable header (2 bad records without one") ||
	    strstr(txt, "the others have none"))
		fail_msg("verify printed:\n%s", txt);
	free(txt);

	/* a sparse data.mdb 16 GiB long: info says what it takes */
	char *mdb = path_fmt("%s/data.mdb", shard);
	struct stat sb;
	assert_int_equal(stat(mdb, &sb), 0);
	assert_int_equal(truncate(mdb, 16ll << 30), 0);
	assert_int_equal(run_cmd("%s dataset info %s >%s 2>&1", g, ds, log), 0);
	txt = slurp(log);
	char want[128];
	snprintf(want, sizeof(want), "%.1f KiB on disk (files 16.0 GiB long, sparse)", (double)sb.st_blocks * 512 / 1024);
	if (!strstr(txt, want) || strstr(txt, "16.0 GiB on disk"))
		fail_msg("info printed (wanted '%s'):\n%s", want, txt);
	free(txt);

	/* synth of 10^12 records: refused with the figures, nothing written */
	char *huge = path_fmt("%s/vi-huge", dir), *tmp = path_fmt("%s/vi-huge.tmp", dir);
	assert_int_equal(run_cmd("%s dataset synth %s count=1000000000000 width=64 height=64 >%s 2>&1", g, huge, log), 1);
	txt = slurp(log);
	if (!strstr(txt, "needs about") || !strstr(txt, "free") || strstr(txt, "ETA"))
		fail_msg("synth printed:\n%s", txt);
	assert_int_not_equal(access(huge, F_OK), 0);
	assert_int_not_equal(access(tmp, F_OK), 0);
	free(txt);
	free(huge);
	free(tmp);
	free(mdb);
	free(shard);
	free(ds);
	free(log);
}

static void test_fmnist_command(void **st)
{
	(void)st;
	const char *g = ganflow_bin();
	if (access(g, X_OK) || !have_fmnist() || access(FMNIST "/train-images-idx3-ubyte.gz", R_OK))
		skip();
	char *fm = path_fmt("%s/fmnist", dir), *log = path_fmt("%s/fm.log", dir), *txt;
	assert_int_equal(run_cmd("%s dataset fashion-mnist out=%s >%s 2>&1", g, fm, log), 0);
	assert_int_equal(run_cmd("%s dataset fashion-mnist out=%s >%s 2>&1", g, fm, log), 0);
	txt = slurp(log);
	if (!strstr(txt, "up to date (60000 records") || !strstr(txt, "up to date (10000 records"))
		fail_msg("second run printed:\n%s", txt);
	free(txt);
	char *train = path_fmt("%s/train", fm);
	gf_dataset *d;
	assert_int_equal(gf_dataset_open(train, &d), 0);
	const gf_dataset_meta *m = gf_dataset_metadata(d);
	assert_int_equal(m->count, 60000);
	assert_string_equal(m->class_names[0], "T-shirt/top");
	assert_string_equal(m->class_names[9], "Ankle boot");
	for (int c = 0; c < 10; c++)
		assert_int_equal(m->class_count[c], 6000);
	gf_dataset_close(d);
	free(train);
	free(fm);
	free(log);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idx_raw),
		cmocka_unit_test(test_idx_errors),
		cmocka_unit_test(test_fmnist_subset),
		cmocka_unit_test(test_folder),
		cmocka_unit_test(test_synth),
		cmocka_unit_test(test_command),
		cmocka_unit_test(test_verify_info),
		cmocka_unit_test(test_fmnist_command),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
