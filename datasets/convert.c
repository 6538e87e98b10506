/* Conversion engine and the IDX and image-folder converters.
 *
 * Inputs are processed in chunks: `workers` threads (the calling thread is
 * one of them) claim items of the chunk with an atomic counter and turn
 * each into a record (header + payload in a per-item buffer that is kept
 * and grown across chunks); then the calling thread appends the chunk to
 * the dataset writer in order. Output record k is input k, or with
 * shuffle input gf_permute(k, n, seed). Outputs are therefore identical
 * for any worker count.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <ganflow/err.h>
#include <ganflow/log.h>

#include "convert.h"

void gf_convert_defaults(gf_convert_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->encoding = GF_ENC_RAW;
	o->subsamp = GF_SUBSAMP_420;
	o->resize_mode = GF_RESIZE_AREA;
	o->shuffle = 1;
	o->seed = 1;
}

/* ---- engine ---- */

typedef struct item {
	gf_record_header h;
	uint8_t *buf;       /* payload */
	size_t cap;
	int status;         /* 0 ok, 1 skipped (msg), < 0 fatal */
	char msg[384];
} item;

typedef struct worker_state {
	gf_decoder *dec;
	uint8_t *pix, *pix2; /* scratch pixels */
	size_t pix_cap, pix2_cap;
	uint8_t *file;       /* scratch file bytes (gf_image_source) */
	size_t file_cap;
} worker_state;

/* Produces item i of the input into it (status and message set). */
typedef void (*produce_fn)(void *ctx, uint64_t i, worker_state *ws, item *it);

typedef struct engine {
	produce_fn fn;
	void *ctx;
	uint64_t total;         /* inputs */
	int shuffle;            /* record k is input gf_permute(k, total, seed) */
	uint64_t seed;
	uint64_t base, n;       /* current chunk */
	atomic_uint_fast64_t next;
	item *items;            /* (chunk) */
	pthread_mutex_t lock;
	pthread_cond_t go, done;
	uint64_t gen;           /* chunk generation: bumped to start a chunk */
	int active;             /* helper threads still working on the chunk */
	int quit;
	worker_state *ws;       /* (workers) */
} engine;

static void work_chunk(engine *e, worker_state *ws)
{
	for (;;) {
		uint64_t j = atomic_fetch_add(&e->next, 1);
		if (j >= e->n)
			break;
		item *it = &e->items[j];
		it->status = 0;
		it->msg[0] = '\0';
		uint64_t k = e->base + j;
		e->fn(e->ctx, e->shuffle ? gf_permute(k, e->total, e->seed) : k, ws, it);
	}
}

typedef struct thread_arg {
	engine *e;
	worker_state *ws;
} thread_arg;

static void *worker_main(void *p)
{
	thread_arg *a = p;
	engine *e = a->e;
	uint64_t seen = 0;
	for (;;) {
		pthread_mutex_lock(&e->lock);
		while (e->gen == seen && !e->quit)
			pthread_cond_wait(&e->go, &e->lock);
		seen = e->gen;
		int quit = e->quit;
		pthread_mutex_unlock(&e->lock);
		if (quit)
			break;
		work_chunk(e, a->ws);
		pthread_mutex_lock(&e->lock);
		if (--e->active == 0)
			pthread_cond_signal(&e->done);
		pthread_mutex_unlock(&e->lock);
	}
	return NULL;
}

static int grow_buf(uint8_t **b, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t n = need + need / 4;
	uint8_t *nb = realloc(*b, n);
	if (!nb)
		return -ENOMEM;
	*b = nb;
	*cap = n;
	return 0;
}

