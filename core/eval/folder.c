/* Folders of PNG / JPEG files as records for the evaluator (folder.h):
 * `ganflow eval DIR DIR`, like `python -m pytorch_fid DIR DIR`. Files are
 * taken in name order, subfolders included (DIR/<class>/NNNNNN.png as
 * `ganflow sample out=DIR/` writes, an ImageFolder tree); each becomes
 * the record a dataset would hold for it, so decoding, the FID input pipeline and the bad-record accounting
 * are the dataset path's. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <ganflow/err.h>
#include <ganflow/image.h>

#include "folder.h"

struct gf_folder {
	char *path;
	char **names;   /* (n) sorted */
	uint64_t n;
	uint8_t *buf;   /* the current record's payload */
};

int gf_folder_is(const char *path)
{
	struct stat st;
	char p[PATH_MAX + 32];
	if (stat(path, &st) || !S_ISDIR(st.st_mode))
		return 0;
	snprintf(p, sizeof(p), "%s/data.mdb", path);
	if (!stat(p, &st))
		return 0;
	snprintf(p, sizeof(p), "%s/shard-00000", path);
	return stat(p, &st) != 0;
}

static int is_image(const char *name)
{
	const char *dot = strrchr(name, '.');
	return dot && (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds the images under path/rel (rel "" or ending in '/'), subfolders
 * included (ImageFolder's DIR/<class>/ files, what `ganflow sample
 * out=DIR/` writes), as names relative to path. */
static int walk(gf_folder *f, size_t *cap, const char *rel, int depth)
{
	char dir[PATH_MAX];
	if (snprintf(dir, sizeof(dir), "%s/%s", f->path, rel) >= (int)sizeof(dir))
		return gf_seterr(GF_EPARAM, "%s/%s: path too long", f->path, rel);
	DIR *d = opendir(dir);
	if (!d)
		return gf_seterr(-errno, "%s: %s", dir, strerror(errno));
	int rc = 0;
	struct dirent *e;
	while (!rc && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char name[PATH_MAX];
		if (snprintf(name, sizeof(name), "%s%s", rel, e->d_name) >= (int)sizeof(name))
			continue;
		struct stat st;
		char full[PATH_MAX + 32];
		snprintf(full, sizeof(full), "%s/%s", f->path, name);
		if (!stat(full, &st) && S_ISDIR(st.st_mode)) {
			if (depth < 8 && strlen(name) + 2 < sizeof(name)) {
				strcat(name, "/");
				rc = walk(f, cap, name, depth + 1);
			}
			continue;
		}
		if (!is_image(e->d_name))
			continue;
		if (f->n == *cap) {
			*cap = *cap ? 2 * *cap : 256;
			char **nn = realloc(f->names, *cap * sizeof(*nn));
			if (!nn) {
				rc = -ENOMEM;
				break;
			}
			f->names = nn;
		}
		if (!(f->names[f->n] = strdup(name))) {
			rc = -ENOMEM;
			break;
		}
		f->n++;
	}
	closedir(d);
	return rc;
}

int gf_folder_open(gf_folder **out, const char *path)
{
	*out = NULL;
	gf_folder *f = calloc(1, sizeof(*f));
	size_t cap = 0;
	int rc = 0;
	if (!f || !(f->path = strdup(path))) {
		free(f);
		return -ENOMEM;
	}
	if ((rc = walk(f, &cap, "", 0)))
		goto out;
	if (f->n == 0) {
		rc = gf_seterr(GF_ENOTFOUND, "%s holds no .png, .jpg or .jpeg images, in it or its subfolders (and is not a "
		                             "ganflow dataset)",
		               path);
		goto out;
	}
	qsort(f->names, f->n, sizeof(*f->names), by_name);
out:
	if (rc) {
		gf_folder_close(f);
		return rc;
	}
	*out = f;
	return 0;
}

void gf_folder_close(gf_folder *f)
{
	if (!f)
		return;
	for (uint64_t i = 0; i < f->n; i++)
		free(f->names[i]);
	free(f->names);
	free(f->path);
	free(f->buf);
	free(f);
}

uint64_t gf_folder_count(const gf_folder *f)
{
	return f->n;
}

static int read_file(const char *path, uint8_t **data, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return gf_seterr(-errno, "%s: %s", path, strerror(errno));
	int rc = 0;
	long n = fseek(fp, 0, SEEK_END) == 0 ? ftell(fp) : -1;
	if (n < 0 || n > (1L << 30) || fseek(fp, 0, SEEK_SET)) {
		rc = gf_seterr(GF_ECORRUPT, "%s: cannot size the file", path);
	} else if (!(*data = malloc(n ? (size_t)n : 1))) {
		rc = -ENOMEM;
	} else if (fread(*data, 1, (size_t)n, fp) != (size_t)n) {
		rc = gf_seterr(GF_ECORRUPT, "%s: short read", path);
		free(*data);
		*data = NULL;
	}
	*len = n > 0 ? (size_t)n : 0;
	fclose(fp);
	return rc;
}

int gf_folder_get(gf_folder *f, gf_decoder *d, uint64_t i, gf_record *r)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", f->path, f->names[i]);
	memset(r, 0, sizeof(*r));
	r->key = i;
	r->position = i;
	r->h.label = -1;
	free(f->buf);
	f->buf = NULL;
	/* by what the file holds, not its name (a PNG named .jpg is a PNG), as
	 * `ganflow dataset folder` decides */
	size_t len = 0;
	int rc = read_file(path, &f->buf, &len);
	if (rc)
		return rc;
	gf_image_kind kind = gf_image_sniff(f->buf, len);
	if (kind == GF_IMAGE_UNKNOWN)
		return gf_seterr(GF_ECORRUPT, "%s: neither a JPEG nor a PNG image (by its first bytes)", path);
	if (kind == GF_IMAGE_PNG) {
		free(f->buf);
		f->buf = NULL;
		uint8_t *pix;
		int w, h, c;
		if ((rc = gf_png_read(path, &pix, &w, &h, &c)))
			return rc == -ENOMEM ? rc : gf_seterr(GF_ECORRUPT, "%s", gf_errmsg());
		int oc = c >= 3 ? 3 : 1;   /* alpha dropped */
		if (oc != c) {
			for (size_t p = 0; p < (size_t)w * h; p++)
				for (int k = 0; k < oc; k++)
					pix[p * oc + k] = pix[p * c + k];
		}
		f->buf = pix;
		r->h.encoding = GF_ENC_RAW;
		r->h.width = (uint32_t)w;
		r->h.height = (uint32_t)h;
		r->h.channels = (uint32_t)oc;
		r->h.payload = (uint32_t)((size_t)w * h * oc);
	} else {
		int w, h, c;
		if ((rc = gf_jpeg_info(d, f->buf, len, &w, &h, &c)))
			return gf_seterr(GF_ECORRUPT, "%s: %s", path, gf_errmsg());
		r->h.encoding = GF_ENC_JPEG;
		r->h.width = (uint32_t)w;
		r->h.height = (uint32_t)h;
		r->h.channels = (uint32_t)c;
		r->h.payload = (uint32_t)len;
	}
	r->payload = f->buf;
	return 0;
}
