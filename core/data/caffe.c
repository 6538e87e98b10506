/* Caffe LMDBs: reading caffe.Datum values and indexing their keys.
 *
 * Caffe's convert_imageset (and most ImageNet LMDB tools of its time) write
 * one LMDB environment whose values are caffe.Datum protocol buffers:
 *
 *   message Datum {
 *     optional int32 channels = 1;  optional int32 height = 2;
 *     optional int32 width = 3;     optional bytes data = 4;
 *     optional int32 label = 5;     repeated float float_data = 6;
 *     optional bool encoded = 7 [default = false];
 *   }
 *
 * data holds either raw u8 pixels, planar (channel, row, column) with the
 * channels of a colour image in OpenCV's B, G, R order, or (encoded = true)
 * the image file itself. The keys are whatever the tool chose (often
 * "%08d_<file name>"), so they are not record indices: opening such an LMDB
 * walks the keys once with a cursor and keeps, per position in key order,
 * the key and the value's place in the map (no copy; the read transaction
 * of the shard stays open). Each Datum is parsed once at that time for the
 * label, size and encoding, which builds the same in-memory meta a ganflow
 * shard carries in its "__meta__" record (class index, counts, sizes); the
 * epoch orders, rank parts and resume positions then work unchanged.
 *
 * The protocol buffer is read by hand (varints and length-delimited fields,
 * unknown fields skipped by wire type): no libprotobuf.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/dataset.h>
#include <ganflow/err.h>
#include <ganflow/log.h>

#include "dataset_int.h"

/* ---- protocol buffer reading ---- */

/* Reads a varint at *p (< end); advances *p. 0, or -1 when truncated or
 * longer than 10 bytes. */
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	for (int shift = 0; shift < 70; shift += 7) {
		if (*p >= end)
			return -1;
		uint8_t b = *(*p)++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

/* Size and components of a JPEG from its SOF marker (no decoding). The
 * Datum of an encoded image carries no size, and the record header the
 * data path uses needs one. Returns NULL or the reason it is not a JPEG
 * this reader takes. */
static const char *jpeg_sof(const uint8_t *p, size_t len, uint32_t *w, uint32_t *h, uint32_t *c)
{
	if (len < 4 || p[0] != 0xff || p[1] != 0xd8) {
		if (len >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8))
			return "the encoded image is a PNG (only JPEG is read; convert_imageset --encode_type=jpg writes JPEG)";
		return "the encoded image is not a JPEG (no SOI marker)";
	}
	size_t i = 2;
	while (i + 4 <= len) {
		if (p[i] != 0xff)
			return "the encoded JPEG is corrupt (no marker where one is due)";
		uint8_t m = p[i + 1];
		if (m == 0xff) { /* fill byte */
			i++;
			continue;
		}
		if (m == 0xd8 || (m >= 0xd0 && m <= 0xd7) || m == 0x01) {
			i += 2;
			continue;
		}
		size_t seg = (size_t)p[i + 2] << 8 | p[i + 3];
		if (seg < 2 || i + 2 + seg > len)
			return "the encoded JPEG is truncated before its frame header";
		if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) {
			if (seg < 8)
				return "the encoded JPEG has a short frame header";
			*h = (uint32_t)p[i + 5] << 8 | p[i + 6];
			*w = (uint32_t)p[i + 7] << 8 | p[i + 8];
			*c = p[i + 9];
			if (*c != 1 && *c != 3)
				return "the encoded JPEG has neither 1 nor 3 components (CMYK?)";
			if (!*w || !*h)
				return "the encoded JPEG has a zero width or height";
			return NULL;
		}
		if (m == 0xd9 || m == 0xda)
			break;
		i += 2 + seg;
	}
	return "the encoded JPEG has no frame header";
}