static int nprocs(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

/* Runs fn over n inputs into a new dataset at out. */
static int run_engine(const char *out, const gf_convert_opts *o, uint32_t nclasses, const char *const *names,
                      uint64_t n, produce_fn fn, void *ctx, gf_convert_stats *st)
{
	int rc = 0, workers = o->workers > 0 ? o->workers : nprocs();
	if (workers > 64)
		workers = 64;
	uint64_t chunk = 32 * (uint64_t)workers;
	gf_dataset_writer *w = NULL;
	gf_writer_opts wo = { .shard_records = o->shard_records, .shard_bytes = o->shard_bytes, .nclasses = nclasses,
	                      .class_names = names, .overwrite = o->overwrite };
	engine e = { .fn = fn, .ctx = ctx, .total = n, .shuffle = o->shuffle, .seed = o->seed };
	pthread_t th[64];
	thread_arg args[64];
	int started = 0;
	double t0 = gf_now();
	const char *what = o->what ? o->what : out;
	memset(st, 0, sizeof(*st));
	pthread_mutex_init(&e.lock, NULL);
	pthread_cond_init(&e.go, NULL);
	pthread_cond_init(&e.done, NULL);
	e.items = calloc(chunk, sizeof(item));
	e.ws = calloc((size_t)workers, sizeof(worker_state));
	if (!e.items || !e.ws) {
		rc = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < workers; i++)
		if ((rc = gf_decoder_create(&e.ws[i].dec)))
			goto out;
	if ((rc = gf_dataset_writer_open(out, &wo, &w)))
		goto out;
	for (int i = 1; i < workers; i++) {
		args[i].e = &e;
		args[i].ws = &e.ws[i];
		if (pthread_create(&th[started + 1], NULL, worker_main, &args[i]))
			break; /* run with the threads we have */
		started++;
	}
	for (uint64_t base = 0; base < n; base += chunk) {
		e.base = base;
		e.n = n - base < chunk ? n - base : chunk;
		atomic_store(&e.next, 0);
		pthread_mutex_lock(&e.lock);
		e.active = started;
		e.gen++;
		pthread_cond_broadcast(&e.go);
		pthread_mutex_unlock(&e.lock);
		work_chunk(&e, &e.ws[0]);
		pthread_mutex_lock(&e.lock);
		while (e.active)
			pthread_cond_wait(&e.done, &e.lock);
		pthread_mutex_unlock(&e.lock);
		for (uint64_t j = 0; j < e.n; j++) {
			item *it = &e.items[j];
			if (it->status < 0) {
				rc = it->status;
				gf_seterr(rc, "%s", it->msg[0] ? it->msg : gf_strerror(rc));
				goto out;
			}
			if (it->status > 0) {
				st->skipped++;
				gf_log(GF_LOG_WARN, "skipped %s", it->msg);
				continue;
			}
			if ((rc = gf_dataset_writer_add(w, &it->h, it->buf)))
				goto out;
			st->records++;
			st->payload_bytes += it->h.payload;
		}
		if (!o->quiet)
			gf_progress_bar(what, base + e.n, n, t0);
	}
out:
	if (rc && !o->quiet)
		gf_progress_done(NULL);
	pthread_mutex_lock(&e.lock);
	e.quit = 1;
	pthread_cond_broadcast(&e.go);
	pthread_mutex_unlock(&e.lock);
	for (int i = 1; i <= started; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&e.lock);
	pthread_cond_destroy(&e.go);
	pthread_cond_destroy(&e.done);
	if (w) {
		if (rc)
			gf_dataset_writer_abort(w);
		else
			rc = gf_dataset_writer_finish(w);
	}
	if (e.ws)
		for (int i = 0; i < workers; i++) {
			gf_decoder_destroy(e.ws[i].dec);
			free(e.ws[i].pix);
			free(e.ws[i].pix2);
			free(e.ws[i].file);
		}
	if (e.items)
		for (uint64_t j = 0; j < chunk; j++)
			free(e.items[j].buf);
	free(e.items);
	free(e.ws);
	st->seconds = gf_now() - t0;
	if (!rc) {
		gf_dataset *ds;
		if (gf_dataset_open(out, &ds) == 0) {
			st->shards = gf_dataset_metadata(ds)->nshards;
			gf_dataset_close(ds);
		}
	}
	return rc;
}

/* Turns pixels (w x h x c) into the output record: resize, channel
 * conversion, raw copy or JPEG encode, per the options. */
static void emit_pixels(const gf_convert_opts *o, worker_state *ws, const uint8_t *pix, int w, int h, int c,
                        int32_t label, item *it)
{
	int rc;
	if (o->resize_w && o->resize_h && (o->resize_w != w || o->resize_h != h)) {
		size_t need = (size_t)o->resize_w * o->resize_h * c;
		if ((rc = grow_buf(&ws->pix2, &ws->pix2_cap, need)) ||
		    (rc = gf_resize_u8(ws->dec, ws->pix2, o->resize_w, o->resize_h, pix, w, h, (size_t)w * c, c,
		                       o->resize_mode))) {
			it->status = rc;
			return;
		}
		pix = ws->pix2;
		w = o->resize_w;
		h = o->resize_h;
	}
	it->h = (gf_record_header){ .label = label, .height = (uint32_t)h, .width = (uint32_t)w,
	                            .channels = (uint32_t)c };
	if (o->encoding == GF_ENC_JPEG) {
		const uint8_t *jpg;
		size_t len;
		if ((rc = gf_jpeg_encode(ws->dec, pix, w, h, c, o->quality ? o->quality : 95, o->subsamp, &jpg, &len))) {
			it->status = rc;
			snprintf(it->msg, sizeof(it->msg), "%s", gf_errmsg());
			return;
		}
		if ((rc = grow_buf(&it->buf, &it->cap, len))) {
			it->status = rc;
			return;
		}
		memcpy(it->buf, jpg, len);
		it->h.encoding = GF_ENC_JPEG;
		it->h.payload = (uint32_t)len;
	} else {
		size_t len = (size_t)w * h * c;
		if ((rc = grow_buf(&it->buf, &it->cap, len))) {
			it->status = rc;
			return;
		}
		memcpy(it->buf, pix, len);
		it->h.encoding = GF_ENC_RAW;
		it->h.payload = (uint32_t)len;
	}
}

/* ---- IDX ---- */

typedef struct idx_ctx {
	const gf_convert_opts *o;
	const uint8_t *images; /* (n, rows, cols) */
	const uint8_t *labels; /* (n) */
	int rows, cols;
} idx_ctx;

static void idx_produce(void *p, uint64_t i, worker_state *ws, item *it)
{
	idx_ctx *x = p;
	const uint8_t *img = x->images + i * (size_t)x->rows * x->cols;
	int c = x->o->channels ? x->o->channels : 1;
	if (c == 3) {
		size_t n = (size_t)x->rows * x->cols;
		if ((it->status = grow_buf(&ws->pix, &ws->pix_cap, 3 * n)))
			return;
		for (size_t k = 0; k < n; k++)
			ws->pix[3 * k] = ws->pix[3 * k + 1] = ws->pix[3 * k + 2] = img[k];
		img = ws->pix;
	}
	emit_pixels(x->o, ws, img, x->cols, x->rows, c, x->labels[i], it);
}

/* Parses an IDX header: magic 0 0 0x08 ndim, then ndim big-endian u32. */
int gf_idx_parse(const char *path, const uint8_t *b, size_t len, int ndim, uint32_t *dims)
{
	if (len < 4 || b[0] || b[1])
		return gf_seterr(GF_ECORRUPT, "%s: not an IDX file (bad magic)", path);
	if (b[2] != 0x08)
		return gf_seterr(GF_ECORRUPT, "%s: IDX element type 0x%02x, only unsigned bytes (0x08) supported", path,
		                 b[2]);
	if (b[3] != ndim)
		return gf_seterr(GF_ECORRUPT, "%s: IDX file with %d dimensions, expected %d", path, b[3], ndim);
	if (len < 4 + 4 * (size_t)ndim)
		return gf_seterr(GF_ECORRUPT, "%s: truncated IDX header", path);
	uint64_t total = 1;
	for (int i = 0; i < ndim; i++) {
		const uint8_t *p = b + 4 + 4 * i;
		dims[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
		total *= dims[i];
		if (total > ((uint64_t)1 << 40))
			return gf_seterr(GF_ECORRUPT, "%s: IDX dimensions too large", path);
	}
	if (len - 4 - 4 * (size_t)ndim != total)
		return gf_seterr(GF_ECORRUPT, "%s: IDX data is %zu bytes, header says %llu", path, len - 4 - 4 * (size_t)ndim,
		                 (unsigned long long)total);
	return 0;
}

int gf_convert_idx(const char *images, const char *labels, const char *out, const gf_convert_opts *o,
                   const char *const *class_names, uint32_t nclasses, gf_convert_stats *st)
{
	uint8_t *ib = NULL, *lb = NULL;
	size_t il, ll;
	uint32_t idim[3], ldim[1];
	int rc;
	if ((rc = gf_read_file(images, 1, &ib, &il)) || (rc = gf_read_file(labels, 1, &lb, &ll)))
		goto out;
	if ((rc = gf_idx_parse(images, ib, il, 3, idim)) || (rc = gf_idx_parse(labels, lb, ll, 1, ldim)))
		goto out;
	if (idim[0] != ldim[0]) {
		rc = gf_seterr(GF_ECORRUPT, "%s holds %u images but %s holds %u labels", images, idim[0], labels, ldim[0]);
		goto out;
	}
	if (!idim[1] || !idim[2] || idim[1] > GF_RECORD_MAX_DIM || idim[2] > GF_RECORD_MAX_DIM) {
		rc = gf_seterr(GF_ECORRUPT, "%s: image size %ux%u not supported", images, idim[1], idim[2]);
		goto out;
	}
	const uint8_t *labs = lb + 8;
	uint32_t maxl = 0;
	for (uint32_t i = 0; i < ldim[0]; i++)
		if (labs[i] > maxl)
			maxl = labs[i];
	if (!nclasses)
		nclasses = maxl + 1;
	for (uint32_t i = 0; i < ldim[0]; i++)
		if (labs[i] >= nclasses) {
			rc = gf_seterr(GF_EPARAM, "%s: record %u has label %u but there are %u classes", labels, i, labs[i],
			               nclasses);
			goto out;
		}
	if (o->channels != 0 && o->channels != 1 && o->channels != 3) {
		rc = gf_seterr(GF_EPARAM, "channels must be 1 or 3, not %d", o->channels);
		goto out;
	}
	idx_ctx x = { .o = o, .images = ib + 16, .labels = labs, .rows = (int)idim[1], .cols = (int)idim[2] };
	uint64_t n = idim[0];
	if (o->limit && o->limit < n)
		n = o->limit;
	rc = run_engine(out, o, nclasses, class_names, n, idx_produce, &x, st);
out:
	free(ib);
	free(lb);
	return rc;
}

/* ---- image files from any source ---- */

/* The source's size rule for an image of w x h x c (channels c only when
 * the output keeps the source's). */
static int check_size(const gf_image_source *src, const gf_convert_opts *o, int w, int h, int c)
{
	return src->width <= 0 || (w == src->width && h == src->height && (o->channels || c == src->channels));
}

static void size_error(const gf_image_source *src, uint64_t i, int w, int h, int c, item *it)
{
	char name[256];
	src->name(src->ctx, i, name, sizeof(name));
	it->status = GF_ECORRUPT;
	snprintf(it->msg, sizeof(it->msg), "%.150s is %dx%dx%d but %.60s (the first image) is %dx%dx%d: give resize= "
	         "to convert images of different sizes", name, w, h, c, src->first ? src->first : "?", src->width,
	         src->height, src->channels);
}

typedef struct images_ctx {
	const gf_image_source *src;
	const gf_convert_opts *o;
} images_ctx;

static void image_produce(void *p, uint64_t i, worker_state *ws, item *it)
{
	const gf_image_source *src = ((const images_ctx *)p)->src;
	const gf_convert_opts *o = ((const images_ctx *)p)->o;
	size_t len = 0;
	int32_t label = -1;
	int rc = src->read(src->ctx, i, &ws->file, &ws->file_cap, &len, &label);
	if (rc) {
		it->status = rc < 0 ? rc : 1;
		snprintf(it->msg, sizeof(it->msg), "%s", gf_errmsg());
		return;
	}
	const uint8_t *buf = ws->file;
	/* a JPEG that needs no change is stored as it is */
	if (o->encoding == GF_ENC_JPEG && !o->quality && !o->resize_w && len >= 3 && buf[0] == 0xff && buf[1] == 0xd8) {
		int w, h, c;
		if (gf_jpeg_info(ws->dec, buf, len, &w, &h, &c) == 0 && (!o->channels || o->channels == c) &&
		    (uint32_t)w <= GF_RECORD_MAX_DIM && (uint32_t)h <= GF_RECORD_MAX_DIM && len <= UINT32_MAX) {
			if (!check_size(src, o, w, h, c)) {
				size_error(src, i, w, h, c, it);
				return;
			}
			if ((it->status = grow_buf(&it->buf, &it->cap, len)))
				return;
			memcpy(it->buf, buf, len);
			it->h = (gf_record_header){ .label = label, .encoding = GF_ENC_JPEG, .height = (uint32_t)h,
			                            .width = (uint32_t)w, .channels = (uint32_t)c, .payload = (uint32_t)len };
			return;
		}
	}
	int w, h, c, is_jpeg;
	char name[256];
	rc = gf_image_file_decode(ws->dec, buf, len, o->channels, &ws->pix, &ws->pix_cap, &w, &h, &c, &is_jpeg);
	if (rc) {
		it->status = rc == -ENOMEM ? rc : 1;
		src->name(src->ctx, i, name, sizeof(name));
		snprintf(it->msg, sizeof(it->msg), "%.200s: %.180s", name, gf_errmsg());
		return;
	}
	if (!check_size(src, o, w, h, c)) {
		size_error(src, i, w, h, c, it);
		return;
	}
	emit_pixels(o, ws, ws->pix, w, h, c, label, it);
	if (it->status > 0 || (it->status < 0 && !it->msg[0])) {
		char why[384];
		snprintf(why, sizeof(why), "%s", it->msg[0] ? it->msg : gf_strerror(it->status));
		src->name(src->ctx, i, name, sizeof(name));
		snprintf(it->msg, sizeof(it->msg), "%.200s: %.180s", name, why);
	}
}

int gf_convert_images(const gf_image_source *src, const char *out, const gf_convert_opts *o, uint32_t nclasses,
                      const char *const *class_names, gf_convert_stats *st)
{
	if (o->channels != 0 && o->channels != 1 && o->channels != 3)
		return gf_seterr(GF_EPARAM, "channels must be 1 or 3, not %d", o->channels);
	images_ctx x = { .src = src, .o = o };
	uint64_t n = o->limit && o->limit < src->n ? o->limit : src->n;
	return run_engine(out, o, nclasses, class_names, n, image_produce, &x, st);
}

/* ---- image folders ---- */

typedef struct file_ent {
	char *path;
	int32_t label;
} file_ent;

typedef struct folder_ctx {
	const gf_convert_opts *o;
	file_ent *files;
	uint64_t n, cap;
	uint64_t ignored;
	char **classes;
	uint32_t nclasses;
} folder_ctx;

static int has_image_ext(const char *name)
{
	const char *dot = strrchr(name, '.');
	return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".png"));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the entries of dir (no dot files). */
static int list_dir(const char *dir, char ***names, size_t *n)
{
	DIR *d = opendir(dir);
	if (!d)
		return gf_seterr(-errno, "%s: %s", dir, strerror(errno));
	size_t cap = 64, cnt = 0;
	char **v = malloc(cap * sizeof(char *));
	struct dirent *e;
	int rc = 0;
	while (v && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (cnt == cap) {
			char **nv = realloc(v, 2 * cap * sizeof(char *));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
			cap *= 2;
		}
		if (!(v[cnt] = strdup(e->d_name))) {
			rc = -ENOMEM;
			break;
		}
		cnt++;
	}
	closedir(d);
	if (!v)
		return -ENOMEM;
	if (rc) {
		for (size_t i = 0; i < cnt; i++)
			free(v[i]);
		free(v);
		return rc;
	}
	qsort(v, cnt, sizeof(char *), cmp_str);
	*names = v;
	*n = cnt;
	return 0;
}

static void free_names(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static int add_files(folder_ctx *x, const char *dir, int32_t label, int depth)
{
	char **names;
	size_t n;
	int rc;
	if (depth > 32)
		return gf_seterr(-ELOOP, "%s: folders nested too deep", dir);
	if ((rc = list_dir(dir, &names, &n)))
		return rc;
	for (size_t i = 0; i < n && !rc; i++) {
		char *p = gf_path_join(dir, names[i]);
		struct stat st;
		if (!p) {
			rc = -ENOMEM;
			break;
		}
		if (stat(p, &st)) {
			gf_log(GF_LOG_WARN, "skipped %s: %s", p, strerror(errno));
			free(p);
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			rc = add_files(x, p, label, depth + 1);
			free(p);
			continue;
		}
		if (!S_ISREG(st.st_mode) || !has_image_ext(names[i])) {
			x->ignored++;
			free(p);
			continue;
		}
		if (x->n == x->cap) {
			uint64_t nc = x->cap ? 2 * x->cap : 1024;
			file_ent *nf = realloc(x->files, nc * sizeof(*nf));
			if (!nf) {
				free(p);
				rc = -ENOMEM;
				break;
			}
			x->files = nf;
			x->cap = nc;
		}
		x->files[x->n].path = p;
		x->files[x->n].label = label;
		x->n++;
	}
	free_names(names, n);
	return rc;
}

/* ---- image folders: the files ---- */

static int folder_read(void *p, uint64_t i, uint8_t **buf, size_t *cap, size_t *len, int32_t *label)
{
	folder_ctx *x = p;
	uint8_t *b;
	int rc = gf_read_file(x->files[i].path, 0, &b, len);
	if (rc)
		return rc == -ENOMEM ? rc : 1;
	free(*buf);
	*buf = b;
	*cap = *len;
	*label = x->files[i].label;
	return 0;
}

static void folder_name(void *p, uint64_t i, char *name, size_t size)
{
	snprintf(name, size, "%s", ((folder_ctx *)p)->files[i].path);
}

int gf_convert_folder(const char *dir, const char *out, const gf_convert_opts *o, gf_convert_stats *st)
{
	folder_ctx x = { .o = o };
	char **names = NULL;
	size_t n = 0;
	int rc;
	if (o->channels != 0 && o->channels != 1 && o->channels != 3)
		return gf_seterr(GF_EPARAM, "channels must be 1 or 3, not %d", o->channels);
	if ((rc = list_dir(dir, &names, &n)))
		return rc;
	x.classes = calloc(n ? n : 1, sizeof(char *));
	if (!x.classes) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		char *p = gf_path_join(dir, names[i]);
		struct stat s;
		if (!p) {
			rc = -ENOMEM;
			goto out;
		}
		if (stat(p, &s) == 0 && S_ISDIR(s.st_mode)) {
			x.classes[x.nclasses] = names[i];
			if ((rc = add_files(&x, p, (int32_t)x.nclasses, 0))) {
				free(p);
				goto out;
			}
			x.nclasses++;
		} else {
			x.ignored++;
		}
		free(p);
	}
	if (!x.nclasses) {
		rc = gf_seterr(GF_ENOTFOUND, "%s: no class sub-folders (expected DIR/<class>/<image>)", dir);
		goto out;
	}
	if (!x.n) {
		rc = gf_seterr(GF_ENOTFOUND, "%s: no .jpg, .jpeg or .png files in its %u class folders", dir, x.nclasses);
		goto out;
	}
	gf_image_source src = { .read = folder_read, .name = folder_name, .ctx = &x, .n = x.n };
	rc = gf_convert_images(&src, out, o, x.nclasses, (const char *const *)x.classes, st);
	st->ignored = x.ignored;
out:
	for (uint64_t i = 0; i < x.n; i++)
		free(x.files[i].path);
	free(x.files);
	free(x.classes);
	free_names(names, n);
	return rc;
}

/* ---- synthetic ImageNet-like data ---- */

typedef struct synth_ctx {
	const gf_convert_opts *o;
	const gf_synth_opts *so;
} synth_ctx;

/* Input i: class by class, as a folder import (the classes' sizes differ
 * by one at most). */
static uint32_t synth_label(const gf_synth_opts *so, uint64_t i)
{
	return (uint32_t)((__uint128_t)i * so->classes / so->count);
}

static void synth_produce(void *p, uint64_t i, worker_state *ws, item *it)
{
	synth_ctx *x = p;
	int w = x->so->width, h = x->so->height;
	if ((it->status = grow_buf(&ws->pix, &ws->pix_cap, (size_t)w * h * 3)))
		return;
	uint32_t label = synth_label(x->so, i);
	gf_synth_image(ws->pix, w, h, x->so->seed, i, label);
	gf_convert_opts o = *x->o;
	if (o.encoding == GF_ENC_JPEG)
		o.quality = x->so->quality;
	o.channels = 3;
	emit_pixels(&o, ws, ws->pix, w, h, 3, (int32_t)label, it);
}

/* Bytes a record of value length len takes in an LMDB shard, about: a
 * value over half a page goes to whole overflow pages (and a node in a
 * leaf), a smaller one shares a leaf page with its neighbours (node
 * header, 8-byte key, its index slot). */
static double record_disk_bytes(double len)
{
	if (len > 2000)
		return 4096.0 * (double)(uint64_t)((len + 16 + 4095) / 4096) + 26;
	return len + 20;
}

static void human(char *buf, size_t n, double b)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	int i = 0;
	while (b >= 1024 && i < 6)
		b /= 1024, i++;
	snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

/* Refuses a synthetic set the file system under out cannot hold: the
 * mean size of a few records rendered across the index range, times the
 * count, against the space free to this user (statvfs f_bavail). */
static int synth_check_space(const char *out, const gf_synth_opts *so, const gf_convert_opts *o)
{
	synth_ctx x = { .o = o, .so = so };
	worker_state ws = { 0 };
	item it = { 0 };
	int rc = gf_decoder_create(&ws.dec), k = 0;
	double bytes = 0;
	const int samples = so->count < 16 ? (int)so->count : 16;
	for (; !rc && k < samples; k++) {
		synth_produce(&x, (uint64_t)((__uint128_t)so->count * (uint64_t)k / (uint64_t)samples), &ws, &it);
		if ((rc = it.status))
			break;
		bytes += record_disk_bytes(GF_RECORD_HEADER_SIZE + (double)it.h.payload + 4);
	}
	gf_decoder_destroy(ws.dec);
	free(ws.pix);
	free(ws.pix2);
	free(it.buf);
	if (rc < 0)
		return rc;
	/* the first directory that exists on the way to out */
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", out);
	struct statvfs vfs;
	int ok = 0;
	while (!ok) {
		char *slash = strrchr(dir, '/');
		if (!slash)
			snprintf(dir, sizeof(dir), ".");
		else
			slash[slash == dir] = '\0'; /* "/x" -> "/" */
		ok = statvfs(dir, &vfs) == 0;
		if (!slash || !strcmp(dir, "/"))
			break;
	}
	double per = k ? bytes / k * 1.1 : 0, need = per * (double)so->count + (16u << 20);
	double avail = ok ? (double)vfs.f_bavail * (double)vfs.f_frsize : 0;
	if (ok && need > avail) {
		char b1[32], b2[32], b3[32];
		human(b1, sizeof(b1), need);
		human(b2, sizeof(b2), per);
		human(b3, sizeof(b3), avail);
		return gf_seterr(GF_EPARAM,
		                 "synth: %s needs about %s (%llu records of about %s on disk, from %d rendered ones) but "
		                 "%s has %s free; lower count= or make room",
		                 out, b1, (unsigned long long)so->count, b2, k, dir, b3);
	}
	return 0;
}

int gf_convert_synth(const char *out, const gf_synth_opts *so, const gf_convert_opts *o, gf_convert_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (so->width <= 0 || so->height <= 0 || (uint32_t)so->width > GF_RECORD_MAX_DIM ||
	    (uint32_t)so->height > GF_RECORD_MAX_DIM)
		return gf_seterr(GF_EPARAM, "synth: bad size %dx%d", so->width, so->height);
	if (so->quality < 1 || so->quality > 100)
		return gf_seterr(GF_EPARAM, "synth: quality %d outside 1..100", so->quality);
	if (so->classes == 0 || so->classes > 100000)
		return gf_seterr(GF_EPARAM, "synth: classes must be 1..100000, not %u", so->classes);
	int rc = synth_check_space(out, so, o);
	if (rc)
		return rc;
	synth_ctx x = { .o = o, .so = so };
	return run_engine(out, o, so->classes, NULL, so->count, synth_produce, &x, st);
}
