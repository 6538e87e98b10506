/* Record headers and meta records: their byte layouts, checked parsing.
 *
 * Pure functions over byte buffers (no LMDB): the dataset reader, the
 * writer, the stages and the fuzz target all go through here, so a bad
 * header or meta record is caught in one place.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include <ganflow/crc32c.h>
#include <ganflow/dataset.h>
#include <ganflow/err.h>

#include "dataset_int.h"

/* ---- record header ---- */

const char *gf_encoding_name(uint32_t enc)
{
	switch (enc) {
	case GF_ENC_RAW: return "raw";
	case GF_ENC_JPEG: return "jpeg";
	case GF_ENC_BGR: return "bgr-planar";
	}
	return "?";
}

/* Checks the fields shared by writing and parsing; returns a reason or NULL. */
static const char *header_problem(const gf_record_header *h)
{
	if (h->encoding >= GF_ENC_COUNT)
		return "unknown encoding";
	if (h->encoding == GF_ENC_BGR) /* the meta record counts raw and jpeg only */
		return "planar BGR (only Caffe LMDBs hold it)";
	if (h->channels != 1 && h->channels != 3)
		return "channels not 1 or 3";
	if (h->height == 0 || h->width == 0)
		return "zero height or width";
	if (h->height > GF_RECORD_MAX_DIM || h->width > GF_RECORD_MAX_DIM)
		return "height or width above 65535";
	if (h->label < -1)
		return "label below -1";
	if (h->encoding == GF_ENC_RAW && (uint64_t)h->height * h->width * h->channels != h->payload)
		return "raw payload is not height x width x channels bytes";
	if (h->encoding == GF_ENC_JPEG && h->payload < 4)
		return "JPEG payload shorter than 4 bytes";
	if (h->flags & ~(GF_RECORD_CRC32C | GF_RECORD_PAIR))
		return "unknown flags";
	if ((h->flags & GF_RECORD_PAIR) && h->width % 2)
		return "a pair record (A | B side by side) of odd width";
	return NULL;
}

int gf_record_header_write(const gf_record_header *h, uint8_t out[GF_RECORD_HEADER_SIZE])
{
	const char *why = header_problem(h);
	if (why)
		return gf_seterr(GF_EPARAM, "record header: %s (%ux%ux%u, %u bytes)", why, h->height, h->width,
		                 h->channels, h->payload);
	out[0] = 'G';
	out[1] = 'F';
	out[2] = GF_RECORD_VERSION;
	out[3] = (uint8_t)h->encoding;
	gf_put_u32(out + 4, (uint32_t)h->label);
	gf_put_u32(out + 8, h->height);
	gf_put_u32(out + 12, h->width);
	gf_put_u16(out + 16, (uint16_t)h->channels);
	gf_put_u16(out + 18, (uint16_t)h->flags);
	gf_put_u32(out + 20, h->payload);
	return 0;
}

int gf_record_check(const gf_record_header *h, const uint8_t *payload)
{
	if (!(h->flags & GF_RECORD_CRC32C))
		return 0;
	uint32_t c = gf_crc32c(0, payload, h->payload);
	if (c != h->crc)
		return gf_seterr(GF_ECORRUPT, "payload checksum mismatch (stored 0x%08x, computed 0x%08x): the record's "
		                              "bytes changed after it was written",
		                 h->crc, c);
	return 0;
}

