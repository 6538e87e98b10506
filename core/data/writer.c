/* Writing datasets: records appended in key order into LMDB shards.
 *
 * The converters feed records in order; each goes into the current shard
 * with MDB_APPEND (keys ascend, so pages fill completely and nothing is
 * rebalanced). Shards are cut by record count or bytes. Transactions are
 * committed every 64 MiB, and the map is grown before it could fill, so
 * MDB_MAP_FULL never loses a batch. The meta records need the final totals,
 * so they are written at the end into every shard. Everything is built in
 * OUT.tmp and renamed to OUT at the end.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lmdb.h>

#include <ganflow/crc32c.h>
#include <ganflow/dataset.h>
#include <ganflow/err.h>

#include "dataset_int.h"

#define TXN_BYTES (64u << 20)
#define DEFAULT_SHARD_BYTES (1ull << 30)

typedef struct wshard {
	gf_shard_meta m;  /* stats; class index built at the end */
	int32_t *labels;  /* (m.count) */
	size_t cap;
	uint64_t bytes;   /* value bytes */
} wshard;

struct gf_dataset_writer {
	char *out, *tmp;
	gf_writer_opts o;
	char **names;     /* (o.nclasses) owned copies */
	uint64_t count;
	wshard *shards;
	uint32_t nshards, cap;
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	size_t mapsize;
	uint64_t txn_bytes;   /* estimate of the pages the open transaction adds */
	uint64_t used_bytes;  /* pages in the file at the last commit */
	uint8_t *vbuf;
	size_t vcap;
};

/* ---- helpers ---- */

static int mkdir_p(const char *path)
{
	char *p = strdup(path);
	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0777) && errno != EEXIST) {
			int e = -errno;
			free(p);
			return e;
		}
		*s = '/';
	}
	int rc = (mkdir(p, 0777) && errno != EEXIST) ? -errno : 0;
	free(p);
	return rc;
}

static int lmdb_err(gf_dataset_writer *w, int rc, const char *what)
{
	char name[32];
	snprintf(name, sizeof(name), GF_SHARD_NAME_FMT, w->nshards ? w->nshards - 1 : 0);
	return gf_seterr(rc > 0 ? -rc : rc, "dataset %s: %s/%s: %s: %s", w->out, w->tmp, name, what, mdb_strerror(rc));
}

/* ---- shards ---- */

static int env_open(gf_dataset_writer *w, const char *dir, size_t mapsize)
{
	int rc;
	if ((rc = mdb_env_create(&w->env)))
		return rc;
	if ((rc = mdb_env_set_mapsize(w->env, mapsize)))
		return rc;
	w->mapsize = mapsize;
	return mdb_env_open(w->env, dir, MDB_NOSYNC | MDB_NOMETASYNC | MDB_NORDAHEAD, 0644);
}

static int txn_begin(gf_dataset_writer *w)
{
	int rc = mdb_txn_begin(w->env, NULL, 0, &w->txn);
	if (!rc)
		rc = mdb_dbi_open(w->txn, NULL, 0, &w->dbi);
	w->txn_bytes = 0;
	return rc;
}

static int txn_commit(gf_dataset_writer *w)
{
	int rc = mdb_txn_commit(w->txn);
	w->txn = NULL;
	if (rc)
		return rc;
	MDB_envinfo info;
	MDB_stat st;
	mdb_env_info(w->env, &info);
	mdb_env_stat(w->env, &st);
	w->used_bytes = (uint64_t)(info.me_last_pgno + 1) * st.ms_psize;
	return 0;
}

/* Commits, syncs and closes the current shard's environment. */
static int shard_end(gf_dataset_writer *w)
{
	int rc = 0;
	if (!w->env)
		return 0;
	if (w->txn && (rc = txn_commit(w)))
		return lmdb_err(w, rc, "commit");
	if ((rc = mdb_env_sync(w->env, 1)))
		return lmdb_err(w, rc, "sync");
	mdb_env_close(w->env);
	w->env = NULL;
	return 0;
}

