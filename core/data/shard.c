/* core/data, the dataset engine: the shard format and its records
 * (record.c, shard.c, writer.c), LMDB streams and record order (stream.c,
 * order.c), JPEG decoding and transforms (decode.c) and Caffe LMDBs
 * (caffe.c). It uses only core/base; the reader stages, core/train,
 * core/eval, core/lua (gf.dataset) and datasets/ use it through
 * <ganflow/dataset.h> and <ganflow/decode.h>.
 *
 * Opening datasets read-only and finding records in them.
 *
 * A dataset is a directory of LMDB shards (or one shard). Each shard is
 * mapped read-only with one long-lived read transaction, so value pointers
 * handed out point into the map and stay valid until gf_dataset_close.
 * The meta records of the shards are checked against each other and merged
 * into one gf_dataset_meta. Nothing per record is kept in memory: a
 * ganflow shard's label index stays in its meta record, in the map, and is
 * read from there when asked for (gf_dataset_class_positions). A Caffe
 * LMDB opens as one shard whose meta, label index and key index (8 + 4
 * bytes a record) are built by walking it (caffe.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <lmdb.h>

#include <ganflow/dataset.h>
#include <ganflow/err.h>

#include "dataset_int.h"

typedef struct shard {
	gf_shard_info info;
	char *path, *file;
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	gf_shard_meta meta;
	int caffe;          /* a Caffe LMDB: records through cx */
	gf_caffe_index cx;
} shard;

struct gf_dataset {
	char *path;
	gf_dataset_format format;
	uint32_t n;
	shard *shards;
	gf_dataset_meta meta;
	char **names;          /* (nclasses) */
	uint64_t *class_count; /* (nclasses) */
};

/* ---- helpers ---- */

char *gf_path_join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p = malloc(a + b + 2);
	if (!p)
		return NULL;
	memcpy(p, dir, a);
	size_t o = a;
	if (a && dir[a - 1] != '/')
		p[o++] = '/';
	memcpy(p + o, name, b + 1);
	return p;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	int rc = (flag == FTW_DP || flag == FTW_D) ? rmdir(path) : unlink(path);
	return rc ? -errno : 0;
}

int gf_remove_tree(const char *path)
{
	struct stat st;
	if (lstat(path, &st))
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) ? -errno : 0;
	int rc = nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return rc > 0 ? -EIO : rc;
}

/* ---- shards ---- */

static void shard_close(shard *s)
{
	if (s->txn)
		mdb_txn_abort(s->txn);
	if (s->env)
		mdb_env_close(s->env);
	if (s->info.fd >= 0)
		close(s->info.fd);
	gf_meta_free(&s->meta);
	gf_caffe_index_free(&s->cx);
	free(s->path);
	free(s->file);
	memset(s, 0, sizeof(*s));
	s->info.fd = -1;
}

/* Finds the base of the LMDB map of data.mdb (LMDB does not tell it unless
 * MDB_FIXEDMAP is used): the mapping of that file that contains a pointer
 * LMDB returned, less that mapping's file offset. Value offsets in the file are then
 * pointer - base (the reader's io_uring readahead needs them). */
static int find_map(shard *s, const struct stat *st, const void *inside, size_t mapsize)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return gf_seterr(-errno, "shard %s: /proc/self/maps: %s (needed to locate the LMDB map)", s->path,
		                 strerror(errno));
	char line[4096];
	uintptr_t p = (uintptr_t)inside;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, off, ino;
		unsigned maj, min;
		if (sscanf(line, "%lx-%lx %*s %lx %x:%x %lu", &lo, &hi, &off, &maj, &min, &ino) != 6)
			continue;
		if (p < lo || p >= hi || off > lo || ino != (unsigned long)st->st_ino || makedev(maj, min) != st->st_dev)
			continue;
		fclose(f);
		s->info.map = (const uint8_t *)(lo - off); /* a mapping split in parts: the part's file offset */
		s->info.map_size = mapsize ? mapsize : hi - (lo - off);
		return 0;
	}
	fclose(f);
	return gf_seterr(GF_ENOTFOUND, "shard %s: cannot find the LMDB map of %s in /proc/self/maps", s->path,
	                 s->file);
}

