/* Paired datasets for image-to-image translation (pix2pix): the
 * `ganflow dataset paired` and `ganflow dataset edges2fashion` converters.
 *
 * A pair is stored as one record flagged GF_RECORD_PAIR whose image holds A
 * on the left and B on the right (the layout of the pix2pix datasets
 * themselves), so a pair is one key, one read and one JPEG decode, and the
 * meta record, shards, CRCs, `dataset verify` and `dataset export` work on
 * it unchanged. jpeg_decode (paired = true) splits it again with one crop,
 * resize and flip for both halves.
 *
 * The converters run serially: the pix2pix datasets are small (facades 400
 * pairs, edges2fashion 70,000 images of 28 x 28) and a pair's checks (both
 * halves readable, same size) name the files at fault as they go. Pairs
 * are written in a seeded random order (shuffle, the default) or in the
 * order of their names (shuffle = 0); edges2fashion keeps Fashion-MNIST's.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <dirent.h>

#include <ganflow/err.h>
#include <ganflow/log.h>

#include "convert.h"

/* ---- building a pair record ---- */

typedef struct pair_writer {
	const gf_convert_opts *o;
	gf_dataset_writer *w;
	gf_decoder *dec;
	uint8_t *ab, *half; /* scratch: the AB image, a resized half */
	size_t ab_cap, half_cap;
	gf_convert_stats *st;
} pair_writer;

static int grow(uint8_t **b, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t n = need + need / 4 + 64;
	uint8_t *nb = realloc(*b, n);
	if (!nb)
		return -ENOMEM;
	*b = nb;
	*cap = n;
	return 0;
}

/* Copies (after resizing, when the options ask for it) the half `pix`
 * (w x h x c) into column x0 of the AB image of width abw. */
static int put_half(pair_writer *pw, const uint8_t *pix, size_t stride, int w, int h, int c, int x0, int ow, int oh)
{
	const gf_convert_opts *o = pw->o;
	int rc;
	if (ow != w || oh != h) {
		if ((rc = grow(&pw->half, &pw->half_cap, (size_t)ow * oh * c)) ||
		    (rc = gf_resize_u8(pw->dec, pw->half, ow, oh, pix, w, h, stride, c, o->resize_mode)))
			return rc;
		pix = pw->half;
		stride = (size_t)ow * c;
	}
	for (int y = 0; y < oh; y++)
		memcpy(pw->ab + ((size_t)y * 2 * ow + (size_t)x0) * c, pix + (size_t)y * stride, (size_t)ow * c);
	return 0;
}

/* Appends the pair (a, b: w x h x c each, row strides sa, sb) as one
 * record. */
static int add_pair(pair_writer *pw, const uint8_t *a, size_t sa, const uint8_t *b, size_t sb, int w, int h, int c,
                    int32_t label)
{
	const gf_convert_opts *o = pw->o;
	int ow = o->resize_w ? o->resize_w : w, oh = o->resize_h ? o->resize_h : h, rc;
	if ((uint32_t)(2 * ow) > GF_RECORD_MAX_DIM)
		return gf_seterr(GF_EPARAM, "a pair of width 2 x %d exceeds the record limit of %u", ow, GF_RECORD_MAX_DIM);
	if ((rc = grow(&pw->ab, &pw->ab_cap, (size_t)2 * ow * oh * c)) || (rc = put_half(pw, a, sa, w, h, c, 0, ow, oh)) ||
	    (rc = put_half(pw, b, sb, w, h, c, ow, ow, oh)))
		return rc;
	gf_record_header hd = { .label = label, .height = (uint32_t)oh, .width = (uint32_t)(2 * ow),
		                    .channels = (uint32_t)c, .flags = GF_RECORD_PAIR };
	const uint8_t *payload = pw->ab;
	size_t len = (size_t)2 * ow * oh * c;
	if (o->encoding == GF_ENC_JPEG) {
		if ((rc = gf_jpeg_encode(pw->dec, pw->ab, 2 * ow, oh, c, o->quality ? o->quality : 95, o->subsamp, &payload,
		                         &len)))
			return rc;
		hd.encoding = GF_ENC_JPEG;
	} else {
		hd.encoding = GF_ENC_RAW;
	}
	hd.payload = (uint32_t)len;
	if ((rc = gf_dataset_writer_add(pw->w, &hd, payload)))
		return rc;
	pw->st->records++;
	pw->st->payload_bytes += len;
	return 0;
}

