/* safetensors reading and atomic writing. See <ganflow/safetensors.h>.
 *
 * Checkpoints, PyTorch reference tensors and user-supplied weights all pass
 * through here, so the reader trusts nothing: the JSON header is parsed by
 * a small strict parser and every byte range is checked against the file
 * before any tensor is handed out. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ganflow/err.h>
#include <ganflow/safetensors.h>

#define MAX_HEADER (100u << 20)   /* the reference implementation's limit */

/* ---- dtypes ---- */

struct st_dtype {
	const char *name;
	size_t size;
	int gf;   /* gf_dtype, or -1 when ganflow has none */
};

static const struct st_dtype dtypes[] = {
	{ "F32", 4, GF_F32 }, { "F16", 2, GF_F16 }, { "BF16", 2, GF_BF16 },
	{ "U8", 1, GF_U8 }, { "I32", 4, GF_I32 }, { "I64", 8, GF_I64 },
	{ "F64", 8, -1 }, { "BOOL", 1, -1 }, { "I8", 1, -1 }, { "I16", 2, -1 },
	{ "U16", 2, -1 }, { "U32", 4, -1 }, { "U64", 8, -1 },
	{ "F8_E4M3", 1, -1 }, { "F8_E5M2", 1, -1 },
};

static const struct st_dtype *dtype_by_name(const char *s)
{
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (strcmp(dtypes[i].name, s) == 0)
			return &dtypes[i];
	return NULL;
}

static const char *dtype_st_name(gf_dtype t)
{
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (dtypes[i].gf == (int)t)
			return dtypes[i].name;
	return NULL;
}

/* ---- writing ---- */

struct buf {
	char *p;
	size_t len, cap;
	int oom;
};

static void buf_put(struct buf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void buf_str(struct buf *b, const char *s)
{
	buf_put(b, s, strlen(s));
}

/* A JSON string literal with the escapes JSON requires. */
static void buf_json_str(struct buf *b, const char *s)
{
	buf_put(b, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char esc[8];
		if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*p;
			buf_put(b, esc, 2);
		} else if (*p < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", *p);
			buf_put(b, esc, 6);
		} else {
			buf_put(b, (const char *)p, 1);
		}
	}
	buf_put(b, "\"", 1);
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int fsync_dir(const char *path)
{
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(copy);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) < 0 && errno != EINVAL ? -errno : 0;
	close(fd);
	return rc;
}

/* Checks the entries and builds the JSON header, space-padded so that the
 * data starts 8-byte aligned. what names the file in messages. */