static int shard_start(gf_dataset_writer *w)
{
	int rc;
	if ((rc = shard_end(w)))
		return rc;
	if (w->nshards == w->cap) {
		uint32_t nc = w->cap ? 2 * w->cap : 8;
		wshard *n = realloc(w->shards, nc * sizeof(*n));
		if (!n)
			return -ENOMEM;
		w->shards = n;
		w->cap = nc;
	}
	wshard *s = &w->shards[w->nshards++];
	memset(s, 0, sizeof(*s));
	s->m.number = w->nshards - 1;
	s->m.first = w->count;
	s->m.min_h = s->m.min_w = s->m.min_c = UINT32_MAX;
	char name[32], *dir;
	snprintf(name, sizeof(name), GF_SHARD_NAME_FMT, s->m.number);
	if (!(dir = gf_path_join(w->tmp, name)))
		return -ENOMEM;
	if (mkdir(dir, 0777)) {
		rc = gf_seterr(-errno, "dataset %s: mkdir %s: %s", w->out, dir, strerror(errno));
		free(dir);
		return rc;
	}
	size_t mapsize = w->o.shard_bytes ? (size_t)(w->o.shard_bytes + w->o.shard_bytes / 4) + (64u << 20)
	                                  : (256u << 20);
	rc = env_open(w, dir, mapsize);
	free(dir);
	w->used_bytes = 3 * 4096;
	if (rc || (rc = txn_begin(w)))
		return lmdb_err(w, rc, "open");
	return 0;
}

/* Pages a value of len bytes adds, generously: overflow pages for large
 * values, a leaf share (node header + key + data, half-full leaves) for
 * small ones. */
static uint64_t value_cost(size_t len)
{
	if (len > 1000)
		return ((len + 16 + 4095) / 4096) * 4096 + 64;
	return 2 * (len + 8 + 8 + 2);
}

/* Makes sure the map can take one more value of len bytes: commits the
 * transaction and grows the map when the estimate says it could fill. */
static int make_room(gf_dataset_writer *w, size_t len)
{
	int rc;
	uint64_t cost = value_cost(len);
	if (w->txn_bytes + cost > TXN_BYTES && w->txn_bytes) {
		if ((rc = txn_commit(w)) || (rc = txn_begin(w)))
			return lmdb_err(w, rc, "commit");
	}
	uint64_t need = w->used_bytes + (w->txn_bytes + cost) * 2 + (8u << 20);
	if (need > w->mapsize) {
		if ((rc = txn_commit(w)))
			return lmdb_err(w, rc, "commit");
		size_t ns = w->mapsize * 2 > need * 2 ? w->mapsize * 2 : (size_t)need * 2;
		if ((rc = mdb_env_set_mapsize(w->env, ns)))
			return lmdb_err(w, rc, "grow map");
		w->mapsize = ns;
		if ((rc = txn_begin(w)))
			return lmdb_err(w, rc, "begin");
	}
	w->txn_bytes += cost;
	return 0;
}

/* ---- public ---- */

