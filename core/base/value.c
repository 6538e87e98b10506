/* gf_value: the Lua-free configuration trees that stages and the nn engine
 * read. See <ganflow/value.h>. */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/value.h>

const char *gf_vtype_name(gf_vtype t)
{
	switch (t) {
	case GF_VNIL: return "nil";
	case GF_VBOOL: return "boolean";
	case GF_VINT: return "integer";
	case GF_VNUM: return "number";
	case GF_VSTR: return "string";
	case GF_VLIST: return "list";
	case GF_VMAP: return "table";
	}
	return "?";
}

/* ---- construction ---- */

gf_value gf_value_nil(void) { gf_value v = { .type = GF_VNIL }; return v; }
gf_value gf_value_bool(int b) { gf_value v = { .type = GF_VBOOL, .u.b = !!b }; return v; }
gf_value gf_value_int(int64_t i) { gf_value v = { .type = GF_VINT, .u.i = i }; return v; }
gf_value gf_value_num(double n) { gf_value v = { .type = GF_VNUM, .u.n = n }; return v; }
gf_value gf_value_list(void) { gf_value v = { .type = GF_VLIST }; return v; }
gf_value gf_value_map(void) { gf_value v = { .type = GF_VMAP }; return v; }

gf_value gf_value_str(const char *s)
{
	gf_value v = { .type = GF_VNIL };
	if (s) {
		v.u.s = strdup(s);
		if (v.u.s)
			v.type = GF_VSTR;
	}
	return v;
}

static int grow(gf_value *c)
{
	if (c->u.c.len < c->u.c.cap)
		return 0;
	size_t cap = c->u.c.cap ? c->u.c.cap * 2 : 4;
	gf_value *items = realloc(c->u.c.items, cap * sizeof(*items));
	if (!items)
		return -ENOMEM;
	c->u.c.items = items;
	if (c->type == GF_VMAP) {
		char **keys = realloc(c->u.c.keys, cap * sizeof(*keys));
		if (!keys)
			return -ENOMEM;
		c->u.c.keys = keys;
	}
	c->u.c.cap = cap;
	return 0;
}

int gf_value_append(gf_value *list, gf_value v)
{
	if (!list || list->type != GF_VLIST || grow(list)) {
		gf_value_free(&v);
		return list && list->type == GF_VLIST ? -ENOMEM : -EINVAL;
	}
	list->u.c.items[list->u.c.len++] = v;
	return 0;
}

int gf_value_set(gf_value *map, const char *key, gf_value v)
{
	if (!map || map->type != GF_VMAP || !key) {
		gf_value_free(&v);
		return -EINVAL;
	}
	for (size_t i = 0; i < map->u.c.len; i++) {
		if (strcmp(map->u.c.keys[i], key) == 0) {
			gf_value_free(&map->u.c.items[i]);
			map->u.c.items[i] = v;
			return 0;
		}
	}
	char *k = strdup(key);
	if (!k || grow(map)) {
		free(k);
		gf_value_free(&v);
		return -ENOMEM;
	}
	map->u.c.keys[map->u.c.len] = k;
	map->u.c.items[map->u.c.len++] = v;
	return 0;
}

int gf_value_copy(gf_value *dst, const gf_value *src)
{
	*dst = gf_value_nil();
	switch (src->type) {
	case GF_VSTR:
		*dst = gf_value_str(src->u.s);
		return dst->type == GF_VSTR ? 0 : -ENOMEM;
	case GF_VLIST:
	case GF_VMAP:
		dst->type = src->type;
		for (size_t i = 0; i < src->u.c.len; i++) {
			gf_value child;
			int rc = gf_value_copy(&child, &src->u.c.items[i]);
			if (rc == 0)
				rc = src->type == GF_VMAP ? gf_value_set(dst, src->u.c.keys[i], child)
				                          : gf_value_append(dst, child);
			if (rc) {
				gf_value_free(dst);
				return rc;
			}
		}
		return 0;
	default:
		*dst = *src;
		return 0;
	}
}

void gf_value_free(gf_value *v)
{
	if (!v)
		return;
	if (v->type == GF_VSTR) {
		free(v->u.s);
	} else if (v->type == GF_VLIST || v->type == GF_VMAP) {
		for (size_t i = 0; i < v->u.c.len; i++) {
			gf_value_free(&v->u.c.items[i]);
			if (v->u.c.keys)
				free(v->u.c.keys[i]);
		}
		free(v->u.c.items);
		free(v->u.c.keys);
	}
	*v = gf_value_nil();
}

/* ---- access ---- */

const gf_value *gf_value_get(const gf_value *v, const char *key)
{
	if (!v || v->type != GF_VMAP || !key)
		return NULL;
	for (size_t i = 0; i < v->u.c.len; i++)
		if (strcmp(v->u.c.keys[i], key) == 0)
			return &v->u.c.items[i];
	return NULL;
}

