/* Zip archives read in place, for the dataset_tool importer (dstool.c).
 *
 * The central directory at the end of the archive lists every member:
 * name, method, sizes, CRC-32 and where its local header lies. It is read
 * once at open into one array and one string arena; members are then read
 * with pread, from any thread, stored (method 0) or deflated (method 8,
 * zlib's raw inflate), and checked against their CRC-32. Zip64 archives
 * (over 65,535 members, as FFHQ's 70,000 and ImageNet's 1.28 M, or over
 * 4 GiB) are read through their zip64 end record and extra fields. Errors
 * name the archive, and the member where there is one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include <ganflow/err.h>

#include "convert.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_END 0x06054b50u
#define SIG_END64 0x06064b50u
#define SIG_LOC64 0x07064b50u
#define MEMBER_MAX ((uint64_t)1 << 31) /* larger members are refused: a record payload is at most 4 GiB */

typedef struct member {
	uint64_t local;  /* offset of the local header */
	uint64_t csize, usize;
	uint32_t crc;
	uint32_t name;   /* offset of the name in the arena */
	uint16_t method, flags;
} member;

struct gf_zip {
	char *path;
	int fd;
	uint64_t size;   /* of the file */
	member *m;       /* (n) in central directory order */
	size_t n;
	char *names;     /* NUL-terminated names, one after another */
};

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* Reads exactly len bytes at off; a short read is a truncated archive. */
static int read_at(const gf_zip *z, void *buf, size_t len, uint64_t off, const char *what)
{
	size_t done = 0;
	while (done < len) {
		ssize_t r = pread(z->fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return gf_seterr(-errno, "%s: %s: %s", z->path, what, strerror(errno));
		if (r == 0)
			return gf_seterr(GF_ECORRUPT, "%s: %s: the file ends early (truncated zip)", z->path, what);
		done += (size_t)r;
	}
	return 0;
}

/* ---- the central directory ---- */

typedef struct dir_end {
	uint64_t entries, cd_size, cd_off;
} dir_end;

/* Finds the end of central directory record (and the zip64 one when the
 * archive has it). */
static int find_end(gf_zip *z, dir_end *e)
{
	/* the end record is 22 bytes plus a comment of up to 65,535 */
	size_t tail = z->size < 22 + 65535 + 20 ? (size_t)z->size : 22 + 65535 + 20;
	uint8_t *b = malloc(tail ? tail : 1);
	if (!b)
		return -ENOMEM;
	uint64_t base = z->size - tail;
	int rc = read_at(z, b, tail, base, "end of central directory");
	if (rc)
		goto out;
	size_t at = SIZE_MAX;
	for (size_t i = tail >= 22 ? tail - 22 + 1 : 0; i-- > 0;)
		if (le32(b + i) == SIG_END && i + 22 + (size_t)le16(b + i + 20) == tail) {
			at = i;
			break;
		}
	if (at == SIZE_MAX) {
		rc = gf_seterr(GF_ECORRUPT, "%s: not a zip file (no end of central directory record)", z->path);
		goto out;
	}
	const uint8_t *p = b + at;
	if (le16(p + 4) != 0 || le16(p + 6) != 0) {
		rc = gf_seterr(GF_ECORRUPT, "%s: a zip split over several disks is not supported", z->path);
		goto out;
	}
	e->entries = le16(p + 10);
	e->cd_size = le32(p + 12);
	e->cd_off = le32(p + 16);
	if (at >= 20 && le32(p - 20) == SIG_LOC64) { /* zip64: the locator sits right before the end record */
		uint64_t off64 = le64(p - 20 + 8);
		uint8_t r[56];
		if (off64 > z->size || z->size - off64 < sizeof(r)) {
			rc = gf_seterr(GF_ECORRUPT, "%s: zip64 end record at %llu lies outside the file", z->path,
			               (unsigned long long)off64);
			goto out;
		}
		if ((rc = read_at(z, r, sizeof(r), off64, "zip64 end of central directory")))
			goto out;
		if (le32(r) != SIG_END64) {
			rc = gf_seterr(GF_ECORRUPT, "%s: bad zip64 end of central directory record", z->path);
			goto out;
		}
		e->entries = le64(r + 32);
		e->cd_size = le64(r + 40);
		e->cd_off = le64(r + 48);
	}
	if (e->cd_off > z->size || z->size - e->cd_off < e->cd_size)
		rc = gf_seterr(GF_ECORRUPT, "%s: the central directory (%llu bytes at %llu) lies outside the file "
		                            "(truncated zip?)",
		               z->path, (unsigned long long)e->cd_size, (unsigned long long)e->cd_off);
out:
	free(b);
	return rc;
}

/* The zip64 extra field of a central entry: 64-bit values for the fields
 * that hold 0xffffffff, in the order usize, csize, offset. */
static int zip64_extra(const gf_zip *z, const char *name, const uint8_t *x, size_t xlen, member *m, int need_u,
                       int need_c, int need_o)
{
	while (xlen >= 4) {
		uint16_t id = le16(x), len = le16(x + 2);
		if ((size_t)len + 4 > xlen)
			break;
		if (id == 1) {
			const uint8_t *p = x + 4, *end = x + 4 + len;
			if (need_u) {
				if (end - p < 8)
					break;
				m->usize = le64(p), p += 8;
			}
			if (need_c) {
				if (end - p < 8)
					break;
				m->csize = le64(p), p += 8;
			}
			if (need_o) {
				if (end - p < 8)
					break;
				m->local = le64(p);
			}
			return 0;
		}
		x += 4 + len;
		xlen -= 4 + (size_t)len;
	}
	return gf_seterr(GF_ECORRUPT, "%s: %s: sizes marked zip64 but no complete zip64 extra field", z->path, name);
}

static int parse_directory(gf_zip *z, const uint8_t *cd, size_t cd_size, uint64_t entries)
{
	size_t arena = 0, pos = 0;
	/* entries is the archive's own count; the walk below finds out what the directory really holds */
	if (entries > cd_size / 46)
		return gf_seterr(GF_ECORRUPT, "%s: the central directory cannot hold %llu entries", z->path,
		                 (unsigned long long)entries);
	z->m = calloc(entries ? entries : 1, sizeof(member));
	z->names = malloc(cd_size + 1); /* names are shorter than their entries */
	if (!z->m || !z->names)
		return -ENOMEM;
	for (uint64_t i = 0; i < entries; i++) {
		if (cd_size - pos < 46 || le32(cd + pos) != SIG_CENTRAL)
			return gf_seterr(GF_ECORRUPT, "%s: central directory entry %llu is corrupt", z->path,
			                 (unsigned long long)i);
		const uint8_t *p = cd + pos;
		size_t nlen = le16(p + 28), xlen = le16(p + 30), clen = le16(p + 32);
		if (cd_size - pos - 46 < nlen + xlen + clen)
			return gf_seterr(GF_ECORRUPT, "%s: central directory entry %llu runs past the directory", z->path,
			                 (unsigned long long)i);
		member *m = &z->m[i];
		char *name = z->names + arena;
		memcpy(name, p + 46, nlen);
		name[nlen] = '\0';
		if (strlen(name) != nlen)
			return gf_seterr(GF_ECORRUPT, "%s: central directory entry %llu has a NUL byte in its name", z->path,
			                 (unsigned long long)i);
		m->name = (uint32_t)arena;
		arena += nlen + 1;
		m->flags = le16(p + 8);
		m->method = le16(p + 10);
		m->crc = le32(p + 16);
		m->csize = le32(p + 20);
		m->usize = le32(p + 24);
		m->local = le32(p + 42);
		int nu = m->usize == 0xffffffffu, nc = m->csize == 0xffffffffu, no = m->local == 0xffffffffu;
		int rc;
		if ((nu || nc || no) && (rc = zip64_extra(z, name, p + 46 + nlen, xlen, m, nu, nc, no)))
			return rc;
		pos += 46 + nlen + xlen + clen;
	}
	z->n = (size_t)entries;
	return 0;
}

int gf_zip_open(const char *path, gf_zip **out)
{
	*out = NULL;
	gf_zip *z = calloc(1, sizeof(*z));
	if (!z || !(z->path = strdup(path))) {
		free(z);
		return -ENOMEM;
	}
	uint8_t *cd = NULL;
	int rc = 0;
	struct stat st;
	if ((z->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(z->fd, &st)) {
		rc = gf_seterr(-errno, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = gf_seterr(GF_EPARAM, "%s: not a file", path);
		goto fail;
	}
	z->size = (uint64_t)st.st_size;
	dir_end e = { 0, 0, 0 };
	if ((rc = find_end(z, &e)))
		goto fail;
	if (e.cd_size >= UINT32_MAX) { /* names are found by 32-bit offsets */
		rc = gf_seterr(GF_ECORRUPT, "%s: central directory of %llu bytes", path, (unsigned long long)e.cd_size);
		goto fail;
	}
	if (!(cd = malloc(e.cd_size ? (size_t)e.cd_size : 1))) {
		rc = -ENOMEM;
		goto fail;
	}
	if ((rc = read_at(z, cd, (size_t)e.cd_size, e.cd_off, "central directory")) ||
	    (rc = parse_directory(z, cd, (size_t)e.cd_size, e.entries)))
		goto fail;
	free(cd);
	*out = z;
	return 0;
fail:
	free(cd);
	gf_zip_close(z);
	return rc;
}

void gf_zip_close(gf_zip *z)
{
	if (!z)
		return;
	if (z->fd >= 0)
		close(z->fd);
	free(z->m);
	free(z->names);
	free(z->path);
	free(z);
}

size_t gf_zip_count(const gf_zip *z)
{
	return z->n;
}

const char *gf_zip_name(const gf_zip *z, size_t i)
{
	return z->names + z->m[i].name;
}

const char *gf_zip_path(const gf_zip *z)
{
	return z->path;
}

/* ---- members ---- */

/* Inflates the raw deflate stream of m (at off, csize bytes) into out
 * (usize bytes), reading the file 64 KiB at a time. */
static int inflate_member(const gf_zip *z, const member *m, const char *name, uint64_t off, uint8_t *out)
{
	uint8_t in[1 << 16];
	z_stream s;
	memset(&s, 0, sizeof(s));
	if (inflateInit2(&s, -15) != Z_OK)
		return -ENOMEM;
	s.next_out = out;
	s.avail_out = (uInt)m->usize;
	uint64_t left = m->csize;
	int rc = 0, zr = Z_OK;
	while (zr != Z_STREAM_END) {
		if (!s.avail_in) {
			if (!left) {
				rc = gf_seterr(GF_ECORRUPT, "%s: %s: deflate data ends early (corrupt member)", z->path, name);
				break;
			}
			size_t k = left < sizeof(in) ? (size_t)left : sizeof(in);
			if ((rc = read_at(z, in, k, off, name)))
				break;
			off += k;
			left -= k;
			s.next_in = in;
			s.avail_in = (uInt)k;
		}
		zr = inflate(&s, Z_NO_FLUSH);
		if (zr == Z_MEM_ERROR) {
			rc = -ENOMEM;
			break;
		}
		if (zr != Z_OK && zr != Z_STREAM_END) {
			rc = gf_seterr(GF_ECORRUPT, "%s: %s: corrupt deflate data (%s)", z->path, name,
			               s.msg ? s.msg : "more data than its size");
			break;
		}
	}
	if (!rc && s.total_out != m->usize)
		rc = gf_seterr(GF_ECORRUPT, "%s: %s: inflates to %lu bytes, the directory says %llu (corrupt member)",
		               z->path, name, s.total_out, (unsigned long long)m->usize);
	inflateEnd(&s);
	return rc;
}

int gf_zip_read(const gf_zip *z, size_t i, uint8_t **buf, size_t *cap, size_t *len)
{
	const member *m = &z->m[i];
	const char *name = gf_zip_name(z, i);
	if (m->flags & 1)
		return gf_seterr(GF_ECORRUPT, "%s: %s is encrypted", z->path, name);
	if (m->method != 0 && m->method != 8)
		return gf_seterr(GF_ECORRUPT, "%s: %s: compression method %u (only stored and deflated members are read)",
		                 z->path, name, m->method);
	if (m->usize > MEMBER_MAX || (m->method == 0 && m->csize != m->usize))
		return gf_seterr(GF_ECORRUPT, "%s: %s: bad sizes in the central directory (%llu stored, %llu unpacked)",
		                 z->path, name, (unsigned long long)m->csize, (unsigned long long)m->usize);
	uint8_t h[30];
	int rc;
	if (m->local > z->size || z->size - m->local < sizeof(h))
		return gf_seterr(GF_ECORRUPT, "%s: %s: local header outside the file (truncated zip?)", z->path, name);
	if ((rc = read_at(z, h, sizeof(h), m->local, name)))
		return rc;
	if (le32(h) != SIG_LOCAL)
		return gf_seterr(GF_ECORRUPT, "%s: %s: no local header at offset %llu (corrupt zip)", z->path, name,
		                 (unsigned long long)m->local);
	uint64_t data = m->local + 30 + le16(h + 26) + le16(h + 28);
	if (data > z->size || z->size - data < m->csize)
		return gf_seterr(GF_ECORRUPT, "%s: %s: data runs past the end of the file (truncated zip)", z->path, name);
	size_t n = (size_t)m->usize;
	if (n + 1 > *cap) { /* one byte more: a text member can be NUL-terminated in place */
		uint8_t *nb = realloc(*buf, n + 1 + n / 4);
		if (!nb)
			return -ENOMEM;
		*buf = nb;
		*cap = n + 1 + n / 4;
	}
	if (m->method == 0)
		rc = read_at(z, *buf, n, data, name);
	else
		rc = inflate_member(z, m, name, data, *buf);
	if (rc)
		return rc;
	uint32_t crc = (uint32_t)crc32_z(crc32(0, Z_NULL, 0), *buf, n);
	if (crc != m->crc)
		return gf_seterr(GF_ECORRUPT, "%s: %s: CRC-32 %08x, the directory says %08x (corrupt member)", z->path,
		                 name, crc, m->crc);
	*len = n;
	return 0;
}