int gf_record_parse(const void *value, size_t len, gf_record_header *h, const uint8_t **payload)
{
	const uint8_t *p = value;
	if (len < GF_RECORD_HEADER_SIZE)
		return gf_seterr(GF_ECORRUPT, "truncated value: %zu bytes, shorter than the %d-byte header", len,
		                 GF_RECORD_HEADER_SIZE);
	if (p[0] != 'G' || p[1] != 'F')
		return gf_seterr(GF_ECORRUPT, "bad header: magic %02x %02x is not 'GF'", p[0], p[1]);
	if (p[2] != GF_RECORD_VERSION)
		return gf_seterr(GF_ECORRUPT, "bad header: version %u (this build reads %d)", p[2],
		                 GF_RECORD_VERSION);
	if (gf_get_u16(p + 18) & ~(GF_RECORD_CRC32C | GF_RECORD_PAIR))
		return gf_seterr(GF_ECORRUPT, "bad header: unknown flags 0x%04x", gf_get_u16(p + 18));
	gf_record_header r;
	r.flags = gf_get_u16(p + 18);
	r.crc = 0;
	if (r.flags & GF_RECORD_CRC32C) { /* the checksum is the value's last 4 bytes */
		if (len < GF_RECORD_HEADER_SIZE + 4)
			return gf_seterr(GF_ECORRUPT, "truncated value: %zu bytes, no room for the payload checksum", len);
		r.crc = gf_get_u32(p + len - 4);
		len -= 4;
	}
	r.encoding = p[3];
	r.label = (int32_t)gf_get_u32(p + 4);
	r.height = gf_get_u32(p + 8);
	r.width = gf_get_u32(p + 12);
	r.channels = gf_get_u16(p + 16);
	r.payload = gf_get_u32(p + 20);
	if ((uint64_t)r.payload != len - GF_RECORD_HEADER_SIZE) {
		if ((uint64_t)r.payload > len - GF_RECORD_HEADER_SIZE)
			return gf_seterr(GF_ECORRUPT, "truncated value: header says %u payload bytes, value holds %zu",
			                 r.payload, len - GF_RECORD_HEADER_SIZE);
		return gf_seterr(GF_ECORRUPT, "bad header: payload length %u but value holds %zu bytes", r.payload,
		                 len - GF_RECORD_HEADER_SIZE);
	}
	const char *why = header_problem(&r);
	if (why)
		return gf_seterr(GF_ECORRUPT, "bad header: %s (%ux%ux%u, %s, %u bytes)", why, r.height, r.width,
		                 r.channels, gf_encoding_name(r.encoding), r.payload);
	*h = r;
	if (payload)
		*payload = p + GF_RECORD_HEADER_SIZE;
	return 0;
}

/* ---- meta record ---- */

int gf_meta_encode(const gf_shard_meta *m, uint8_t **out, size_t *len)
{
	uint64_t nidx = m->count - m->unlabelled;
	size_t n = GF_META_FIXED + 8 * (size_t)m->nclasses + 4 * (size_t)nidx + 8 + 4;
	for (uint32_t c = 0; c < m->nclasses; c++)
		n += 2 + strlen(m->names[c]);
	uint8_t *b = calloc(1, n), *p = b;
	if (!b)
		return -ENOMEM;
	memcpy(p, GF_META_MAGIC, 4);
	gf_put_u32(p + 4, GF_META_VERSION);
	gf_put_u64(p + 8, m->total);
	gf_put_u32(p + 16, m->nshards);
	gf_put_u32(p + 20, m->number);
	gf_put_u64(p + 24, m->first);
	gf_put_u64(p + 32, m->count);
	gf_put_u32(p + 40, m->nclasses);
	gf_put_u64(p + 48, m->enc_count[GF_ENC_RAW]);
	gf_put_u64(p + 56, m->enc_count[GF_ENC_JPEG]);
	gf_put_u64(p + 64, m->payload_bytes);
	uint32_t dims[6] = { m->min_h, m->max_h, m->min_w, m->max_w, m->min_c, m->max_c };
	for (int i = 0; i < 6; i++)
		gf_put_u32(p + 72 + 4 * i, dims[i]);
	p += GF_META_FIXED;
	for (uint32_t c = 0; c < m->nclasses; c++) {
		size_t l = strlen(m->names[c]);
		gf_put_u16(p, (uint16_t)l);
		memcpy(p + 2, m->names[c], l);
		p += 2 + l;
	}
	for (uint32_t c = 0; c < m->nclasses; c++) {
		gf_put_u64(p, m->class_n[c]);
		p += 8;
		for (uint64_t i = 0; i < m->class_n[c]; i++, p += 4)
			gf_put_u32(p, m->class_idx[c][i]);
	}
	gf_put_u64(p, m->unlabelled);
	p += 8;
	gf_put_u32(p, (uint32_t)crc32(0L, b, (uInt)(p - b)));
	*out = b;
	*len = n;
	return 0;
}