int gf_datum_parse(const void *value, size_t len, gf_record_header *h, const uint8_t **payload)
{
	const uint8_t *p = value, *end = p + len, *data = NULL;
	uint64_t f[8] = { 0 }; /* varint fields by number */
	int seen[8] = { 0 }, floats = 0;
	size_t dlen = 0;
	while (p < end) {
		uint64_t tag, v;
		if (varint(&p, end, &tag))
			return gf_seterr(GF_ECORRUPT, "not a Datum: truncated field tag at byte %td", p - (const uint8_t *)value);
		uint64_t num = tag >> 3;
		unsigned wt = (unsigned)(tag & 7);
		if (num == 0)
			return gf_seterr(GF_ECORRUPT, "not a Datum: field number 0 at byte %td", p - (const uint8_t *)value);
		switch (wt) {
		case 0:
			if (varint(&p, end, &v))
				return gf_seterr(GF_ECORRUPT, "not a Datum: truncated varint of field %llu", (unsigned long long)num);
			if (num == 4 || num == 6)
				return gf_seterr(GF_ECORRUPT, "not a Datum: field %llu is a varint", (unsigned long long)num);
			if (num < 8) {
				f[num] = v;
				seen[num] = 1;
			}
			break;
		case 1:
			if (end - p < 8)
				return gf_seterr(GF_ECORRUPT, "not a Datum: truncated 64-bit field %llu", (unsigned long long)num);
			if (num < 8)
				return gf_seterr(GF_ECORRUPT, "not a Datum: field %llu is 64-bit", (unsigned long long)num);
			p += 8;
			break;
		case 2:
			if (varint(&p, end, &v) || v > (uint64_t)(end - p))
				return gf_seterr(GF_ECORRUPT, "not a Datum: field %llu runs past the value's %zu bytes (truncated)",
				                 (unsigned long long)num, len);
			if (num == 4) {
				data = p;
				dlen = (size_t)v;
				seen[4] = 1;
			} else if (num == 6) {
				floats = 1;
			} else if (num < 8) {
				return gf_seterr(GF_ECORRUPT, "not a Datum: field %llu is length-delimited", (unsigned long long)num);
			}
			p += v;
			break;
		case 5:
			if (end - p < 4)
				return gf_seterr(GF_ECORRUPT, "not a Datum: truncated 32-bit field %llu", (unsigned long long)num);
			if (num == 6)
				floats = 1;
			else if (num < 8)
				return gf_seterr(GF_ECORRUPT, "not a Datum: field %llu is 32-bit", (unsigned long long)num);
			p += 4;
			break;
		default:
			return gf_seterr(GF_ECORRUPT, "not a Datum: wire type %u (field %llu) at byte %td", wt,
			                 (unsigned long long)num, p - (const uint8_t *)value);
		}
	}
	if (!seen[4]) {
		if (floats)
			return gf_seterr(GF_ECORRUPT, "Datum with float_data only (float images are not read; "
			                              "ganflow reads u8 data or encoded JPEG)");
		return gf_seterr(GF_ECORRUPT, "Datum without a data field");
	}
	gf_record_header r = { .label = seen[5] ? (int32_t)(uint32_t)f[5] : 0, .payload = (uint32_t)dlen };
	if (dlen > UINT32_MAX)
		return gf_seterr(GF_ECORRUPT, "Datum data of %zu bytes is too large", dlen);
	if (r.label < -1)
		return gf_seterr(GF_ECORRUPT, "Datum label %d is below -1", r.label);
	if (f[7]) {
		const char *why = jpeg_sof(data, dlen, &r.width, &r.height, &r.channels);
		if (why)
			return gf_seterr(GF_ECORRUPT, "Datum: %s", why);
		r.encoding = GF_ENC_JPEG;
	} else {
		/* int32 fields: a negative value is a 10-byte varint */
		int64_t c = (int32_t)(uint32_t)f[1], hh = (int32_t)(uint32_t)f[2], w = (int32_t)(uint32_t)f[3];
		if (c != 1 && c != 3)
			return gf_seterr(GF_ECORRUPT, "Datum: %lld channels (raw data must have 1 or 3)", (long long)c);
		if (hh <= 0 || w <= 0)
			return gf_seterr(GF_ECORRUPT, "Datum: raw data of size %lldx%lld", (long long)hh, (long long)w);
		if ((uint64_t)(c * hh * w) != dlen)
			return gf_seterr(GF_ECORRUPT, "Datum: %zu data bytes, not channels x height x width = %lldx%lldx%lld",
			                 dlen, (long long)c, (long long)hh, (long long)w);
		r.channels = (uint32_t)c;
		r.height = (uint32_t)hh;
		r.width = (uint32_t)w;
		/* one plane is the same bytes as interleaved gray */
		r.encoding = c == 3 ? GF_ENC_BGR : GF_ENC_RAW;
	}
	if (r.height > GF_RECORD_MAX_DIM || r.width > GF_RECORD_MAX_DIM)
		return gf_seterr(GF_ECORRUPT, "Datum: image %ux%u is larger than %u", r.height, r.width, GF_RECORD_MAX_DIM);
	*h = r;
	if (payload)
		*payload = data;
	return 0;
}

