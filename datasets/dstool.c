/* Datasets as StyleGAN2-ADA's and R3GAN's dataset_tool.py writes them: a
 * zip (or a folder) of PNG images, 00000/img00000000.png ..., with
 * dataset.json at the top holding {"labels": [[name, class], ...]} or
 * {"labels": null}. FFHQ, AFHQ, CIFAR-10 and ImageNet 32/64 are passed
 * around in this form.
 *
 * The zip is read in place (zip.c): its central directory names the
 * members, dataset.json is read and parsed (<ganflow/value.h>), the images
 * are sorted by name (byte order: dataset_tool's loader sorts them the
 * same way) and joined with their labels, then converted through the
 * folder importer's engine (gf_convert_images) straight from the archive.
 * A member without a label, a label without a member, a label that is not
 * a class index, images of different sizes and a corrupt member stop the
 * conversion with a message naming the source and the member.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <ganflow/err.h>
#include <ganflow/value.h>

#include "convert.h"

#define MAX_CLASSES 100000u /* as `dataset synth` */
#define LABELS_FILE "dataset.json"

typedef struct image {
	const char *name; /* path inside the source, '/'-separated */
	size_t member;    /* zip member index */
	int32_t label;
} image;

typedef struct dstool {
	const char *src;
	gf_zip *zip;      /* NULL: src is a folder */
	image *img;       /* (n) sorted by name; a folder's names are owned */
	size_t n, cap;
	int has_json;
	size_t json_member;
	uint64_t ignored; /* files that are neither images nor dataset.json */
} dstool;