static int build_header(struct buf *h, const char *what, const gf_st_entry *e, size_t n, const char *const *meta,
                        uint64_t *data_bytes)
{
	char num[64];
	uint64_t off = 0;
	for (size_t i = 0; i < n; i++) {
		if (!e[i].name || !e[i].name[0] || strcmp(e[i].name, "__metadata__") == 0)
			return gf_seterr(GF_EPARAM, "%s: tensor %zu has an empty or reserved name", what, i);
		for (size_t j = 0; j < i; j++)
			if (strcmp(e[i].name, e[j].name) == 0)
				return gf_seterr(GF_EPARAM, "%s: tensor name '%s' given twice", what, e[i].name);
		if (!dtype_st_name(e[i].t.dtype))
			return gf_seterr(GF_EPARAM, "%s: tensor '%s' has an unknown dtype", what, e[i].name);
		if (e[i].t.device != GF_CPU)
			return gf_seterr(GF_EPARAM, "%s: tensor '%s' is not in host memory", what, e[i].name);
		if (!e[i].t.data && gf_tensor_bytes(&e[i].t))
			return gf_seterr(GF_EPARAM, "%s: tensor '%s' has no data", what, e[i].name);
	}
	buf_str(h, "{");
	if (meta && meta[0]) {
		buf_str(h, "\"__metadata__\":{");
		for (size_t i = 0; meta[i] && meta[i + 1]; i += 2) {
			if (i)
				buf_str(h, ",");
			buf_json_str(h, meta[i]);
			buf_str(h, ":");
			buf_json_str(h, meta[i + 1]);
		}
		buf_str(h, "}");
	}
	for (size_t i = 0; i < n; i++) {
		if (h->len > 1)
			buf_str(h, ",");
		buf_json_str(h, e[i].name);
		buf_str(h, ":{\"dtype\":\"");
		buf_str(h, dtype_st_name(e[i].t.dtype));
		buf_str(h, "\",\"shape\":[");
		for (int d = 0; d < e[i].t.ndim; d++) {
			snprintf(num, sizeof(num), "%s%" PRId64, d ? "," : "", e[i].t.shape[d]);
			buf_str(h, num);
		}
		uint64_t bytes = gf_tensor_bytes(&e[i].t);
		snprintf(num, sizeof(num), "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, off + bytes);
		buf_str(h, num);
		off += bytes;
	}
	buf_str(h, "}");
	while ((8 + h->len) % 8)
		buf_str(h, " ");
	if (h->oom)
		return gf_seterr(-ENOMEM, "%s: out of memory building the header", what);
	*data_bytes = off;
	return 0;
}

int gf_st_encode(const gf_st_entry *e, size_t n, const char *const *meta, void **out, size_t *len)
{
	struct buf h = { 0 };
	uint64_t data = 0;
	*out = NULL;
	*len = 0;
	int rc = build_header(&h, "safetensors image", e, n, meta, &data);
	if (rc) {
		free(h.p);
		return rc;
	}
	size_t total = 8 + h.len + (size_t)data;
	unsigned char *img = malloc(total);
	if (!img) {
		free(h.p);
		return gf_seterr(-ENOMEM, "safetensors image: out of memory for %zu bytes", total);
	}
	for (int i = 0; i < 8; i++)
		img[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
	memcpy(img + 8, h.p, h.len);
	size_t at = 8 + h.len;
	for (size_t i = 0; i < n; i++) {
		size_t b = gf_tensor_bytes(&e[i].t);
		if (b)
			memcpy(img + at, e[i].t.data, b);
		at += b;
	}
	free(h.p);
	*out = img;
	*len = total;
	return 0;
}

int gf_st_write(const char *path, const gf_st_entry *e, size_t n, const char *const *meta)
{
	struct buf h = { 0 };
	char *tmp = NULL;
	int fd = -1, rc = 0;
	uint64_t data = 0;

	if ((rc = build_header(&h, path, e, n, meta, &data)))
		goto fail;

	/* body, into a temporary file beside the target */
	size_t tlen = strlen(path) + 32;
	tmp = malloc(tlen);
	if (!tmp) {
		rc = gf_seterr(-ENOMEM, "%s: out of memory", path);
		goto fail;
	}
	snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = gf_seterr(-errno, "%s: cannot create %s: %s", path, tmp, strerror(errno));
		goto fail_nounlink;
	}
	unsigned char len8[8];
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
	if ((rc = write_all(fd, len8, 8)) || (rc = write_all(fd, h.p, h.len)))
		goto fail_io;
	for (size_t i = 0; i < n; i++)
		if ((rc = write_all(fd, e[i].t.data, gf_tensor_bytes(&e[i].t))))
			goto fail_io;
	if (fsync(fd) < 0) {
		rc = -errno;
		goto fail_io;
	}
	if (close(fd) < 0) {
		fd = -1;
		rc = -errno;
		goto fail_io;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		rc = -errno;
		goto fail_io;
	}
	fsync_dir(path);
	free(tmp);
	free(h.p);
	return 0;

fail_io:
	gf_seterr(rc, "%s: write failed: %s (previous file left intact)", path, strerror(-rc));
fail:
	if (fd >= 0)
		close(fd);
	if (tmp)
		unlink(tmp);
fail_nounlink:
	free(tmp);
	free(h.p);
	return rc;
}

/* ---- reading: a strict JSON parser for the header ---- */

struct st_tensor {
	char *name;
	const struct st_dtype *dt;
	int ndim;
	int64_t shape[GF_MAX_DIMS];
	uint64_t begin, end;
};

struct gf_st_file {
	char *path;
	unsigned char *bytes;   /* the whole file */
	size_t size;
	const unsigned char *data;  /* start of the data section */
	uint64_t data_size;
	struct st_tensor *t;
	size_t n;
	char **meta;            /* key, value pairs */
	size_t nmeta;
};

struct parser {
	const char *p, *end;
	const char *path;
	int rc;
	const char *start;   /* first header byte, for positions in messages */
};

static int perr(struct parser *ps, const char *what)
{
	if (!ps->rc)
		ps->rc = gf_seterr(GF_ECORRUPT, "%s: corrupt safetensors header: %s", ps->path, what);
	return ps->rc;
}

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static int expect(struct parser *ps, char c)
{
	skip_ws(ps);
	if (ps->p >= ps->end || *ps->p != c) {
		char what[64];
		snprintf(what, sizeof(what), "expected '%c' at header byte %ld", c,
		         (long)(ps->p - (ps->start ? ps->start : ps->p)));
		return perr(ps, what);
	}
	ps->p++;
	return 0;
}

static int peek(struct parser *ps, char c)
{
	skip_ws(ps);
	return ps->p < ps->end && *ps->p == c;
}

static void put_utf8(char *out, size_t *len, uint32_t cp)
{
	if (cp < 0x80) {
		out[(*len)++] = (char)cp;
	} else if (cp < 0x800) {
		out[(*len)++] = (char)(0xC0 | (cp >> 6));
		out[(*len)++] = (char)(0x80 | (cp & 0x3F));
	} else if (cp < 0x10000) {
		out[(*len)++] = (char)(0xE0 | (cp >> 12));
		out[(*len)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[(*len)++] = (char)(0x80 | (cp & 0x3F));
	} else {
		out[(*len)++] = (char)(0xF0 | (cp >> 18));
		out[(*len)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
		out[(*len)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[(*len)++] = (char)(0x80 | (cp & 0x3F));
	}
}

static int hex4(struct parser *ps, uint32_t *v)
{
	*v = 0;
	if (ps->end - ps->p < 4)
		return perr(ps, "truncated \\u escape");
	for (int i = 0; i < 4; i++) {
		char c = *ps->p++;
		*v <<= 4;
		if (c >= '0' && c <= '9') *v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f') *v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F') *v |= (uint32_t)(c - 'A' + 10);
		else return perr(ps, "bad \\u escape");
	}
	return 0;
}

/* Parses a string literal into a new NUL-terminated string. */
static int parse_str(struct parser *ps, char **out)
{
	*out = NULL;
	if (expect(ps, '"'))
		return ps->rc;
	const char *start = ps->p;
	while (ps->p < ps->end && *ps->p != '"') {
		if (*ps->p == '\\' && ps->end - ps->p < 2)
			break;
		ps->p += *ps->p == '\\' ? 2 : 1;
	}
	if (ps->p >= ps->end)
		return perr(ps, "unterminated string");
	size_t max = (size_t)(ps->p - start);
	char *s = malloc(max * 2 + 1);   /* \uXXXX -> at most 3 bytes; pairs 4 for 12 */
	if (!s)
		return ps->rc = gf_seterr(-ENOMEM, "%s: out of memory", ps->path);
	size_t len = 0;
	const char *q = start;
	struct parser sub = { q, ps->p, ps->path, 0, ps->start };
	while (sub.p < sub.end) {
		unsigned char c = (unsigned char)*sub.p++;
		if (c < 0x20) {
			free(s);
			return perr(ps, "control character in string");
		}
		if (c != '\\') {
			s[len++] = (char)c;
			continue;
		}
		char e = *sub.p++;
		switch (e) {
		case '"': s[len++] = '"'; break;
		case '\\': s[len++] = '\\'; break;
		case '/': s[len++] = '/'; break;
		case 'b': s[len++] = '\b'; break;
		case 'f': s[len++] = '\f'; break;
		case 'n': s[len++] = '\n'; break;
		case 'r': s[len++] = '\r'; break;
		case 't': s[len++] = '\t'; break;
		case 'u': {
			uint32_t cp, lo;
			if (hex4(&sub, &cp)) {
				free(s);
				return perr(ps, "bad \\u escape");
			}
			if (cp >= 0xD800 && cp < 0xDC00) {
				if (sub.end - sub.p < 6 || sub.p[0] != '\\' || sub.p[1] != 'u') {
					free(s);
					return perr(ps, "lone surrogate in string");
				}
				sub.p += 2;
				if (hex4(&sub, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
					free(s);
					return perr(ps, "bad surrogate pair");
				}
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			}
			put_utf8(s, &len, cp);
			break;
		}
		default:
			free(s);
			return perr(ps, "bad escape in string");
		}
	}
	s[len] = '\0';
	ps->p++;   /* closing quote */
	*out = s;
	return 0;
}

static int parse_u64(struct parser *ps, uint64_t *v)
{
	skip_ws(ps);
	if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
		return perr(ps, "expected a non-negative integer");
	uint64_t x = 0;
	while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
		unsigned d = (unsigned)(*ps->p++ - '0');
		if (x > (UINT64_MAX - d) / 10)
			return perr(ps, "integer overflow");
		x = x * 10 + d;
	}
	if (ps->p < ps->end && (*ps->p == '.' || *ps->p == 'e' || *ps->p == 'E'))
		return perr(ps, "expected an integer");
	*v = x;
	return 0;
}

static int parse_tensor(struct parser *ps, struct st_tensor *t)
{
	int have_dtype = 0, have_shape = 0, have_off = 0;
	if (expect(ps, '{'))
		return ps->rc;
	if (!peek(ps, '}')) {
		do {
			char *key;
			if (parse_str(ps, &key) || expect(ps, ':')) {
				free(key);
				return ps->rc;
			}
			if (strcmp(key, "dtype") == 0 && !have_dtype) {
				char *d;
				if (parse_str(ps, &d)) {
					free(key);
					return ps->rc;
				}
				t->dt = dtype_by_name(d);
				if (!t->dt) {
					char what[96];
					snprintf(what, sizeof(what), "unknown dtype \"%.40s\"", d);
					free(d);
					free(key);
					return perr(ps, what);
				}
				free(d);
				have_dtype = 1;
			} else if (strcmp(key, "shape") == 0 && !have_shape) {
				if (expect(ps, '[')) {
					free(key);
					return ps->rc;
				}
				t->ndim = 0;
				if (!peek(ps, ']')) {
					do {
						uint64_t v;
						if (t->ndim >= GF_MAX_DIMS) {
							free(key);
							return perr(ps, "tensor with more than 6 dimensions");
						}
						if (parse_u64(ps, &v) || v > INT64_MAX / 2) {
							free(key);
							return perr(ps, "bad shape");
						}
						t->shape[t->ndim++] = (int64_t)v;
						skip_ws(ps);
					} while (ps->p < ps->end && *ps->p == ',' && ps->p++);
				}
				if (expect(ps, ']')) {
					free(key);
					return ps->rc;
				}
				have_shape = 1;
			} else if (strcmp(key, "data_offsets") == 0 && !have_off) {
				if (expect(ps, '[') || parse_u64(ps, &t->begin) || expect(ps, ',') ||
				    parse_u64(ps, &t->end) || expect(ps, ']')) {
					free(key);
					return ps->rc;
				}
				have_off = 1;
			} else {
				char what[96];
				snprintf(what, sizeof(what), "unexpected key \"%.40s\" in tensor entry", key);
				free(key);
				return perr(ps, what);
			}
			free(key);
			skip_ws(ps);
		} while (ps->p < ps->end && *ps->p == ',' && ps->p++);
	}
	if (expect(ps, '}'))
		return ps->rc;
	if (!have_dtype || !have_shape || !have_off)
		return perr(ps, "tensor entry without dtype, shape or data_offsets");
	return 0;
}

static int parse_meta(struct parser *ps, gf_st_file *f)
{
	if (expect(ps, '{'))
		return ps->rc;
	if (!peek(ps, '}')) {
		do {
			char *k = NULL, *v = NULL;
			if (parse_str(ps, &k) || expect(ps, ':')) {
				free(k);
				return ps->rc;
			}
			if (!peek(ps, '"') || parse_str(ps, &v)) {
				free(k);
				free(v);
				return perr(ps, "__metadata__ must map strings to strings");
			}
			char **m = realloc(f->meta, (f->nmeta + 1) * 2 * sizeof(*m));
			if (!m) {
				free(k);
				free(v);
				return ps->rc = gf_seterr(-ENOMEM, "%s: out of memory", ps->path);
			}
			f->meta = m;
			m[f->nmeta * 2] = k;
			m[f->nmeta * 2 + 1] = v;
			f->nmeta++;
			skip_ws(ps);
		} while (ps->p < ps->end && *ps->p == ',' && ps->p++);
	}
	return expect(ps, '}');
}

static int parse_header(struct parser *ps, gf_st_file *f)
{
	int have_meta = 0;
	if (expect(ps, '{'))
		return ps->rc;
	if (!peek(ps, '}')) {
		do {
			char *key;
			if (parse_str(ps, &key) || expect(ps, ':')) {
				free(key);
				return ps->rc;
			}
			if (strcmp(key, "__metadata__") == 0) {
				free(key);
				if (have_meta)
					return perr(ps, "__metadata__ given twice");
				have_meta = 1;
				if (parse_meta(ps, f))
					return ps->rc;
			} else {
				for (size_t i = 0; i < f->n; i++) {
					if (strcmp(f->t[i].name, key) == 0) {
						char what[128];
						snprintf(what, sizeof(what), "tensor \"%.80s\" given twice", key);
						free(key);
						return perr(ps, what);
					}
				}
				struct st_tensor *t = realloc(f->t, (f->n + 1) * sizeof(*t));
				if (!t) {
					free(key);
					return ps->rc = gf_seterr(-ENOMEM, "%s: out of memory", ps->path);
				}
				f->t = t;
				memset(&t[f->n], 0, sizeof(t[0]));
				t[f->n].name = key;
				f->n++;
				if (parse_tensor(ps, &t[f->n - 1]))
					return ps->rc;
			}
			skip_ws(ps);
		} while (ps->p < ps->end && *ps->p == ',' && ps->p++);
	}
	if (expect(ps, '}'))
		return ps->rc;
	skip_ws(ps);
	if (ps->p != ps->end)
		return perr(ps, "trailing bytes after the JSON object");
	return 0;
}

static int cmp_begin(const void *a, const void *b)
{
	const struct st_tensor *x = *(const struct st_tensor *const *)a;
	const struct st_tensor *y = *(const struct st_tensor *const *)b;
	return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* Byte ranges: inside the data section, of the size dtype x shape says,
 * not overlapping. */
static int check_ranges(gf_st_file *f)
{
	struct st_tensor **order = NULL;
	int rc = 0;
	for (size_t i = 0; i < f->n; i++) {
		struct st_tensor *t = &f->t[i];
		uint64_t numel = 1;
		for (int d = 0; d < t->ndim; d++) {
			if (t->shape[d] && numel > UINT64_MAX / 16 / (uint64_t)t->shape[d])
				return gf_seterr(GF_ECORRUPT, "%s: tensor '%s' is impossibly large", f->path, t->name);
			numel *= (uint64_t)t->shape[d];
		}
		if (t->begin > t->end || t->end > f->data_size)
			return gf_seterr(GF_ECORRUPT, "%s: tensor '%s' has data_offsets [%" PRIu64 ", %" PRIu64
			                 "] outside the %" PRIu64 " data bytes (truncated file?)",
			                 f->path, t->name, t->begin, t->end, f->data_size);
		if (t->end - t->begin != numel * t->dt->size)
			return gf_seterr(GF_ECORRUPT, "%s: tensor '%s' has %" PRIu64 " bytes, its dtype and shape need %" PRIu64,
			                 f->path, t->name, t->end - t->begin, numel * t->dt->size);
	}
	if (f->n < 2)
		return 0;
	order = malloc(f->n * sizeof(*order));
	if (!order)
		return gf_seterr(-ENOMEM, "%s: out of memory", f->path);
	for (size_t i = 0; i < f->n; i++)
		order[i] = &f->t[i];
	qsort(order, f->n, sizeof(*order), cmp_begin);
	for (size_t i = 1; i < f->n; i++) {
		if (order[i]->begin < order[i - 1]->end && order[i]->end > order[i]->begin) {
			rc = gf_seterr(GF_ECORRUPT, "%s: tensors '%s' and '%s' overlap", f->path,
			               order[i - 1]->name, order[i]->name);
			break;
		}
	}
	free(order);
	return rc;
}

static int read_file(const char *path, unsigned char **out, size_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return gf_seterr(-errno, "%s: cannot open: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int rc = -errno;
		close(fd);
		return gf_seterr(rc, "%s: cannot stat: %s", path, strerror(-rc));
	}
	size_t n = (size_t)st.st_size;
	unsigned char *b = malloc(n ? n : 1);
	if (!b) {
		close(fd);
		return gf_seterr(-ENOMEM, "%s: out of memory reading %zu bytes", path, n);
	}
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, b + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int rc = r < 0 ? -errno : GF_ECORRUPT;
			free(b);
			close(fd);
			return gf_seterr(rc, "%s: read failed", path);
		}
		got += (size_t)r;
	}
	close(fd);
	*out = b;
	*size = n;
	return 0;
}

/* Validates f->bytes (f->size of them) and fills in the tensor table. */
static int parse_image(gf_st_file *f)
{
	const char *path = f->path;
	int rc;
	if (f->size < 8)
		return gf_seterr(GF_ECORRUPT, "%s: truncated safetensors file (%zu bytes, no header length)", path, f->size);
	uint64_t hlen = 0;
	for (int i = 0; i < 8; i++)
		hlen |= (uint64_t)f->bytes[i] << (8 * i);
	if (hlen > MAX_HEADER || hlen > f->size - 8 || hlen < 2)
		return gf_seterr(GF_ECORRUPT, "%s: header length %" PRIu64 " does not fit the %zu-byte file (truncated or not safetensors)",
		                 path, hlen, f->size);
	struct parser ps = { (const char *)f->bytes + 8, (const char *)f->bytes + 8 + hlen, path, 0,
	                     (const char *)f->bytes + 8 };
	if ((rc = parse_header(&ps, f)))
		return rc;
	f->data = f->bytes + 8 + hlen;
	f->data_size = f->size - 8 - hlen;
	return check_ranges(f);
}

int gf_st_open(gf_st_file **out, const char *path)
{
	*out = NULL;
	gf_st_file *f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(path))) {
		free(f);
		return gf_seterr(-ENOMEM, "%s: out of memory", path);
	}
	int rc = read_file(path, &f->bytes, &f->size);
	if (!rc)
		rc = parse_image(f);
	if (rc) {
		gf_st_close(f);
		return rc;
	}
	*out = f;
	return 0;
}