const char *gf_dataset_format_name(gf_dataset_format f)
{
	switch (f) {
	case GF_FORMAT_AUTO: return "auto";
	case GF_FORMAT_GANFLOW: return "ganflow";
	case GF_FORMAT_CAFFE: return "caffe";
	}
	return "?";
}

/* A pointer into the map: the first key's bytes. */
static int first_key(shard *s, const char *dir, const void **p)
{
	MDB_cursor *c;
	MDB_val k, v;
	int rc = mdb_cursor_open(s->txn, s->dbi, &c);
	if (!rc) {
		rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
		mdb_cursor_close(c);
	}
	if (rc)
		return gf_seterr(rc > 0 ? -rc : rc, "shard %s: %s", dir, mdb_strerror(rc));
	*p = k.mv_data;
	return 0;
}

/* A shard without "__meta__": a Caffe LMDB when asked for or, with
 * format auto, when its first value is a Datum. Finds the map, builds the
 * key index and the meta. */
static int caffe_open(shard *s, const char *dir, gf_dataset_format format, const struct stat *st, size_t mapsize)
{
	int rc = gf_caffe_probe(s->txn, s->dbi);
	if (rc) {
		char why[512];
		snprintf(why, sizeof(why), "%s", gf_errmsg());
		if (format == GF_FORMAT_CAFFE)
			return gf_seterr(rc == GF_ENOTFOUND ? rc : GF_ECORRUPT, "shard %s: not a Caffe LMDB: first value: %s",
			                 dir, why);
		return gf_seterr(GF_ENOTFOUND,
		                 "shard %s: no %s record (an empty or unfinished shard; convert the dataset again), "
		                 "and not a Caffe LMDB either (first value: %s)",
		                 dir, GF_META_KEY, why);
	}
	const void *inside = NULL;
	if ((rc = first_key(s, dir, &inside)) || (rc = find_map(s, st, inside, mapsize)) ||
	    (rc = gf_caffe_scan(s->txn, s->dbi, dir, s->info.map, &s->cx, &s->meta)))
		return rc;
	s->caffe = 1;
	/* the walk touched every value: let go of the map's pages (they stay in
	 * the page cache), or every handle on the LMDB shows its whole size
	 * resident (each verify worker has one) */
	madvise((void *)s->info.map, s->info.map_size, MADV_DONTNEED);
	return 0;
}

/* Opens one shard directory and reads its meta record (or indexes a Caffe
 * LMDB). */
