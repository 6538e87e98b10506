/* Internals of the dataset engine (core/data/) shared by its files (not
 * installed; the tests and the fuzz target reach in too).
 *
 * The meta record of one shard in decoded form, its (de)serialisation, and
 * byte-order, key and random-number helpers.
 */
#ifndef GANFLOW_DATASET_INT_H
#define GANFLOW_DATASET_INT_H

#include <stddef.h>
#include <stdint.h>

#include <lmdb.h>

#include <ganflow/dataset.h>

#define GF_META_MAGIC "GFMD"
#define GF_META_VERSION 1u
#define GF_META_FIXED 96 /* bytes before the class names */

/* The "__meta__" record of one shard (layout in <ganflow/dataset.h>). */
typedef struct gf_shard_meta {
	uint64_t total;
	uint32_t nshards, number;
	uint64_t first, count;
	uint32_t nclasses;
	uint64_t enc_count[GF_ENC_COUNT];
	uint64_t payload_bytes;
	uint32_t min_h, max_h, min_w, max_w, min_c, max_c;
	char **names;        /* (nclasses) NUL-terminated, owned */
	uint64_t *class_n;   /* (nclasses) */
	uint32_t **class_idx;/* (nclasses) key - first, ascending; point into idx_block;
	                        NULL when decoded by gf_meta_decode_counts */
	uint32_t *idx_block; /* (count - unlabelled) owned */
	const uint8_t **class_raw; /* gf_meta_decode_counts: (nclasses) each class's
	                        u32 list in the encoded record (not owned) */
	uint64_t unlabelled;
} gf_shard_meta;

/* Serialises m into a malloc'ed buffer (*out, *len). Returns 0 or -ENOMEM. */
int gf_meta_encode(const gf_shard_meta *m, uint8_t **out, size_t *len);

/* Parses and checks a meta value (CRC, sizes, index ranges and order,
 * class counts adding up). Fills *m (to be freed with gf_meta_free).
 * Returns 0, GF_ECORRUPT (reason in gf_errmsg(), no path) or -ENOMEM. */
int gf_meta_decode(const void *buf, size_t len, gf_shard_meta *m);

/* gf_meta_decode, checking everything the same way, but keeping no copy of
 * the label index: class_raw[c] points at class c's list inside buf, which
 * must outlive m (an opened shard's meta record, in its map). */
int gf_meta_decode_counts(const void *buf, size_t len, gf_shard_meta *m);

/* Entry i of class c's index (key - first): class_idx when decoded,
 * otherwise read from class_raw. */
static inline uint32_t gf_meta_index_at(const gf_shard_meta *m, uint32_t c, uint64_t i);

void gf_meta_free(gf_shard_meta *m);

/* Brings every shard's B-tree pages (branch and leaf, not the values'
 * overflow pages) into the page cache with a cursor walk over the keys.
 * gf_stream_open calls it first: on a cold cache each leaf is a 4 KiB
 * synchronous read, quick on an idle disk but queued behind megabytes of
 * readahead once streaming (measured 40-190 ms of 300 ms on the reader
 * benchmark's cold rows). Advisory: a corrupt tree is reported later by
 * gf_dataset_locate, naming the key. A shard whose values are mostly kept
 * in its leaves (small records: fewer overflow pages than leaf pages) is
 * skipped: its leaves are the data, and reading ahead brings them. */
void gf_dataset_touch_index(gf_dataset *ds);

/* ---- Caffe LMDBs (caffe.c) ---- */

/* Per position (key order) of a Caffe shard: where its key lies in the
 * LMDB map (valid while the shard's read transaction is open), 8 bytes a
 * record; its value is found through the key (mdb_get), as a ganflow
 * shard's. */
#define GF_CAFFE_KLEN_BITS 9 /* LMDB keys are at most 511 bytes */
typedef struct gf_caffe_index {
	uint64_t n, cap;
	const uint8_t *map;  /* base of the map */
	uint64_t *key;       /* (n) key offset in the map << GF_CAFFE_KLEN_BITS | key length */
	uint64_t bad;        /* values that are not a readable Datum */
} gf_caffe_index;

static inline const uint8_t *gf_caffe_key(const gf_caffe_index *ix, uint64_t i, size_t *len)
{
	*len = (size_t)(ix->key[i] & ((1u << GF_CAFFE_KLEN_BITS) - 1));
	return ix->map + (ix->key[i] >> GF_CAFFE_KLEN_BITS);
}

/* 0 when the first value of the database parses as a Datum, GF_ECORRUPT
 * (reason in gf_errmsg()) when not, GF_ENOTFOUND for an empty database. */
int gf_caffe_probe(MDB_txn *txn, MDB_dbi dbi);

/* Walks every key with a cursor into *ix (map: the base of the shard's
 * map) and parses every Datum into a single-shard meta *m (classes 0 ..
 * max label, named "0", "1", ...; keys = positions 0 .. n-1). Returns 0,
 * -ENOMEM or an LMDB/-errno code with path in gf_errmsg(). Free with
 * gf_caffe_index_free and gf_meta_free. */
int gf_caffe_scan(MDB_txn *txn, MDB_dbi dbi, const char *path, const uint8_t *map, gf_caffe_index *ix,
                  gf_shard_meta *m);

void gf_caffe_index_free(gf_caffe_index *ix);

/* The key of position i as printable text (non-printing bytes as \xNN,
 * long keys cut with "..."), NUL-terminated in buf[n]. */
void gf_caffe_key_text(const gf_caffe_index *ix, uint64_t i, char *buf, size_t n);

/* Little-endian helpers (gf_meta_index_at below uses them). */
static inline void gf_put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void gf_put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline void gf_put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t gf_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t gf_get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t gf_get_u64(const uint8_t *p) { return (uint64_t)gf_get_u32(p) | (uint64_t)gf_get_u32(p + 4) << 32; }

static inline uint32_t gf_meta_index_at(const gf_shard_meta *m, uint32_t c, uint64_t i)
{
	return m->class_idx ? m->class_idx[c][i] : gf_get_u32(m->class_raw[c] + 4 * i);
}

/* Big-endian 8-byte record key. */
static inline void gf_key_put(uint8_t k[8], uint64_t v)
{
	for (int i = 0; i < 8; i++)
		k[i] = (uint8_t)(v >> (56 - 8 * i));
}
static inline uint64_t gf_key_get(const uint8_t k[8])
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | k[i];
	return v;
}

/* splitmix64 step: advances *s and returns the next value. */
static inline uint64_t gf_splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform integer in [0, n), n > 0: Lemire's multiply-shift with rejection. */
static inline uint64_t gf_uniform(uint64_t *s, uint64_t n)
{
	uint64_t x = gf_splitmix64(s);
	__uint128_t m = (__uint128_t)x * n;
	uint64_t l = (uint64_t)m;
	if (l < n) {
		uint64_t t = -n % n;
		while (l < t) {
			x = gf_splitmix64(s);
			m = (__uint128_t)x * n;
			l = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

#endif