void gf_meta_free(gf_shard_meta *m)
{
	if (!m)
		return;
	if (m->names)
		for (uint32_t c = 0; c < m->nclasses; c++)
			free(m->names[c]);
	free(m->names);
	free(m->class_n);
	free(m->class_idx);
	free(m->idx_block);
	free(m->class_raw);
	memset(m, 0, sizeof(*m));
}

/* keep_index: copy the label index into class_idx (else point class_raw
 * into buf). */
static int meta_decode(const void *buf, size_t len, gf_shard_meta *m, int keep_index)
{
	const uint8_t *b = buf, *p, *end;
	memset(m, 0, sizeof(*m));
	if (len < GF_META_FIXED + 12 || memcmp(b, GF_META_MAGIC, 4))
		return gf_seterr(GF_ECORRUPT, "meta record: not a ganflow meta record (%zu bytes)", len);
	if (gf_get_u32(b + 4) != GF_META_VERSION)
		return gf_seterr(GF_ECORRUPT, "meta record: version %u (this build reads %u)", gf_get_u32(b + 4),
		                 GF_META_VERSION);
	if (gf_get_u32(b + len - 4) != (uint32_t)crc32(0L, b, (uInt)(len - 4)))
		return gf_seterr(GF_ECORRUPT, "meta record: CRC mismatch");
	end = b + len - 4;
	m->total = gf_get_u64(b + 8);
	m->nshards = gf_get_u32(b + 16);
	m->number = gf_get_u32(b + 20);
	m->first = gf_get_u64(b + 24);
	m->count = gf_get_u64(b + 32);
	m->nclasses = gf_get_u32(b + 40);
	m->enc_count[GF_ENC_RAW] = gf_get_u64(b + 48);
	m->enc_count[GF_ENC_JPEG] = gf_get_u64(b + 56);
	m->payload_bytes = gf_get_u64(b + 64);
	m->min_h = gf_get_u32(b + 72);
	m->max_h = gf_get_u32(b + 76);
	m->min_w = gf_get_u32(b + 80);
	m->max_w = gf_get_u32(b + 84);
	m->min_c = gf_get_u32(b + 88);
	m->max_c = gf_get_u32(b + 92);
	int rc = GF_ECORRUPT;
	if (m->number >= m->nshards || m->count > m->total || m->first > m->total - m->count ||
	    m->count > UINT32_MAX) {
		gf_seterr(rc, "meta record: shard %u of %u, keys %llu+%llu of %llu do not fit", m->number, m->nshards,
		          (unsigned long long)m->first, (unsigned long long)m->count, (unsigned long long)m->total);
		goto fail;
	}
	/* Each class needs at least 2 + 8 bytes: bounds nclasses before allocating. */
	if (m->nclasses > (size_t)(end - b) / 10) {
		gf_seterr(rc, "meta record: %u classes do not fit in %zu bytes", m->nclasses, len);
		goto fail;
	}
	m->names = calloc(m->nclasses ? m->nclasses : 1, sizeof(char *));
	m->class_n = calloc(m->nclasses ? m->nclasses : 1, sizeof(uint64_t));
	if (keep_index)
		m->class_idx = calloc(m->nclasses ? m->nclasses : 1, sizeof(uint32_t *));
	else
		m->class_raw = calloc(m->nclasses ? m->nclasses : 1, sizeof(uint8_t *));
	if (!m->names || !m->class_n || (!m->class_idx && !m->class_raw)) {
		rc = -ENOMEM;
		goto fail;
	}
	p = b + GF_META_FIXED;
	for (uint32_t c = 0; c < m->nclasses; c++) {
		if (end - p < 2 || end - p - 2 < gf_get_u16(p)) {
			gf_seterr(rc, "meta record: class name %u runs past the end", c);
			goto fail;
		}
		size_t l = gf_get_u16(p);
		m->names[c] = malloc(l + 1);
		if (!m->names[c]) {
			rc = -ENOMEM;
			goto fail;
		}
		memcpy(m->names[c], p + 2, l);
		m->names[c][l] = '\0';
		if (memchr(m->names[c], '\0', l)) {
			gf_seterr(rc, "meta record: class name %u contains a NUL byte", c);
			goto fail;
		}
		p += 2 + l;
	}
	/* Index: count entries first, then allocate one block. */
	const uint8_t *q = p;
	uint64_t nidx = 0;
	for (uint32_t c = 0; c < m->nclasses; c++) {
		if (end - q < 8) {
			gf_seterr(rc, "meta record: index of class %u runs past the end", c);
			goto fail;
		}
		uint64_t n = gf_get_u64(q);
		if (n > m->count || n > (uint64_t)(end - q - 8) / 4) {
			gf_seterr(rc, "meta record: class %u claims %llu records", c, (unsigned long long)n);
			goto fail;
		}
		m->class_n[c] = n;
		nidx += n;
		q += 8 + 4 * n;
	}
	if (end - q != 8) {
		gf_seterr(rc, "meta record: %td bytes left after the index (expected 8)", end - q);
		goto fail;
	}
	m->unlabelled = gf_get_u64(q);
	if (nidx > m->count || m->unlabelled != m->count - nidx) {
		gf_seterr(rc, "meta record: classes hold %llu + %llu unlabelled records, shard has %llu",
		          (unsigned long long)nidx, (unsigned long long)m->unlabelled, (unsigned long long)m->count);
		goto fail;
	}
	if (keep_index && !(m->idx_block = malloc((nidx ? nidx : 1) * sizeof(uint32_t)))) {
		rc = -ENOMEM;
		goto fail;
	}
	uint32_t *dst = m->idx_block;
	for (uint32_t c = 0; c < m->nclasses; c++) {
		p += 8;
		if (keep_index)
			m->class_idx[c] = dst;
		else
			m->class_raw[c] = p;
		uint32_t prev = 0;
		for (uint64_t i = 0; i < m->class_n[c]; i++, p += 4) {
			uint32_t v = gf_get_u32(p);
			if (v >= m->count || (i > 0 && v <= prev)) {
				gf_seterr(rc, "meta record: index of class %u not ascending within the shard", c);
				goto fail;
			}
			prev = v;
			if (keep_index)
				*dst++ = v;
		}
	}
	return 0;
fail:
	gf_meta_free(m);
	return rc;
}

int gf_meta_decode(const void *buf, size_t len, gf_shard_meta *m)
{
	return meta_decode(buf, len, m, 1);
}

int gf_meta_decode_counts(const void *buf, size_t len, gf_shard_meta *m)
{
	return meta_decode(buf, len, m, 0);
}

/* ---- random numbers and accounting ---- */

uint64_t gf_hash3(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t s = a;
	uint64_t h = gf_splitmix64(&s);
	s = h ^ b;
	h = gf_splitmix64(&s);
	s = h ^ c;
	return gf_splitmix64(&s);
}

int gf_bad_exceeded(uint64_t bad, uint64_t seen, double max_fraction, uint64_t min_seen, int final)
{
	if (bad == 0 || seen == 0)
		return 0;
	if (seen < min_seen && !final)
		return 0;
	return (double)bad > max_fraction * (double)seen;
}