int gf_st_open_mem(gf_st_file **out, const void *data, size_t size, const char *name)
{
	*out = NULL;
	if (!name)
		name = "safetensors image";
	gf_st_file *f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(name)) || !(f->bytes = malloc(size ? size : 1))) {
		if (f)
			free(f->path);
		free(f);
		return gf_seterr(-ENOMEM, "%s: out of memory for %zu bytes", name, size);
	}
	if (size)
		memcpy(f->bytes, data, size);
	f->size = size;
	int rc = parse_image(f);
	if (rc) {
		gf_st_close(f);
		return rc;
	}
	*out = f;
	return 0;
}

void gf_st_close(gf_st_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++)
		free(f->t[i].name);
	for (size_t i = 0; i < f->nmeta * 2; i++)
		free(f->meta[i]);
	free(f->meta);
	free(f->t);
	free(f->bytes);
	free(f->path);
	free(f);
}

size_t gf_st_count(const gf_st_file *f)
{
	return f->n;
}

const char *gf_st_name(const gf_st_file *f, size_t i)
{
	return i < f->n ? f->t[i].name : NULL;
}

size_t gf_st_meta_count(const gf_st_file *f)
{
	return f->nmeta;
}

const char *gf_st_meta_key(const gf_st_file *f, size_t i)
{
	return i < f->nmeta ? f->meta[2 * i] : NULL;
}