static int writer_open(pair_writer *pw, const char *out, const gf_convert_opts *o, uint32_t nclasses,
                       const char *const *names, gf_convert_stats *st)
{
	memset(pw, 0, sizeof(*pw));
	memset(st, 0, sizeof(*st));
	pw->o = o;
	pw->st = st;
	if (o->channels != 0 && o->channels != 1 && o->channels != 3)
		return gf_seterr(GF_EPARAM, "channels must be 1 or 3, not %d", o->channels);
	gf_writer_opts wo = { .shard_records = o->shard_records, .shard_bytes = o->shard_bytes, .nclasses = nclasses,
		                  .class_names = names, .overwrite = o->overwrite };
	int rc = gf_decoder_create(&pw->dec);
	return rc ? rc : gf_dataset_writer_open(out, &wo, &pw->w);
}

/* Finishes (rc == 0) or abandons the dataset and frees the scratch. */
static int writer_close(pair_writer *pw, const char *out, int rc, double t0)
{
	if (pw->w) {
		if (rc)
			gf_dataset_writer_abort(pw->w);
		else
			rc = gf_dataset_writer_finish(pw->w);
	}
	gf_decoder_destroy(pw->dec);
	free(pw->ab);
	free(pw->half);
	pw->st->skipped = pw->st->bad_size + pw->st->bad_missing + pw->st->bad_unreadable;
	pw->st->seconds = gf_now() - t0;
	if (!rc) {
		gf_dataset *ds;
		if (gf_dataset_open(out, &ds) == 0) {
			pw->st->shards = gf_dataset_metadata(ds)->nshards;
			gf_dataset_close(ds);
		}
	}
	return rc;
}

/* ---- listing ---- */

static int image_ext(const char *name)
{
	const char *dot = strrchr(name, '.');
	return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".png"));
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the regular image files in dir; *ignored counts the
 * other files (sub-folders excluded). */
static int list_images(const char *dir, char ***out, size_t *n, uint64_t *ignored)
{
	DIR *d = opendir(dir);
	if (!d)
		return gf_seterr(-errno, "%s: %s", dir, strerror(errno));
	size_t cap = 0, cnt = 0;
	char **v = NULL;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char *p = gf_path_join(dir, e->d_name);
		struct stat s;
		int isdir = p && stat(p, &s) == 0 && S_ISDIR(s.st_mode), reg = p && !isdir && S_ISREG(s.st_mode);
		free(p);
		if (isdir)
			continue;
		if (!reg || !image_ext(e->d_name)) {
			if (ignored)
				(*ignored)++;
			continue;
		}
		if (cnt == cap) {
			size_t nc = cap ? 2 * cap : 256;
			char **nv = realloc(v, nc * sizeof(char *));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
			cap = nc;
		}
		if (!(v[cnt] = strdup(e->d_name))) {
			rc = -ENOMEM;
			break;
		}
		cnt++;
	}
	closedir(d);
	if (rc) {
		for (size_t i = 0; i < cnt; i++)
			free(v[i]);
		free(v);
		return rc;
	}
	if (cnt)
		qsort(v, cnt, sizeof(char *), cmp_name);
	*out = v;
	*n = cnt;
	return 0;
}