static int shard_open(shard *s, const char *dir, gf_dataset_format format)
{
	int rc;
	memset(s, 0, sizeof(*s));
	s->info.fd = -1;
	s->path = strdup(dir);
	s->file = gf_path_join(dir, "data.mdb");
	if (!s->path || !s->file)
		return -ENOMEM;
	struct stat st;
	if (stat(s->file, &st))
		return gf_seterr(-errno, "shard %s: %s: %s", dir, s->file, strerror(errno));
	if ((rc = mdb_env_create(&s->env)))
		return gf_seterr(rc, "shard %s: %s", dir, mdb_strerror(rc));
	/* Small on purpose: LMDB raises it to the size of the data in the file,
	 * rather than the writer's (large) map size. */
	mdb_env_set_mapsize(s->env, 1u << 20);
	rc = mdb_env_open(s->env, dir, MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS | MDB_NORDAHEAD, 0);
	if (rc) {
		if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH || rc == EINVAL)
			return gf_seterr(rc == EINVAL ? GF_ECORRUPT : rc, "shard %s: %s is not an LMDB database (%s)",
			                 dir, s->file, mdb_strerror(rc));
		return gf_seterr(rc > 0 ? -rc : rc, "shard %s: cannot open %s: %s", dir, s->file, mdb_strerror(rc));
	}
	if ((rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &s->txn)) || (rc = mdb_dbi_open(s->txn, NULL, 0, &s->dbi)))
		return gf_seterr(rc > 0 ? -rc : rc, "shard %s: %s", dir, mdb_strerror(rc));
	MDB_val k = { 8, (void *)GF_META_KEY }, v;
	rc = mdb_get(s->txn, s->dbi, &k, &v);
	if (rc == MDB_NOTFOUND && format == GF_FORMAT_GANFLOW)
		return gf_seterr(GF_ENOTFOUND,
		                 "shard %s: no %s record (an empty or unfinished shard; convert the dataset again; "
		                 "a Caffe LMDB is read with format = \"caffe\")",
		                 dir, GF_META_KEY);
	if (rc == 0 && format == GF_FORMAT_CAFFE)
		return gf_seterr(GF_ECORRUPT, "shard %s: a ganflow shard (it holds %s), not a Caffe LMDB (use format = "
		                              "\"ganflow\" or \"auto\")",
		                 dir, GF_META_KEY);
	MDB_envinfo info;
	mdb_env_info(s->env, &info);
	if (rc == MDB_NOTFOUND) {
		if ((rc = caffe_open(s, dir, format, &st, info.me_mapsize)))
			return rc;
	} else if (rc) {
		return gf_seterr(rc > 0 ? -rc : rc, "shard %s: reading %s: %s", dir, GF_META_KEY, mdb_strerror(rc));
	} else if ((rc = find_map(s, &st, v.mv_data, info.me_mapsize))) {
		return rc;
	} else if ((rc = gf_meta_decode_counts(v.mv_data, v.mv_size, &s->meta))) {
		if (rc == GF_ECORRUPT) {
			char why[512];
			snprintf(why, sizeof(why), "%s", gf_errmsg());
			return gf_seterr(rc, "shard %s: %s", dir, why);
		}
		return rc;
	}
	s->info.fd = open(s->file, O_RDONLY | O_CLOEXEC);
	if (s->info.fd < 0)
		return gf_seterr(-errno, "shard %s: %s: %s", dir, s->file, strerror(errno));
	s->info.path = s->path;
	s->info.file = s->file;
	s->info.number = s->meta.number;
	s->info.first = s->meta.first;
	s->info.count = s->meta.count;
	s->info.file_size = (uint64_t)st.st_size;
	s->info.disk_bytes = (uint64_t)st.st_blocks * 512;
	return 0;
}

/* ---- opening ---- */

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Lists the shard numbers of the shard-NNNNN directories in dir. */
static int list_shards(const char *dir, uint32_t **nums, uint32_t *n)
{
	DIR *d = opendir(dir);
	if (!d)
		return gf_seterr(-errno, "dataset %s: %s", dir, strerror(errno));
	uint32_t cap = 16, cnt = 0, *v = malloc(cap * sizeof(*v));
	struct dirent *e;
	while (v && (e = readdir(d))) {
		unsigned num;
		int used = 0;
		if (sscanf(e->d_name, "shard-%u%n", &num, &used) != 1 || e->d_name[used] || used != 11)
			continue;
		if (cnt == cap) {
			uint32_t *nv = realloc(v, 2 * cap * sizeof(*v));
			if (!nv) {
				free(v);
				v = NULL;
				break;
			}
			v = nv;
			cap *= 2;
		}
		v[cnt++] = num;
	}
	closedir(d);
	if (!v)
		return -ENOMEM;
	qsort(v, cnt, sizeof(*v), cmp_u32);
	*nums = v;
	*n = cnt;
	return 0;
}

