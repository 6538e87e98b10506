/* The JSON form of gf_value trees: how checkpoints store layer tables, so
 * that any JSON reader (Python's json, jq) sees a network's architecture
 * and core code rebuilds it without a Lua interpreter. See
 * <ganflow/value.h>.
 *
 * Types survive the round trip: integers are written without a fraction
 * or exponent, numbers always with one ("1.0"), so a parsed integer is a
 * GF_VINT and a parsed number a GF_VNUM. Map keys are written sorted
 * (numeric keys "1", "2", ..., "10" in numeric order first, then the others
 * by strcmp), so the same tree always gives the same bytes.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/value.h>

/* ---- writing ---- */

struct buf {
	char *s;
	size_t len, cap;
	int err;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...)
{
	if (b->err)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->err = -EINVAL;
			return;
		}
		if (b->s && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap : 256;
		while (cap <= b->len + (size_t)n)
			cap *= 2;
		char *s = realloc(b->s, cap);
		if (!s) {
			b->err = -ENOMEM;
			return;
		}
		b->s = s;
		b->cap = cap;
	}
}

static void put_string(struct buf *b, const char *s)
{
	put(b, "\"");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			put(b, "\\%c", *p);
		else if (*p == '\n')
			put(b, "\\n");
		else if (*p == '\t')
			put(b, "\\t");
		else if (*p < 0x20)
			put(b, "\\u%04x", *p);
		else
			put(b, "%c", *p);
	}
	put(b, "\"");
}

/* Numeric keys first, in numeric order, then the others by strcmp. */
static int key_cmp(const char *a, const char *b)
{
	size_t la = strspn(a, "0123456789"), lb = strspn(b, "0123456789");
	int na = la > 0 && !a[la], nb = lb > 0 && !b[lb];
	if (na != nb)
		return na ? -1 : 1;
	if (na && la != strlen(b))
		return la < strlen(b) ? -1 : 1;
	return strcmp(a, b);
}

static void write_value(struct buf *b, const gf_value *v)
{
	switch (v->type) {
	case GF_VNIL:
		put(b, "null");
		break;
	case GF_VBOOL:
		put(b, v->u.b ? "true" : "false");
		break;
	case GF_VINT:
		put(b, "%lld", (long long)v->u.i);
		break;
	case GF_VNUM: {
		if (!isfinite(v->u.n)) {
			b->err = gf_seterr(GF_EPARAM, "%g has no JSON form", v->u.n);
			return;
		}
		char t[40];
		snprintf(t, sizeof(t), "%.17g", v->u.n);
		put(b, "%s%s", t, strpbrk(t, ".e") ? "" : ".0");
		break;
	}
	case GF_VSTR:
		put_string(b, v->u.s);
		break;
	case GF_VLIST:
		put(b, "[");
		for (size_t i = 0; i < v->u.c.len; i++) {
			put(b, i ? ", " : "");
			write_value(b, &v->u.c.items[i]);
		}
		put(b, "]");
		break;
	case GF_VMAP: {
		/* sorted: an order of indices by key */
		size_t n = v->u.c.len, *ord = malloc((n ? n : 1) * sizeof(size_t));
		if (!ord) {
			b->err = -ENOMEM;
			return;
		}
		for (size_t i = 0; i < n; i++) {
			size_t j = i;
			for (; j > 0 && key_cmp(v->u.c.keys[ord[j - 1]], v->u.c.keys[i]) > 0; j--)
				ord[j] = ord[j - 1];
			ord[j] = i;
		}
		put(b, "{");
		for (size_t i = 0; i < n; i++) {
			put(b, i ? ", " : "");
			put_string(b, v->u.c.keys[ord[i]]);
			put(b, ": ");
			write_value(b, &v->u.c.items[ord[i]]);
		}
		put(b, "}");
		free(ord);
		break;
	}
	}
}

int gf_value_to_json(const gf_value *v, char **out)
{
	struct buf b = { 0 };
	*out = NULL;
	write_value(&b, v ? v : &(gf_value){ .type = GF_VNIL });
	put(&b, "%s", "");
	if (b.err) {
		free(b.s);
		return b.err;
	}
	*out = b.s;
	return 0;
}

/* ---- parsing ---- */

struct in {
	const char *s, *p;
	int depth;
};

static int bad(struct in *in, const char *what)
{
	return gf_seterr(GF_EPARAM, "JSON: %s at offset %zu", what, (size_t)(in->p - in->s));
}

static void skip_ws(struct in *in)
{
	while (*in->p == ' ' || *in->p == '\t' || *in->p == '\n' || *in->p == '\r')
		in->p++;
}

static int parse_value(struct in *in, gf_value *out);

/* A string literal into *out (malloc'd). \uXXXX becomes UTF-8 (no
 * surrogate pairs: layer tables are ASCII). */