static void free_list(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

/* Length of a name without its extension. */
static size_t stem_len(const char *name)
{
	const char *dot = strrchr(name, '.');
	return dot ? (size_t)(dot - name) : strlen(name);
}

static int stem_cmp(const char *a, const char *b)
{
	size_t la = stem_len(a), lb = stem_len(b);
	int c = strncmp(a, b, la < lb ? la : lb);
	return c ? c : (la > lb) - (la < lb);
}

static int is_dir(const char *dir, const char *name)
{
	char *p = gf_path_join(dir, name);
	struct stat s;
	int r = p && stat(p, &s) == 0 && S_ISDIR(s.st_mode);
	free(p);
	return r;
}

/* Reads and decodes dir/name to u8 pixels with `channels` (0: its own).
 * *pix is grown in place. Returns 0, or GF_ECORRUPT / -errno with the
 * file named in gf_errmsg(). */
static int load_image(gf_decoder *dec, const char *dir, const char *name, int channels, uint8_t **pix, size_t *cap,
                      int *w, int *h, int *c)
{
	char *p = gf_path_join(dir, name);
	if (!p)
		return -ENOMEM;
	uint8_t *buf = NULL;
	size_t len = 0;
	int jpeg, rc = gf_read_file(p, 0, &buf, &len);
	if (!rc) {
		rc = gf_image_file_decode(dec, buf, len, channels, pix, cap, w, h, c, &jpeg);
		if (rc && rc != -ENOMEM)
			gf_seterr(rc, "%s: %s", p, gf_errmsg());
	}
	free(buf);
	free(p);
	return rc;
}

/* ---- ganflow dataset paired: A/ and B/ ---- */

static int convert_ab_folders(pair_writer *pw, const char *src, int btoa, double t0)
{
	const gf_convert_opts *o = pw->o;
	char *da = gf_path_join(src, btoa ? "B" : "A"), *db = gf_path_join(src, btoa ? "A" : "B");
	char **na = NULL, **nb = NULL;
	size_t ca = 0, cb = 0;
	uint8_t *pa = NULL, *pb = NULL;
	size_t capa = 0, capb = 0;
	int rc = !da || !db ? -ENOMEM : 0;
	if (!rc)
		rc = list_images(da, &na, &ca, &pw->st->ignored);
	if (!rc)
		rc = list_images(db, &nb, &cb, &pw->st->ignored);
	for (size_t i = 1; !rc && i < ca + cb; i++) { /* a stem twice in one folder cannot be matched */
		int inb = i >= ca;
		char **v = inb ? nb : na;
		size_t j = inb ? i - ca : i;
		if (j > 0 && !stem_cmp(v[j - 1], v[j]))
			rc = gf_seterr(GF_EPARAM, "%s holds both %s and %s: which one pairs with the other folder's file is "
			                          "ambiguous", inb ? db : da, v[j - 1], v[j]);
	}
	/* both lists are sorted by full name; walk them in stem order: the
	 * pairs (i of A, j of B), and the files without a partner */
	size_t i = 0, j = 0, npairs = 0;
	size_t (*pairs)[2] = rc ? NULL : malloc((ca < cb ? ca + 1 : cb + 1) * sizeof(*pairs));
	if (!rc && !pairs)
		rc = -ENOMEM;
	while (!rc && (i < ca || j < cb)) {
		int c = i >= ca ? 1 : j >= cb ? -1 : stem_cmp(na[i], nb[j]);
		if (c) {
			const char *dir = c < 0 ? da : db, *name = c < 0 ? na[i] : nb[j], *other = c < 0 ? db : da;
			gf_log(GF_LOG_WARN, "bad pair: %s/%s has no partner in %s (missing partner)", dir, name, other);
			pw->st->bad_missing++;
			if (c < 0)
				i++;
			else
				j++;
			continue;
		}
		pairs[npairs][0] = i++;
		pairs[npairs++][1] = j++;
	}
	for (size_t k = 0; !rc && k < npairs; k++) {
		size_t q = o->shuffle ? (size_t)gf_permute(k, npairs, o->seed) : k;
		i = pairs[q][0];
		j = pairs[q][1];
		int wa, ha, cha, wb, hb, chb;
		rc = load_image(pw->dec, da, na[i], o->channels, &pa, &capa, &wa, &ha, &cha);
		if (!rc)
			rc = load_image(pw->dec, db, nb[j], o->channels, &pb, &capb, &wb, &hb, &chb);
		if (rc == GF_ECORRUPT || (rc < 0 && rc != -ENOMEM)) {
			gf_log(GF_LOG_WARN, "bad pair: %s (unreadable half)", gf_errmsg());
			pw->st->bad_unreadable++;
			rc = 0;
		} else if (!rc && (wa != wb || ha != hb)) {
			gf_log(GF_LOG_WARN, "bad pair: %s/%s is %dx%d but %s/%s is %dx%d (size mismatch)", da, na[i], wa, ha, db,
			       nb[j], wb, hb);
			pw->st->bad_size++;
		} else if (!rc) {
			if (cha != chb) /* gray with colour: both as RGB */
				rc = cha == 1 ? load_image(pw->dec, da, na[i], 3, &pa, &capa, &wa, &ha, &cha)
				              : load_image(pw->dec, db, nb[j], 3, &pb, &capb, &wb, &hb, &chb);
			if (!rc)
				rc = add_pair(pw, pa, (size_t)wa * cha, pb, (size_t)wb * chb, wa, ha, cha, -1);
		}
		if (!o->quiet && ((k + 1) % 64 == 0 || k + 1 == npairs))
			gf_progress_bar(o->what ? o->what : "paired", k + 1, npairs, t0);
	}
	free(pairs);
	if (!rc && !pw->st->records)
		rc = gf_seterr(GF_ENOTFOUND, "%s and %s: no pair of images with the same name", da, db);
	free(pa);
	free(pb);
	free_list(na, ca);
	free_list(nb, cb);
	free(da);
	free(db);
	return rc;
}

/* ---- ganflow dataset paired: AB images ---- */

static int convert_ab_images(pair_writer *pw, const char *src, int btoa, double t0)
{
	const gf_convert_opts *o = pw->o;
	char **names = NULL;
	size_t n = 0;
	uint8_t *pix = NULL;
	size_t cap = 0;
	int rc = list_images(src, &names, &n, &pw->st->ignored);
	if (!rc && !n)
		rc = gf_seterr(GF_ENOTFOUND, "%s: no .jpg, .jpeg or .png files (AB images), and no A/ and B/ folders", src);
	if (!rc && o->limit && o->limit < n)
		n = o->limit;
	for (size_t k = 0; !rc && k < n; k++) {
		size_t i = o->shuffle ? (size_t)gf_permute(k, n, o->seed) : k;
		int w, h, c;
		rc = load_image(pw->dec, src, names[i], o->channels, &pix, &cap, &w, &h, &c);
		if (rc == GF_ECORRUPT || (rc < 0 && rc != -ENOMEM)) {
			gf_log(GF_LOG_WARN, "bad pair: %s (unreadable)", gf_errmsg());
			pw->st->bad_unreadable++;
			rc = 0;
		} else if (!rc && w % 2) {
			gf_log(GF_LOG_WARN, "bad pair: %s/%s is %d pixels wide, not two halves of one size (size mismatch)", src,
			       names[i], w);
			pw->st->bad_size++;
		} else if (!rc) {
			const uint8_t *left = pix, *right = pix + (size_t)(w / 2) * c;
			size_t stride = (size_t)w * c;
			rc = btoa ? add_pair(pw, right, stride, left, stride, w / 2, h, c, -1)
			          : add_pair(pw, left, stride, right, stride, w / 2, h, c, -1);
		}
		if (!o->quiet && ((k + 1) % 64 == 0 || k + 1 == n))
			gf_progress_bar(o->what ? o->what : "paired", k + 1, n, t0);
	}
	free(pix);
	free_list(names, n);
	return rc;
}

int gf_convert_paired(const char *src, const char *out, const gf_convert_opts *o, int btoa, gf_convert_stats *st)
{
	pair_writer pw;
	double t0 = gf_now();
	struct stat s;
	int rc;
	if (stat(src, &s) || !S_ISDIR(s.st_mode)) {
		memset(st, 0, sizeof(*st));
		return gf_seterr(stat(src, &s) ? -ENOENT : -ENOTDIR, "%s: not a folder", src);
	}
	int two = is_dir(src, "A") && is_dir(src, "B");
	if (!(rc = writer_open(&pw, out, o, 0, NULL, st)))
		rc = two ? convert_ab_folders(&pw, src, btoa, t0) : convert_ab_images(&pw, src, btoa, t0);
	if (rc && !o->quiet)
		gf_progress_done(NULL);
	return writer_close(&pw, out, rc, t0);
}

/* ---- edges2fashion ---- */

void gf_edge_map(uint8_t *edges, const uint8_t *gray, int w, int h, double threshold)
{
#define PX(x, y) (double)gray[(size_t)((y) < 0 ? 0 : (y) >= h ? h - 1 : (y)) * w + ((x) < 0 ? 0 : (x) >= w ? w - 1 : (x))]
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			double gx = PX(x + 1, y - 1) + 2 * PX(x + 1, y) + PX(x + 1, y + 1) - PX(x - 1, y - 1) - 2 * PX(x - 1, y) -
			            PX(x - 1, y + 1);
			double gy = PX(x - 1, y + 1) + 2 * PX(x, y + 1) + PX(x + 1, y + 1) - PX(x - 1, y - 1) - 2 * PX(x, y - 1) -
			            PX(x + 1, y - 1);
			edges[(size_t)y * w + x] = sqrt(gx * gx + gy * gy) > threshold ? 0 : 255;
		}
#undef PX
}