int gf_dataset_writer_open(const char *out, const gf_writer_opts *o, gf_dataset_writer **wp)
{
	int rc;
	*wp = NULL;
	if (o->class_names)
		for (uint32_t c = 0; c < o->nclasses; c++)
			if (!o->class_names[c] || strlen(o->class_names[c]) > 65535)
				return gf_seterr(GF_EPARAM, "dataset %s: class %u has no name or one over 65535 bytes", out, c);
	struct stat st;
	if (!o->overwrite && stat(out, &st) == 0)
		return gf_seterr(-EEXIST, "dataset %s: already exists", out);
	gf_dataset_writer *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->o = *o;
	w->o.class_names = NULL;
	if (!w->o.shard_records && !w->o.shard_bytes)
		w->o.shard_bytes = DEFAULT_SHARD_BYTES;
	size_t l = strlen(out);
	while (l > 1 && out[l - 1] == '/')
		l--;
	w->out = strndup(out, l);
	w->tmp = malloc(l + 5);
	w->names = calloc(o->nclasses ? o->nclasses : 1, sizeof(char *));
	if (!w->out || !w->tmp || !w->names) {
		rc = -ENOMEM;
		goto fail;
	}
	snprintf(w->tmp, l + 5, "%s.tmp", w->out);
	for (uint32_t c = 0; c < o->nclasses; c++) {
		char num[16];
		snprintf(num, sizeof(num), "%u", c);
		w->names[c] = strdup(o->class_names ? o->class_names[c] : num);
		if (!w->names[c]) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	if ((rc = gf_remove_tree(w->tmp))) {
		rc = gf_seterr(rc, "dataset %s: cannot remove leftover %s: %s", out, w->tmp, strerror(-rc));
		goto fail;
	}
	if ((rc = mkdir_p(w->tmp))) {
		rc = gf_seterr(rc, "dataset %s: cannot create %s: %s", out, w->tmp, strerror(-rc));
		goto fail;
	}
	*wp = w;
	return 0;
fail:
	gf_dataset_writer_abort(w);
	return rc;
}

uint64_t gf_dataset_writer_count(const gf_dataset_writer *w)
{
	return w->count;
}

static int add_value(gf_dataset_writer *w, int32_t label, const void *value, size_t len, const gf_record_header *h)
{
	int rc;
	wshard *s = w->nshards ? &w->shards[w->nshards - 1] : NULL;
	if (!s || (w->o.shard_records && s->m.count >= w->o.shard_records) ||
	    (w->o.shard_bytes && s->m.count && s->bytes + len > w->o.shard_bytes)) {
		if ((rc = shard_start(w)))
			return rc;
		s = &w->shards[w->nshards - 1];
	}
	if (s->m.count >= UINT32_MAX)
		return gf_seterr(GF_EPARAM, "dataset %s: shard %u is full (2^32 records)", w->out, s->m.number);
	if (s->m.count == s->cap) {
		size_t nc = s->cap ? 2 * s->cap : 1024;
		int32_t *n = realloc(s->labels, nc * sizeof(*n));
		if (!n)
			return -ENOMEM;
		s->labels = n;
		s->cap = nc;
	}
	if ((rc = make_room(w, len)))
		return rc;
	uint8_t kb[8];
	gf_key_put(kb, w->count);
	MDB_val k = { 8, kb }, v = { len, (void *)value };
	if ((rc = mdb_put(w->txn, w->dbi, &k, &v, MDB_APPEND))) {
		char what[64];
		snprintf(what, sizeof(what), "put key %llu", (unsigned long long)w->count);
		return lmdb_err(w, rc, what);
	}
	s->labels[s->m.count++] = label;
	s->bytes += len;
	if (h) {
		s->m.enc_count[h->encoding]++;
		s->m.payload_bytes += h->payload;
		if (h->height < s->m.min_h) s->m.min_h = h->height;
		if (h->height > s->m.max_h) s->m.max_h = h->height;
		if (h->width < s->m.min_w) s->m.min_w = h->width;
		if (h->width > s->m.max_w) s->m.max_w = h->width;
		if (h->channels < s->m.min_c) s->m.min_c = h->channels;
		if (h->channels > s->m.max_c) s->m.max_c = h->channels;
	}
	w->count++;
	return 0;
}

int gf_dataset_writer_add(gf_dataset_writer *w, const gf_record_header *h, const void *payload)
{
	int rc;
	uint8_t hdr[GF_RECORD_HEADER_SIZE];
	gf_record_header hc = *h;
	hc.flags |= GF_RECORD_CRC32C; /* every record written carries its checksum */
	h = &hc;
	if ((rc = gf_record_header_write(h, hdr))) {
		char why[512];
		snprintf(why, sizeof(why), "%s", gf_errmsg());
		return gf_seterr(rc, "dataset %s: record %llu: %s", w->out, (unsigned long long)w->count, why);
	}
	if (h->label >= 0 && (uint32_t)h->label >= w->o.nclasses)
		return gf_seterr(GF_EPARAM, "dataset %s: record %llu: label %d >= class count %u", w->out,
		                 (unsigned long long)w->count, h->label, w->o.nclasses);
	size_t len = GF_RECORD_HEADER_SIZE + (size_t)h->payload + 4;
	if (len > w->vcap) {
		size_t nc = len + len / 2;
		uint8_t *n = realloc(w->vbuf, nc);
		if (!n)
			return -ENOMEM;
		w->vbuf = n;
		w->vcap = nc;
	}
	memcpy(w->vbuf, hdr, GF_RECORD_HEADER_SIZE);
	memcpy(w->vbuf + GF_RECORD_HEADER_SIZE, payload, h->payload);
	gf_put_u32(w->vbuf + len - 4, gf_crc32c(0, payload, h->payload));
	return add_value(w, h->label, w->vbuf, len, h);
}

int gf_dataset_writer_add_value(gf_dataset_writer *w, int32_t label, const void *value, size_t len)
{
	if (label < -1 || (label >= 0 && (uint32_t)label >= w->o.nclasses))
		return gf_seterr(GF_EPARAM, "dataset %s: record %llu: label %d outside 0..%u", w->out,
		                 (unsigned long long)w->count, label, w->o.nclasses);
	gf_record_header h;
	int ok = gf_record_parse(value, len, &h, NULL) == 0;
	gf_clearerr();
	return add_value(w, label, value, len, ok ? &h : NULL);
}

/* Builds shard s's class index from its labels. */
static int build_index(gf_dataset_writer *w, wshard *s)
{
	gf_shard_meta *m = &s->m;
	uint32_t nc = w->o.nclasses;
	m->total = w->count;
	m->nshards = w->nshards;
	m->nclasses = nc;
	m->names = w->names;
	if (m->min_h == UINT32_MAX)
		m->min_h = m->min_w = m->min_c = 0;
	m->class_n = calloc(nc ? nc : 1, sizeof(uint64_t));
	m->class_idx = calloc(nc ? nc : 1, sizeof(uint32_t *));
	m->idx_block = malloc((m->count ? m->count : 1) * sizeof(uint32_t));
	if (!m->class_n || !m->class_idx || !m->idx_block)
		return -ENOMEM;
	for (uint64_t i = 0; i < m->count; i++)
		if (s->labels[i] >= 0)
			m->class_n[s->labels[i]]++;
		else
			m->unlabelled++;
	uint32_t *p = m->idx_block;
	for (uint32_t c = 0; c < nc; c++) {
		m->class_idx[c] = p;
		p += m->class_n[c];
	}
	uint64_t *fill = calloc(nc ? nc : 1, sizeof(uint64_t));
	if (!fill)
		return -ENOMEM;
	for (uint64_t i = 0; i < m->count; i++)
		if (s->labels[i] >= 0) {
			int32_t c = s->labels[i];
			m->class_idx[c][fill[c]++] = (uint32_t)i;
		}
	free(fill);
	return 0;
}

static void wshard_free(wshard *s)
{
	s->m.names = NULL; /* owned by the writer */
	gf_meta_free(&s->m);
	free(s->labels);
}

/* Reopens shard i and puts its meta record. */
static int write_meta(gf_dataset_writer *w, uint32_t i)
{
	int rc;
	wshard *s = &w->shards[i];
	uint8_t *buf = NULL;
	size_t len = 0;
	char name[32], *dir;
	if ((rc = build_index(w, s)) || (rc = gf_meta_encode(&s->m, &buf, &len)))
		return rc;
	snprintf(name, sizeof(name), GF_SHARD_NAME_FMT, i);
	if (!(dir = gf_path_join(w->tmp, name))) {
		free(buf);
		return -ENOMEM;
	}
	char *file = gf_path_join(dir, "data.mdb");
	struct stat st;
	size_t fsize = file && stat(file, &st) == 0 ? (size_t)st.st_size : 0;
	free(file);
	rc = env_open(w, dir, fsize + 2 * len + (16u << 20));
	if (!rc)
		rc = txn_begin(w);
	if (!rc) {
		MDB_val k = { 8, (void *)GF_META_KEY }, v = { len, buf };
		rc = mdb_put(w->txn, w->dbi, &k, &v, 0);
	}
	if (!rc) {
		rc = mdb_txn_commit(w->txn);
		w->txn = NULL;
	}
	if (!rc)
		rc = mdb_env_sync(w->env, 1);
	if (rc) {
		rc = gf_seterr(rc > 0 ? -rc : rc, "dataset %s: %s: writing %s: %s", w->out, dir, GF_META_KEY,
		               mdb_strerror(rc));
		if (w->txn)
			mdb_txn_abort(w->txn);
		w->txn = NULL;
	}
	if (w->env)
		mdb_env_close(w->env);
	w->env = NULL;
	free(dir);
	free(buf);
	return rc;
}

static void writer_free(gf_dataset_writer *w)
{
	if (w->txn)
		mdb_txn_abort(w->txn);
	if (w->env)
		mdb_env_close(w->env);
	for (uint32_t i = 0; i < w->nshards; i++)
		wshard_free(&w->shards[i]);
	free(w->shards);
	if (w->names)
		for (uint32_t c = 0; c < w->o.nclasses; c++)
			free(w->names[c]);
	free(w->names);
	free(w->vbuf);
	free(w->out);
	free(w->tmp);
	free(w);
}

int gf_dataset_writer_finish(gf_dataset_writer *w)
{
	int rc;
	if ((rc = shard_end(w)))
		goto fail;
	if (w->nshards == 0 && (rc = shard_start(w)))
		goto fail; /* an empty dataset still has one shard with its meta */
	if ((rc = shard_end(w)))
		goto fail;
	for (uint32_t i = 0; i < w->nshards; i++)
		if ((rc = write_meta(w, i)))
			goto fail;
	struct stat st;
	if (stat(w->out, &st) == 0) {
		size_t l = strlen(w->out) + 32;
		char *old = malloc(l);
		if (!old) {
			rc = -ENOMEM;
			goto fail;
		}
		snprintf(old, l, "%s.old-%d", w->out, (int)getpid());
		if (rename(w->out, old)) {
			rc = gf_seterr(-errno, "dataset %s: cannot move the old dataset aside: %s", w->out, strerror(errno));
			free(old);
			goto fail;
		}
		if (rename(w->tmp, w->out)) {
			rc = gf_seterr(-errno, "dataset %s: rename %s: %s", w->out, w->tmp, strerror(errno));
			rename(old, w->out);
			free(old);
			goto fail;
		}
		gf_remove_tree(old);
		free(old);
	} else if (rename(w->tmp, w->out)) {
		rc = gf_seterr(-errno, "dataset %s: rename %s: %s", w->out, w->tmp, strerror(errno));
		goto fail;
	}
	writer_free(w);
	return 0;
fail:
	gf_dataset_writer_abort(w);
	return rc;
}

void gf_dataset_writer_abort(gf_dataset_writer *w)
{
	if (!w)
		return;
	if (w->txn)
		mdb_txn_abort(w->txn);
	w->txn = NULL;
	if (w->env)
		mdb_env_close(w->env);
	w->env = NULL;
	if (w->tmp)
		gf_remove_tree(w->tmp);
	writer_free(w);
}