/* Checks the shards against each other and builds ds->meta. */
static int assemble(gf_dataset *ds, int single)
{
	shard *s0 = &ds->shards[0];
	uint32_t nc = s0->meta.nclasses;
	uint64_t base = 0;
	for (uint32_t i = 0; i < ds->n; i++) {
		shard *s = &ds->shards[i];
		gf_shard_meta *m = &s->meta;
		if (!single) {
			if (m->nshards != ds->n || m->number != i)
				return gf_seterr(GF_ECORRUPT, "dataset %s: shard %s says it is shard %u of %u, found %u shards",
				                 ds->path, s->path, m->number, m->nshards, ds->n);
			if (m->first != base || m->total != s0->meta.total)
				return gf_seterr(GF_ECORRUPT,
				                 "dataset %s: shard %s holds keys %llu.. of %llu, expected %llu.. of %llu",
				                 ds->path, s->path, (unsigned long long)m->first, (unsigned long long)m->total,
				                 (unsigned long long)base, (unsigned long long)s0->meta.total);
		}
		if (m->nclasses != nc)
			return gf_seterr(GF_ECORRUPT, "dataset %s: shard %s has %u classes, shard %s has %u", ds->path,
			                 s->path, m->nclasses, s0->path, nc);
		for (uint32_t c = 0; c < nc; c++)
			if (strcmp(m->names[c], s0->meta.names[c]))
				return gf_seterr(GF_ECORRUPT, "dataset %s: shard %s names class %u '%s', shard %s '%s'",
				                 ds->path, s->path, c, m->names[c], s0->path, s0->meta.names[c]);
		s->info.base = base;
		base += m->count;
	}
	if (!single && base != s0->meta.total)
		return gf_seterr(GF_ECORRUPT, "dataset %s: shards hold %llu records, meta says %llu", ds->path,
		                 (unsigned long long)base, (unsigned long long)s0->meta.total);

	gf_dataset_meta *dm = &ds->meta;
	dm->count = base;
	dm->total = s0->meta.total;
	dm->nshards = ds->n;
	dm->nclasses = nc;
	ds->names = calloc(nc ? nc : 1, sizeof(char *));
	ds->class_count = calloc(nc ? nc : 1, sizeof(uint64_t));
	if (!ds->names || !ds->class_count)
		return -ENOMEM;
	dm->min_height = dm->min_width = dm->min_channels = UINT32_MAX;
	for (uint32_t i = 0; i < ds->n; i++) {
		gf_shard_meta *m = &ds->shards[i].meta;
		for (uint32_t c = 0; c < nc; c++)
			ds->class_count[c] += m->class_n[c];
		dm->unlabelled += m->unlabelled;
		for (int e = 0; e < GF_ENC_COUNT; e++)
			dm->enc_count[e] += m->enc_count[e];
		dm->payload_bytes += m->payload_bytes;
		if (m->count) {
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
			dm->min_height = MIN(dm->min_height, m->min_h);
			dm->max_height = MAX(dm->max_height, m->max_h);
			dm->min_width = MIN(dm->min_width, m->min_w);
			dm->max_width = MAX(dm->max_width, m->max_w);
			dm->min_channels = MIN(dm->min_channels, m->min_c);
			dm->max_channels = MAX(dm->max_channels, m->max_c);
		}
	}
	if (dm->min_height == UINT32_MAX)
		dm->min_height = dm->min_width = dm->min_channels = 0;
	for (uint32_t c = 0; c < nc; c++)
		ds->names[c] = s0->meta.names[c];
	dm->class_names = (const char *const *)ds->names;
	dm->class_count = ds->class_count;
	return 0;
}

int gf_dataset_class_positions(const gf_dataset *ds, uint32_t c, uint64_t *out)
{
	if (c >= ds->meta.nclasses)
		return gf_seterr(GF_EPARAM, "dataset %s: class %u not in the dataset (%u classes)", ds->path, c,
		                 ds->meta.nclasses);
	for (uint32_t i = 0; i < ds->n; i++) {
		const shard *s = &ds->shards[i];
		for (uint64_t j = 0; j < s->meta.class_n[c]; j++)
			*out++ = s->info.base + gf_meta_index_at(&s->meta, c, j);
	}
	return 0;
}

int gf_dataset_open(const char *path, gf_dataset **out)
{
	return gf_dataset_open_as(path, GF_FORMAT_AUTO, out);
}