/* Sobel magnitude above which a pixel is an edge: a step of about 1/4 of
 * the range (255 / 4 x the Sobel gain of 4). */
#define EDGE_THRESHOLD 255.0

int gf_convert_edges(const char *images, const char *labels, const char *out, const gf_convert_opts *o,
                     const char *const *class_names, uint32_t nclasses, gf_convert_stats *st)
{
	uint8_t *ib = NULL, *lb = NULL, *edges = NULL, *a3 = NULL, *b3 = NULL;
	size_t il, ll;
	uint32_t idim[3], ldim[1];
	pair_writer pw;
	double t0 = gf_now();
	int rc;
	memset(st, 0, sizeof(*st));
	if ((rc = gf_read_file(images, 1, &ib, &il)) || (rc = gf_read_file(labels, 1, &lb, &ll)) ||
	    (rc = gf_idx_parse(images, ib, il, 3, idim)) || (rc = gf_idx_parse(labels, lb, ll, 1, ldim)))
		goto out;
	if (idim[0] != ldim[0]) {
		rc = gf_seterr(GF_ECORRUPT, "%s holds %u images but %s holds %u labels", images, idim[0], labels, ldim[0]);
		goto out;
	}
	const uint8_t *labs = lb + 8;
	for (uint32_t i = 0; i < ldim[0]; i++)
		if (labs[i] >= nclasses) {
			rc = gf_seterr(GF_EPARAM, "%s: record %u has label %u but there are %u classes", labels, i, labs[i],
			               nclasses);
			goto out;
		}
	int w = (int)idim[2], h = (int)idim[1], c = o->channels ? o->channels : 1;
	size_t plane = (size_t)w * h;
	uint64_t n = o->limit && o->limit < idim[0] ? o->limit : idim[0];
	edges = malloc(plane);
	a3 = malloc(3 * plane);
	b3 = malloc(3 * plane);
	if (!edges || !a3 || !b3) {
		rc = -ENOMEM;
		goto out;
	}
	rc = writer_open(&pw, out, o, nclasses, class_names, st);
	for (uint64_t k = 0; k < n && !rc; k++) {
		uint64_t i = o->shuffle ? gf_permute(k, n, o->seed) : k;
		const uint8_t *img = ib + 16 + i * plane, *a = edges, *b = img;
		gf_edge_map(edges, img, w, h, EDGE_THRESHOLD);
		if (c == 3) {
			for (size_t k = 0; k < plane; k++) {
				a3[3 * k] = a3[3 * k + 1] = a3[3 * k + 2] = edges[k];
				b3[3 * k] = b3[3 * k + 1] = b3[3 * k + 2] = img[k];
			}
			a = a3;
			b = b3;
		}
		rc = add_pair(&pw, a, (size_t)w * c, b, (size_t)w * c, w, h, c, labs[i]);
		if (!o->quiet && ((k + 1) % 1024 == 0 || k + 1 == n))
			gf_progress_bar(o->what ? o->what : out, k + 1, n, t0);
	}
	if (rc && !o->quiet)
		gf_progress_done(NULL);
	rc = writer_close(&pw, out, rc, t0);
out:
	free(ib);
	free(lb);
	free(edges);
	free(a3);
	free(b3);
	return rc;
}