/* ---- key index ---- */

void gf_caffe_index_free(gf_caffe_index *ix)
{
	free(ix->key);
	memset(ix, 0, sizeof(*ix));
}

int gf_caffe_probe(MDB_txn *txn, MDB_dbi dbi)
{
	MDB_cursor *c;
	MDB_val k, v;
	int rc = mdb_cursor_open(txn, dbi, &c);
	if (rc)
		return rc > 0 ? -rc : rc;
	rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	mdb_cursor_close(c);
	if (rc == MDB_NOTFOUND)
		return gf_seterr(GF_ENOTFOUND, "the LMDB is empty");
	if (rc)
		return rc > 0 ? -rc : rc;
	gf_record_header h;
	return gf_datum_parse(v.mv_data, v.mv_size, &h, NULL);
}

/* Adds record pos with header h to the meta being built. */
static void meta_add(gf_shard_meta *m, const gf_record_header *h)
{
	m->enc_count[h->encoding]++;
	m->payload_bytes += h->payload;
	if (!m->min_h || h->height < m->min_h)
		m->min_h = h->height;
	if (h->height > m->max_h)
		m->max_h = h->height;
	if (!m->min_w || h->width < m->min_w)
		m->min_w = h->width;
	if (h->width > m->max_w)
		m->max_w = h->width;
	if (!m->min_c || h->channels < m->min_c)
		m->min_c = h->channels;
	if (h->channels > m->max_c)
		m->max_c = h->channels;
}