const char *gf_st_meta(const gf_st_file *f, const char *key)
{
	for (size_t i = 0; i < f->nmeta; i++)
		if (strcmp(f->meta[2 * i], key) == 0)
			return f->meta[2 * i + 1];
	return NULL;
}

static const struct st_tensor *find(const gf_st_file *f, const char *name)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->t[i].name, name) == 0)
			return &f->t[i];
	return NULL;
}

int gf_st_get(const gf_st_file *f, const char *name, gf_tensor *out)
{
	const struct st_tensor *t = find(f, name);
	if (!t)
		return gf_seterr(GF_ENOTFOUND, "%s: no tensor '%s'", f->path, name);
	if (t->dt->gf < 0)
		return gf_seterr(GF_EUNSUPPORTED, "%s: tensor '%s' has dtype %s, which ganflow does not read",
		                 f->path, name, t->dt->name);
	*out = gf_tensor_make((void *)(f->data + t->begin), (gf_dtype)t->dt->gf, t->ndim, t->shape);
	return 0;
}

int gf_st_read(const gf_st_file *f, const char *name, gf_dtype dtype, int ndim,
               const int64_t *shape, void *dst)
{
	gf_tensor t;
	int rc = gf_st_get(f, name, &t);
	if (rc)
		return rc;
	gf_tensor want = gf_tensor_make(dst, dtype, ndim, shape);
	if (t.dtype != dtype || !gf_tensor_same_shape(&t, &want)) {
		char a[96], b[96];
		return gf_seterr(GF_ESHAPE, "%s: tensor '%s' is %s, expected %s", f->path, name,
		                 gf_tensor_shape_str(&t, a, sizeof(a)), gf_tensor_shape_str(&want, b, sizeof(b)));
	}
	memcpy(dst, t.data, gf_tensor_bytes(&t));
	return 0;
}