int gf_dataset_open_as(const char *path, gf_dataset_format format, gf_dataset **out)
{
	int rc;
	uint32_t *nums = NULL, nnum = 0;
	*out = NULL;
	struct stat st;
	if (stat(path, &st))
		return gf_seterr(-errno, "dataset %s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return gf_seterr(-ENOTDIR, "dataset %s: not a directory (a dataset is a directory of shard-NNNNN/ "
		                           "shards, or one shard directory)", path);
	gf_dataset *ds = calloc(1, sizeof(*ds));
	if (!ds || !(ds->path = strdup(path))) {
		free(ds);
		return -ENOMEM;
	}
	char *mdb = gf_path_join(path, "data.mdb");
	if (!mdb) {
		rc = -ENOMEM;
		goto fail;
	}
	int single = access(mdb, F_OK) == 0;
	free(mdb);
	if (!single && format == GF_FORMAT_CAFFE) {
		rc = gf_seterr(-ENOENT, "dataset %s: no data.mdb (a Caffe LMDB is a directory holding data.mdb)", path);
		goto fail;
	}
	if (single) {
		ds->n = 1;
	} else {
		if ((rc = list_shards(path, &nums, &nnum)))
			goto fail;
		if (nnum == 0) {
			rc = gf_seterr(GF_ENOTFOUND, "dataset %s: no shard-NNNNN directories and no data.mdb "
			                             "(not a ganflow dataset)", path);
			goto fail;
		}
		ds->n = nnum;
		for (uint32_t i = 0; i < nnum; i++)
			if (nums[i] != i) {
				char name[32];
				snprintf(name, sizeof(name), GF_SHARD_NAME_FMT, i);
				rc = gf_seterr(GF_ENOTFOUND, "dataset %s: %s is missing (found shards up to %05u)", path, name,
				               nums[nnum - 1]);
				goto fail;
			}
	}
	ds->shards = calloc(ds->n, sizeof(shard));
	if (!ds->shards) {
		rc = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < ds->n; i++)
		ds->shards[i].info.fd = -1;
	for (uint32_t i = 0; i < ds->n; i++) {
		char name[32], *dir;
		snprintf(name, sizeof(name), GF_SHARD_NAME_FMT, i);
		dir = single ? strdup(path) : gf_path_join(path, name);
		if (!dir) {
			rc = -ENOMEM;
			goto fail;
		}
		/* shard-NNNNN/ directories are ganflow's own */
		rc = shard_open(&ds->shards[i], dir, single ? format : GF_FORMAT_GANFLOW);
		free(dir);
		if (rc)
			goto fail;
	}
	if (!single && ds->shards[0].meta.nshards > ds->n) {
		char name[32];
		snprintf(name, sizeof(name), GF_SHARD_NAME_FMT, ds->n);
		rc = gf_seterr(GF_ENOTFOUND, "dataset %s: %s is missing (the meta records say %u shards)", path, name,
		               ds->shards[0].meta.nshards);
		goto fail;
	}
	if ((rc = assemble(ds, single)))
		goto fail;
	ds->format = ds->shards[0].caffe ? GF_FORMAT_CAFFE : GF_FORMAT_GANFLOW;
	free(nums);
	*out = ds;
	return 0;
fail:
	free(nums);
	gf_dataset_close(ds);
	return rc;
}

void gf_dataset_close(gf_dataset *ds)
{
	if (!ds)
		return;
	if (ds->shards)
		for (uint32_t i = 0; i < ds->n; i++)
			shard_close(&ds->shards[i]);
	free(ds->shards);
	free(ds->names); /* the strings belong to shard 0's meta */
	free(ds->class_count);
	free(ds->path);
	free(ds);
}

const gf_dataset_meta *gf_dataset_metadata(const gf_dataset *ds)
{
	return &ds->meta;
}

gf_dataset_format gf_dataset_format_of(const gf_dataset *ds)
{
	return ds->format;
}

uint64_t gf_dataset_unreadable(const gf_dataset *ds)
{
	return ds->format == GF_FORMAT_CAFFE ? ds->shards[0].cx.bad : 0;
}

const char *gf_dataset_path(const gf_dataset *ds)
{
	return ds->path;
}

const gf_shard_info *gf_dataset_shard(const gf_dataset *ds, uint32_t i)
{
	return i < ds->n ? &ds->shards[i].info : NULL;
}

/* ---- records ---- */

void gf_dataset_touch_index(gf_dataset *ds)
{
	for (uint32_t i = 0; i < ds->n; i++) {
		shard *s = &ds->shards[i];
		MDB_cursor *c;
		MDB_stat st;
		/* values kept in the leaves (under half a page each) make the
		 * leaves the data: walking them would read the whole shard, and
		 * the readahead of the values brings them in anyway */
		if (mdb_stat(s->txn, s->dbi, &st) || st.ms_overflow_pages < st.ms_leaf_pages ||
		    mdb_cursor_open(s->txn, s->dbi, &c))
			continue;
		MDB_val k, v; /* v points into a value's overflow pages, which stay untouched */
		for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
			;
		mdb_cursor_close(c);
	}
}

int gf_dataset_locate(gf_dataset *ds, uint64_t pos, gf_record *rec)
{
	if (pos >= ds->meta.count)
		return gf_seterr(GF_ENOTFOUND, "dataset %s: position %llu out of range (%llu records)", ds->path,
		                 (unsigned long long)pos, (unsigned long long)ds->meta.count);
	uint32_t lo = 0, hi = ds->n - 1;
	while (lo < hi) { /* last shard whose base <= pos */
		uint32_t mid = (lo + hi + 1) / 2;
		if (ds->shards[mid].info.base <= pos)
			lo = mid;
		else
			hi = mid - 1;
	}
	shard *s = &ds->shards[lo];
	uint64_t key = s->info.first + (pos - s->info.base);
	uint8_t kb[8];
	gf_key_put(kb, key);
	MDB_val k = { 8, kb }, v;
	if (s->caffe) /* its LMDB key, from the key index */
		k.mv_data = (void *)gf_caffe_key(&s->cx, key, &k.mv_size);
	rec->key = key;
	rec->position = pos;
	rec->shard = lo;
	rec->value = NULL;
	rec->value_len = 0;
	rec->payload = NULL;
	int rc = mdb_get(s->txn, s->dbi, &k, &v);
	if (rc == MDB_NOTFOUND && s->caffe)
		return gf_seterr(GF_ENOTFOUND, "shard %s key %llu: its LMDB key is missing", s->path, (unsigned long long)key);
	if (rc == MDB_NOTFOUND)
		return gf_seterr(GF_ENOTFOUND, "shard %s key %llu: missing (meta says keys %llu..%llu)", s->path,
		                 (unsigned long long)key, (unsigned long long)s->info.first,
		                 (unsigned long long)(s->info.first + s->info.count - 1));
	if (rc)
		return gf_seterr(rc > 0 ? -rc : rc, "shard %s key %llu: %s", s->path, (unsigned long long)key,
		                 mdb_strerror(rc));
	rec->value = v.mv_data;
	rec->value_len = v.mv_size;
	rec->offset = (uint64_t)((const uint8_t *)v.mv_data - s->info.map);
	return 0;
}

int gf_dataset_check(const gf_dataset *ds, const gf_record *rec, const uint8_t *value, size_t len,
                     gf_record_header *h, const uint8_t **payload)
{
	const shard *s = &ds->shards[rec->shard];
	char key[112] = "";
	if (s->caffe) { /* name the LMDB key too: it is what the user's tools show */
		key[0] = ' ';
		key[1] = '\'';
		gf_caffe_key_text(&s->cx, rec->key, key + 2, sizeof(key) - 3);
		strcat(key, "'");
	}
	int rc = s->caffe ? gf_datum_parse(value, len, h, payload) : gf_record_parse(value, len, h, payload);
	if (rc) {
		char why[512];
		snprintf(why, sizeof(why), "%s", gf_errmsg());
		return gf_seterr(rc, "shard %s key %llu%s: %s", s->path, (unsigned long long)rec->key, key, why);
	}
	if (h->label >= 0 && (uint32_t)h->label >= ds->meta.nclasses)
		return gf_seterr(GF_ECORRUPT, "shard %s key %llu%s: label %d >= class count %u", s->path,
		                 (unsigned long long)rec->key, key, h->label, ds->meta.nclasses);
	return 0;
}

int gf_dataset_get(gf_dataset *ds, uint64_t pos, gf_record *rec)
{
	int rc = gf_dataset_locate(ds, pos, rec);
	if (rc)
		return rc;
	return gf_dataset_check(ds, rec, rec->value, rec->value_len, &rec->h, &rec->payload);
}

int gf_dataset_get_checked(gf_dataset *ds, uint64_t pos, gf_record *rec)
{
	int rc = gf_dataset_get(ds, pos, rec);
	if (rc || !(rc = gf_record_check(&rec->h, rec->payload)))
		return rc;
	char why[256];
	snprintf(why, sizeof(why), "%s", gf_errmsg());
	return gf_seterr(rc, "shard %s key %llu: %s", ds->shards[rec->shard].path, (unsigned long long)rec->key, why);
}