int gf_caffe_scan(MDB_txn *txn, MDB_dbi dbi, const char *path, const uint8_t *map, gf_caffe_index *ix,
                  gf_shard_meta *m)
{
	MDB_cursor *c;
	MDB_val k, v;
	MDB_stat mst;
	int32_t *label = NULL;
	memset(ix, 0, sizeof(*ix));
	memset(m, 0, sizeof(*m));
	ix->map = map;
	int rc = mdb_stat(txn, dbi, &mst);
	if (rc)
		return gf_seterr(rc > 0 ? -rc : rc, "shard %s: %s", path, mdb_strerror(rc));
	if (mst.ms_entries > UINT32_MAX)
		return gf_seterr(GF_EUNSUPPORTED, "shard %s: more than 2^32 records", path);
	uint64_t n = mst.ms_entries;
	/* 8 bytes a record for the key index, 4 for the labels while the class
	 * index is built: sized from the entry count, never regrown */
	ix->key = malloc((n ? n : 1) * sizeof(*ix->key));
	label = malloc((n ? n : 1) * sizeof(*label));
	if (!ix->key || !label) {
		free(label);
		return -ENOMEM;
	}
	if ((rc = mdb_cursor_open(txn, dbi, &c))) {
		free(label);
		return gf_seterr(rc > 0 ? -rc : rc, "shard %s: %s", path, mdb_strerror(rc));
	}
	/* labels, sizes, encodings: one parse per Datum, as the keys are walked
	 * (a bad one is left out of the class index and named again when it is
	 * read); a large LMDB from a cold disk takes a while: a progress bar
	 * once it has taken more than 2 s (none for the small ones) */
	double t0 = gf_now(), next = t0 + 2.0;
	int shown = 0;
	char what[160];
	snprintf(what, sizeof(what), "indexing %s", path);
	int32_t maxl = -1;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (ix->n == n || v.mv_size > UINT32_MAX || k.mv_size >> GF_CAFFE_KLEN_BITS ||
		    (const uint8_t *)k.mv_data < map) {
			mdb_cursor_close(c);
			free(label);
			return gf_seterr(GF_EUNSUPPORTED, "shard %s: %s", path,
			                 ix->n == n ? "more keys than the LMDB's entry count"
			                            : "a value over 4 GiB or a key over 511 bytes");
		}
		uint64_t i = ix->n++;
		ix->key[i] = (uint64_t)((const uint8_t *)k.mv_data - map) << GF_CAFFE_KLEN_BITS | k.mv_size;
		gf_record_header h;
		if (gf_datum_parse(v.mv_data, v.mv_size, &h, NULL)) {
			label[i] = -2;
			ix->bad++;
		} else {
			label[i] = h.label;
			if (h.label > maxl)
				maxl = h.label;
			meta_add(m, &h);
		}
		if ((i & 1023) == 1023 && gf_now() >= next) {
			gf_progress_bar(what, i, n, t0);
			shown = 1;
			next = gf_now() + 0.2;
		}
	}
	mdb_cursor_close(c);
	if (rc != MDB_NOTFOUND) {
		free(label);
		return gf_seterr(rc > 0 ? -rc : rc, "shard %s: walking the keys: %s", path, mdb_strerror(rc));
	}
	n = ix->n;
	if (shown)
		gf_progress_bar(what, n, n, t0);
	gf_clearerr();
	m->total = m->count = n;
	m->nshards = 1;
	m->nclasses = (uint32_t)(maxl + 1);
	uint32_t nc = m->nclasses;
	m->names = calloc(nc ? nc : 1, sizeof(char *));
	m->class_n = calloc(nc ? nc : 1, sizeof(uint64_t));
	m->class_idx = calloc(nc ? nc : 1, sizeof(uint32_t *));
	if (!m->names || !m->class_n || !m->class_idx)
		goto nomem;
	for (uint32_t i = 0; i < nc; i++) {
		char name[16];
		snprintf(name, sizeof(name), "%u", i);
		if (!(m->names[i] = strdup(name)))
			goto nomem;
	}
	uint64_t labelled = 0;
	for (uint64_t i = 0; i < n; i++)
		if (label[i] >= 0) {
			m->class_n[label[i]]++;
			labelled++;
		}
	m->unlabelled = n - labelled;
	if (!(m->idx_block = malloc((labelled ? labelled : 1) * sizeof(uint32_t))))
		goto nomem;
	uint32_t *dst = m->idx_block;
	for (uint32_t cl = 0; cl < nc; cl++) {
		m->class_idx[cl] = dst;
		dst += m->class_n[cl];
	}
	uint64_t *fill = calloc(nc ? nc : 1, sizeof(uint64_t));
	if (!fill)
		goto nomem;
	for (uint64_t i = 0; i < n; i++)
		if (label[i] >= 0)
			m->class_idx[label[i]][fill[label[i]]++] = (uint32_t)i;
	free(fill);
	free(label);
	malloc_trim(0); /* the labels' 4 bytes a record go back to the system, not to the heap's free list */
	return 0;
nomem:
	free(label);
	return -ENOMEM;
}

void gf_caffe_key_text(const gf_caffe_index *ix, uint64_t i, char *buf, size_t n)
{
	size_t o = 0;
	size_t klen;
	const uint8_t *k = gf_caffe_key(ix, i, &klen);
	for (size_t j = 0; j < klen && o + 5 < n; j++) {
		if (k[j] >= 0x20 && k[j] < 0x7f && k[j] != '\'' && k[j] != '\\')
			buf[o++] = (char)k[j];
		else
			o += (size_t)snprintf(buf + o, n - o, "\\x%02x", k[j]);
		if (o >= 60 && j + 1 < klen) {
			o += (size_t)snprintf(buf + o, n - o, "...");
			break;
		}
	}
	buf[o < n ? o : n - 1] = '\0';
}