const gf_value *gf_value_at(const gf_value *v, size_t i)
{
	if (!v || v->type != GF_VLIST || i >= v->u.c.len)
		return NULL;
	return &v->u.c.items[i];
}

size_t gf_value_len(const gf_value *v)
{
	if (!v || (v->type != GF_VLIST && v->type != GF_VMAP))
		return 0;
	return v->u.c.len;
}

const gf_value *gf_value_arg(const gf_value *v, size_t i)
{
	if (!v)
		return NULL;
	if (v->type == GF_VLIST)
		return gf_value_at(v, i);
	char key[24];
	snprintf(key, sizeof(key), "%zu", i + 1);
	return gf_value_get(v, key);
}

size_t gf_value_nargs(const gf_value *v)
{
	size_t n = 0;
	while (gf_value_arg(v, n))
		n++;
	return n;
}

static void set_ok(int *ok, int val)
{
	if (ok)
		*ok = val;
}

int64_t gf_value_as_int(const gf_value *v, int64_t def, int *ok)
{
	set_ok(ok, 1);
	if (!v || v->type == GF_VNIL)
		return def;
	if (v->type == GF_VINT)
		return v->u.i;
	if (v->type == GF_VNUM && v->u.n == floor(v->u.n) && fabs(v->u.n) < 9.2e18)
		return (int64_t)v->u.n;
	set_ok(ok, 0);
	return def;
}

double gf_value_as_num(const gf_value *v, double def, int *ok)
{
	set_ok(ok, 1);
	if (!v || v->type == GF_VNIL)
		return def;
	if (v->type == GF_VNUM)
		return v->u.n;
	if (v->type == GF_VINT)
		return (double)v->u.i;
	set_ok(ok, 0);
	return def;
}

int gf_value_as_bool(const gf_value *v, int def, int *ok)
{
	set_ok(ok, 1);
	if (!v || v->type == GF_VNIL)
		return def;
	if (v->type == GF_VBOOL)
		return v->u.b;
	set_ok(ok, 0);
	return def;
}

const char *gf_value_as_str(const gf_value *v, const char *def, int *ok)
{
	set_ok(ok, 1);
	if (!v || v->type == GF_VNIL)
		return def;
	if (v->type == GF_VSTR)
		return v->u.s;
	set_ok(ok, 0);
	return def;
}

/* ---- formatting ---- */

struct out {
	char *buf;
	size_t size;
	size_t len;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t room = o->len < o->size ? o->size - o->len : 0;
	int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n;
}

/* A Lua string literal: quotes, backslashes and control bytes escaped. */
static void put_quoted(struct out *o, const char *s)
{
	put(o, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			put(o, "\\%c", c);
		else if (c < 32 || c == 127)
			put(o, "\\%03u", c);
		else
			put(o, "%c", c);
	}
	put(o, "\"");
}

/* A table key as Lua reads it back: name = , [3] = , or ["odd key"] = . */
static void put_key(struct out *o, const char *k)
{
	int ident = (*k == '_' || (*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z'));
	for (const char *p = k; ident && *p; p++)
		ident = *p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
	int integer = *k >= '1' && *k <= '9';
	for (const char *p = k + 1; integer && *p; p++)
		integer = *p >= '0' && *p <= '9';
	if (ident)
		put(o, "%s = ", k);
	else if (integer)
		put(o, "[%s] = ", k);
	else {
		put(o, "[");
		put_quoted(o, k);
		put(o, "] = ");
	}
}

static void format_value(struct out *o, const gf_value *v)
{
	switch (v->type) {
	case GF_VNIL: put(o, "nil"); break;
	case GF_VBOOL: put(o, "%s", v->u.b ? "true" : "false"); break;
	case GF_VINT: put(o, "%" PRId64, v->u.i); break;
	case GF_VNUM: {
		char num[32];
		snprintf(num, sizeof(num), "%.15g", v->u.n);
		if (strtod(num, NULL) != v->u.n)
			snprintf(num, sizeof(num), "%.17g", v->u.n);
		put(o, "%s%s", num, strpbrk(num, ".eEn") ? "" : ".0");
		break;
	}
	case GF_VSTR: put_quoted(o, v->u.s); break;
	case GF_VLIST:
	case GF_VMAP:
		put(o, "{");
		for (size_t i = 0; i < v->u.c.len; i++) {
			if (i)
				put(o, ", ");
			if (v->type == GF_VMAP)
				put_key(o, v->u.c.keys[i]);
			format_value(o, &v->u.c.items[i]);
		}
		put(o, "}");
		break;
	}
}

int gf_value_format(const gf_value *v, char *buf, size_t size)
{
	struct out o = { buf, size, 0 };
	if (size)
		buf[0] = '\0';
	format_value(&o, v ? v : &(gf_value){ .type = GF_VNIL });
	if (o.len < size)
		return 0;
	/* cut: mark it, so a shortened value never reads as a whole one */
	if (size)
		buf[size - 1] = '\0';
	if (size >= 4)
		memcpy(buf + size - 4, "...", 3);
	return -ENOSPC;
}