static int parse_string(struct in *in, char **out)
{
	if (*in->p != '"')
		return bad(in, "expected a string");
	in->p++;
	size_t cap = 32, n = 0;
	char *s = malloc(cap);
	if (!s)
		return -ENOMEM;
	for (;;) {
		if (n + 4 >= cap) { /* room for the longest escape */
			char *t = realloc(s, cap *= 2);
			if (!t) {
				free(s);
				return -ENOMEM;
			}
			s = t;
		}
		unsigned c = (unsigned char)*in->p++;
		if (!c) {
			free(s);
			in->p--;
			return bad(in, "unterminated string");
		}
		if (c == '"')
			break;
		if (c == '\\') {
			char e = *in->p++;
			const char *map = strchr("\"\"\\\\//b\bf\fn\nr\rt\t", e);
			if (e && map && (map - "\"\"\\\\//b\bf\fn\nr\rt\t") % 2 == 0) {
				c = (unsigned char)map[1];
			} else if (e == 'u') {
				unsigned u;
				if (sscanf(in->p, "%4x", &u) != 1) {
					free(s);
					return bad(in, "bad \\u escape");
				}
				in->p += 4;
				if (u >= 0x80) { /* two or three UTF-8 bytes; the last is added below */
					if (u >= 0x800) {
						s[n++] = (char)(0xe0 | (u >> 12));
						s[n++] = (char)(0x80 | ((u >> 6) & 0x3f));
					} else {
						s[n++] = (char)(0xc0 | (u >> 6));
					}
					u = 0x80 | (u & 0x3f);
				}
				c = u;
			} else {
				free(s);
				in->p--;
				return bad(in, "bad escape");
			}
		}
		s[n++] = (char)c;
	}
	s[n] = '\0';
	*out = s;
	return 0;
}

static int parse_number(struct in *in, gf_value *out)
{
	const char *start = in->p;
	char *end;
	size_t len = strspn(start, "+-0123456789.eE");
	if (!len)
		return bad(in, "unexpected character");
	if (!memchr(start, '.', len) && !memchr(start, 'e', len) && !memchr(start, 'E', len)) {
		errno = 0;
		long long i = strtoll(start, &end, 10);
		if (errno == 0 && end == start + len) {
			in->p = end;
			*out = gf_value_int(i);
			return 0;
		}
	}
	double d = strtod(start, &end);
	if (end != start + len)
		return bad(in, "malformed number");
	in->p = end;
	*out = gf_value_num(d);
	return 0;
}

static int parse_container(struct in *in, gf_value *out, int map)
{
	char close = map ? '}' : ']';
	*out = map ? gf_value_map() : gf_value_list();
	in->p++;
	skip_ws(in);
	if (*in->p == close) {
		in->p++;
		return 0;
	}
	for (;;) {
		char *key = NULL;
		gf_value v;
		int rc;
		skip_ws(in);
		if (map) {
			if ((rc = parse_string(in, &key)))
				goto fail;
			skip_ws(in);
			if (*in->p != ':') {
				free(key);
				rc = bad(in, "expected ':'");
				goto fail;
			}
			in->p++;
		}
		if ((rc = parse_value(in, &v))) {
			free(key);
			goto fail;
		}
		rc = map ? gf_value_set(out, key, v) : gf_value_append(out, v);
		free(key);
		if (rc)
			goto fail;
		skip_ws(in);
		if (*in->p == ',') {
			in->p++;
			continue;
		}
		if (*in->p == close) {
			in->p++;
			return 0;
		}
		rc = bad(in, map ? "expected ',' or '}'" : "expected ',' or ']'");
	fail:
		gf_value_free(out);
		return rc;
	}
}

static int parse_value(struct in *in, gf_value *out)
{
	skip_ws(in);
	if (++in->depth > 200)
		return bad(in, "nesting deeper than 200");
	int rc = 0;
	char *s;
	switch (*in->p) {
	case '{':
	case '[':
		rc = parse_container(in, out, *in->p == '{');
		break;
	case '"':
		if (!(rc = parse_string(in, &s))) {
			*out = gf_value_str(s);
			free(s);
			rc = out->type == GF_VSTR ? 0 : -ENOMEM;
		}
		break;
	default:
		if (!strncmp(in->p, "true", 4) || !strncmp(in->p, "false", 5)) {
			*out = gf_value_bool(*in->p == 't');
			in->p += *in->p == 't' ? 4 : 5;
		} else if (!strncmp(in->p, "null", 4)) {
			*out = gf_value_nil();
			in->p += 4;
		} else {
			rc = parse_number(in, out);
		}
	}
	in->depth--;
	return rc;
}

int gf_value_from_json(const char *text, gf_value *out)
{
	struct in in = { text, text, 0 };
	*out = gf_value_nil();
	int rc = parse_value(&in, out);
	if (rc)
		return rc;
	skip_ws(&in);
	if (*in.p) {
		gf_value_free(out);
		return bad(&in, "text after the value");
	}
	return 0;
}