static int is_image_name(const char *name)
{
	const char *dot = strrchr(name, '.');
	return dot && (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

static int add_image(dstool *d, const char *name, size_t member)
{
	if (d->n == d->cap) {
		size_t nc = d->cap ? 2 * d->cap : 1024;
		image *ni = realloc(d->img, nc * sizeof(*ni));
		if (!ni)
			return -ENOMEM;
		d->img = ni;
		d->cap = nc;
	}
	d->img[d->n++] = (image){ .name = name, .member = member, .label = -1 };
	return 0;
}

/* ---- listing: zip members or folder files ---- */

/* The top folder every file of the zip lies in, when dataset.json is there
 * and not at the top (a zip made of the folder dataset_tool wrote, `zip -r
 * ffhq.zip ffhq/`): its length with the '/', else 0. */
static size_t common_top(const gf_zip *z)
{
	size_t n = gf_zip_count(z), top = 0;
	const char *first = NULL;
	for (size_t i = 0; i < n; i++) {
		const char *name = gf_zip_name(z, i), *slash = strchr(name, '/');
		if (!strcmp(name, LABELS_FILE))
			return 0;
		if (!first) {
			first = name;
			top = slash ? (size_t)(slash - name) + 1 : 0;
		}
		if (!top || strncmp(name, first, top))
			return 0;
	}
	for (size_t i = 0; i < n; i++)
		if (!strcmp(gf_zip_name(z, i) + top, LABELS_FILE))
			return top;
	return 0;
}

static int list_zip(dstool *d)
{
	size_t n = gf_zip_count(d->zip), top = common_top(d->zip);
	for (size_t i = 0; i < n; i++) {
		const char *name = gf_zip_name(d->zip, i) + top;
		size_t len = strlen(name);
		if (!len || name[len - 1] == '/') /* a folder entry */
			continue;
		if (!strcmp(name, LABELS_FILE)) {
			d->has_json = 1;
			d->json_member = i;
		} else if (!is_image_name(name)) {
			d->ignored++;
		} else if (add_image(d, name, i)) {
			return -ENOMEM;
		}
	}
	return 0;
}

/* Files under dir/rel, recursively, as '/'-separated names relative to dir. */
static int list_folder(dstool *d, const char *rel, int depth)
{
	char *path = rel[0] ? gf_path_join(d->src, rel) : strdup(d->src);
	if (!path)
		return -ENOMEM;
	if (depth > 32) {
		int rc = gf_seterr(-ELOOP, "%s: folders nested too deep", path);
		free(path);
		return rc;
	}
	DIR *dir = opendir(path);
	if (!dir) {
		int rc = gf_seterr(-errno, "%s: %s", path, strerror(errno));
		free(path);
		return rc;
	}
	struct dirent *e;
	int rc = 0;
	while (!rc && (e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *name = rel[0] ? gf_path_join(rel, e->d_name) : strdup(e->d_name);
		char *full = name ? gf_path_join(d->src, name) : NULL;
		struct stat st;
		if (!full) {
			rc = -ENOMEM;
		} else if (stat(full, &st)) {
			rc = gf_seterr(-errno, "%s: %s", full, strerror(errno));
		} else if (S_ISDIR(st.st_mode)) {
			rc = list_folder(d, name, depth + 1);
		} else if (!rel[0] && !strcmp(name, LABELS_FILE)) {
			d->has_json = 1;
		} else if (!S_ISREG(st.st_mode) || !is_image_name(name)) {
			d->ignored++;
		} else if (!(rc = add_image(d, name, 0))) {
			name = NULL; /* the image owns it */
		}
		free(name);
		free(full);
	}
	closedir(dir);
	free(path);
	return rc;
}

/* The bytes of dataset.json, NUL-terminated, into *text (malloc'ed). */
static int read_json(dstool *d, char **text)
{
	uint8_t *b = NULL;
	size_t len = 0, cap = 0;
	int rc;
	if (d->zip) {
		rc = gf_zip_read(d->zip, d->json_member, &b, &cap, &len); /* cap > len */
	} else {
		char *p = gf_path_join(d->src, LABELS_FILE);
		rc = p ? gf_read_file(p, 0, &b, &len) : -ENOMEM;
		free(p);
		uint8_t *nb = rc ? NULL : realloc(b, len + 1);
		if (!rc && !nb)
			rc = -ENOMEM;
		if (nb)
			b = nb;
	}
	if (rc) {
		free(b);
		return rc;
	}
	b[len] = '\0';
	if (strlen((char *)b) != len) {
		free(b);
		return gf_seterr(GF_ECORRUPT, "%s: %s holds a NUL byte: not JSON text", d->src, LABELS_FILE);
	}
	*text = (char *)b;
	return 0;
}

/* ---- labels ---- */

typedef struct label_ent {
	const char *name;
	int32_t label;
} label_ent;

static int cmp_image(const void *a, const void *b)
{
	return strcmp(((const image *)a)->name, ((const image *)b)->name);
}

static int cmp_label(const void *a, const void *b)
{
	return strcmp(((const label_ent *)a)->name, ((const label_ent *)b)->name);
}

/* Reads the pairs of labels (a list) into l (sorted by name), checking
 * each: [name, class index], the index below `classes` when given. */
static int read_labels(dstool *d, const gf_value *labels, uint32_t classes, label_ent **out, size_t *count)
{
	size_t n = gf_value_len(labels);
	label_ent *l = malloc((n ? n : 1) * sizeof(*l));
	if (!l)
		return -ENOMEM;
	uint32_t limit = classes ? classes : MAX_CLASSES;
	for (size_t i = 0; i < n; i++) {
		const gf_value *pair = gf_value_at(labels, i);
		const gf_value *name = gf_value_at(pair, 0), *lab = gf_value_at(pair, 1);
		if (pair->type != GF_VLIST || gf_value_len(pair) != 2 || name->type != GF_VSTR) {
			free(l);
			return gf_seterr(GF_ECORRUPT, "%s: %s: labels[%zu] is not a pair [\"file name\", class]", d->src,
			                 LABELS_FILE, i);
		}
		if (lab->type == GF_VLIST) {
			free(l);
			return gf_seterr(GF_ECORRUPT, "%s: %s: %s has a vector label; ganflow's labels are class indices "
			                 "(one integer a file)", d->src, LABELS_FILE, name->u.s);
		}
		if (lab->type != GF_VINT || lab->u.i < 0 || lab->u.i >= limit) {
			char v[64];
			gf_value_format(lab, v, sizeof(v));
			free(l);
			return gf_seterr(GF_ECORRUPT, "%s: %s: %s has label %s: expected a class index in 0..%u%s", d->src,
			                 LABELS_FILE, name->u.s, v, limit - 1,
			                 classes ? " (classes= given)" : "");
		}
		l[i] = (label_ent){ .name = name->u.s, .label = (int32_t)lab->u.i };
	}
	qsort(l, n, sizeof(*l), cmp_label);
	for (size_t i = 1; i < n; i++)
		if (!strcmp(l[i - 1].name, l[i].name)) {
			int rc = gf_seterr(GF_ECORRUPT, "%s: %s labels %s twice", d->src, LABELS_FILE, l[i].name);
			free(l);
			return rc;
		}
	*out = l;
	*count = n;
	return 0;
}

/* Gives every image its label from dataset.json (a merge of the two
 * sorted lists); *nclasses = the largest label + 1 (or classes). */
static int join_labels(dstool *d, uint32_t classes, uint32_t *nclasses)
{
	char *text = NULL;
	gf_value v = gf_value_nil();
	label_ent *l = NULL;
	size_t nl = 0;
	int rc;
	*nclasses = 0;
	if (!d->has_json)
		return 0; /* unlabelled, as dataset_tool's loader takes it */
	if ((rc = read_json(d, &text)))
		return rc;
	if ((rc = gf_value_from_json(text, &v))) {
		rc = gf_seterr(rc, "%s: %s: %s", d->src, LABELS_FILE, gf_errmsg());
		goto out;
	}
	free(text);
	text = NULL;
	const gf_value *labels = gf_value_get(&v, "labels");
	if (!labels) {
		rc = gf_seterr(GF_ECORRUPT, "%s: %s has no \"labels\" (expected {\"labels\": [[\"file name\", class], "
		               "...]} or {\"labels\": null})", d->src, LABELS_FILE);
		goto out;
	}
	if (labels->type == GF_VNIL)
		goto out;
	if (labels->type != GF_VLIST) {
		rc = gf_seterr(GF_ECORRUPT, "%s: %s: \"labels\" is a %s, expected a list of [\"file name\", class] or null",
		               d->src, LABELS_FILE, gf_vtype_name(labels->type));
		goto out;
	}
	if ((rc = read_labels(d, labels, classes, &l, &nl)))
		goto out;
	/* both lists are sorted: they must hold the same names */
	size_t j = 0;
	int32_t max = -1;
	for (size_t i = 0; i <= d->n && j <= nl; i++, j++) {
		int c = i == d->n ? (j == nl ? 0 : -1) : j == nl ? 1 : strcmp(l[j].name, d->img[i].name);
		if (c < 0) {
			rc = gf_seterr(GF_ECORRUPT, "%s: %s has a label for %s, which is not a .png/.jpg image of %s", d->src,
			               LABELS_FILE, l[j].name, d->src);
			goto out;
		}
		if (c > 0) {
			rc = gf_seterr(GF_ECORRUPT, "%s: %s has no label in %s", d->src, d->img[i].name, LABELS_FILE);
			goto out;
		}
		if (i < d->n) {
			d->img[i].label = l[j].label;
			max = l[j].label > max ? l[j].label : max;
		}
	}
	*nclasses = classes ? classes : (uint32_t)(max + 1);
out:
	free(l);
	free(text);
	gf_value_free(&v);
	return rc;
}

/* ---- reading images for the engine ---- */

static int dstool_read(void *p, uint64_t i, uint8_t **buf, size_t *cap, size_t *len, int32_t *label)
{
	dstool *d = p;
	const image *im = &d->img[i];
	*label = im->label;
	if (d->zip) /* a corrupt archive stops the conversion */
		return gf_zip_read(d->zip, im->member, buf, cap, len);
	char *path = gf_path_join(d->src, im->name);
	if (!path)
		return -ENOMEM;
	uint8_t *b;
	int rc = gf_read_file(path, 0, &b, len);
	free(path);
	if (rc)
		return rc == -ENOMEM ? rc : 1; /* skipped, as the folder importer does */
	free(*buf);
	*buf = b;
	*cap = *len;
	return 0;
}

static void dstool_name(void *p, uint64_t i, char *name, size_t size)
{
	dstool *d = p;
	if (d->zip)
		snprintf(name, size, "%s: %s", d->src, gf_zip_name(d->zip, d->img[i].member));
	else
		snprintf(name, size, "%s/%s", d->src, d->img[i].name);
}

/* The size every image must have: the first one's. */
static int first_size(dstool *d, const gf_convert_opts *o, gf_image_source *s)
{
	gf_decoder *dec = NULL;
	uint8_t *buf = NULL, *pix = NULL;
	size_t cap = 0, len = 0, pcap = 0;
	int32_t label;
	int rc, is_jpeg;
	if ((rc = gf_decoder_create(&dec)))
		return rc;
	rc = dstool_read(d, 0, &buf, &cap, &len, &label);
	if (rc > 0)
		rc = GF_ECORRUPT; /* gf_errmsg names it */
	if (!rc && (rc = gf_image_file_decode(dec, buf, len, o->channels, &pix, &pcap, &s->width, &s->height,
	                                      &s->channels, &is_jpeg))) {
		char name[512];
		dstool_name(d, 0, name, sizeof(name));
		rc = gf_seterr(rc, "%s (the first image, whose size all must have): %s", name, gf_errmsg());
	}
	s->first = d->img[0].name;
	free(buf);
	free(pix);
	gf_decoder_destroy(dec);
	return rc;
}

int gf_convert_dstool(const char *src, const char *out, const gf_convert_opts *o, uint32_t classes,
                      gf_convert_stats *st)
{
	dstool d = { .src = src };
	struct stat sb;
	int rc;
	uint32_t nclasses = 0;
	memset(st, 0, sizeof(*st));
	if (classes > MAX_CLASSES)
		return gf_seterr(GF_EPARAM, "classes=%u: at most %u", classes, MAX_CLASSES);
	if (stat(src, &sb))
		return gf_seterr(-errno, "%s: %s", src, strerror(errno));
	if (S_ISDIR(sb.st_mode))
		rc = list_folder(&d, "", 0);
	else if (!(rc = gf_zip_open(src, &d.zip)))
		rc = list_zip(&d);
	if (rc)
		goto out;
	if (!d.n) {
		rc = gf_seterr(GF_ENOTFOUND, "%s: no .png, .jpg or .jpeg images", src);
		goto out;
	}
	qsort(d.img, d.n, sizeof(*d.img), cmp_image);
	if ((rc = join_labels(&d, classes, &nclasses)))
		goto out;
	gf_image_source s = { .read = dstool_read, .name = dstool_name, .ctx = &d, .n = d.n };
	if (!o->resize_w && (rc = first_size(&d, o, &s)))
		goto out;
	rc = gf_convert_images(&s, out, o, nclasses, NULL, st);
	st->ignored = d.ignored;
out:
	if (!d.zip)
		for (size_t i = 0; i < d.n; i++)
			free((char *)d.img[i].name);
	free(d.img);
	gf_zip_close(d.zip);
	return rc;
}
