/* Checking stage parameters against their declarations. See <ganflow/params.h>.
 *
 * This lives in C, not in lua.c, so every way of building a graph (a Lua
 * pipeline, the C graph API of tests and benchmarks) gets the same checks
 * and the same messages.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/log.h>
#include <ganflow/params.h>

const char *gf_param_type_name(gf_param_type t)
{
	switch (t) {
	case GF_PARAM_INT: return "integer";
	case GF_PARAM_NUM: return "number";
	case GF_PARAM_BOOL: return "boolean";
	case GF_PARAM_STR: return "string";
	case GF_PARAM_LIST: return "list";
	case GF_PARAM_TABLE: return "table";
	case GF_PARAM_ANY: return "any";
	}
	return "?";
}

/* ---- suggestions ---- */

size_t gf_edit_distance(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);
	if (n > 255 || m > 255)
		return n > m ? n : m;
	/* three rolling rows: i-2, i-1, i */
	size_t rows[3][256];
	for (size_t j = 0; j <= m; j++)
		rows[0][j] = j;
	for (size_t i = 1; i <= n; i++) {
		size_t *cur = rows[i % 3], *prev = rows[(i - 1) % 3], *prev2 = rows[(i + 1) % 3];
		cur[0] = i;
		for (size_t j = 1; j <= m; j++) {
			size_t cost = a[i - 1] != b[j - 1];
			size_t best = prev[j] + 1;
			if (cur[j - 1] + 1 < best)
				best = cur[j - 1] + 1;
			if (prev[j - 1] + cost < best)
				best = prev[j - 1] + cost;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < best)
				best = prev2[j - 2] + 1;
			cur[j] = best;
		}
	}
	return rows[n % 3][m];
}

const char *gf_closest(const char *word, const char *const *cands, size_t n)
{
	const char *best = NULL;
	size_t best_d = (size_t)-1;
	for (size_t i = 0; i < n; i++) {
		size_t d = gf_edit_distance(word, cands[i]);
		if (d < best_d) {
			best_d = d;
			best = cands[i];
		}
	}
	return best;
}

/* ---- defaults ---- */

int gf_param_default(const gf_param_desc *p, gf_value *out, char *err, size_t errsize)
{
	*out = gf_value_nil();
	if (!p->def)
		return GF_ENOTFOUND;
	if (strcmp(p->def, "nil") == 0)
		return 0;
	char *end = NULL;
	switch (p->type) {
	case GF_PARAM_INT: {
		errno = 0;
		long long v = strtoll(p->def, &end, 0);
		if (errno || end == p->def || *end)
			break;
		*out = gf_value_int(v);
		return 0;
	}
	case GF_PARAM_NUM: {
		errno = 0;
		double v = strtod(p->def, &end);
		if (errno || end == p->def || *end)
			break;
		*out = gf_value_num(v);
		return 0;
	}
	case GF_PARAM_BOOL:
		if (strcmp(p->def, "true") == 0 || strcmp(p->def, "false") == 0) {
			*out = gf_value_bool(p->def[0] == 't');
			return 0;
		}
		break;
	case GF_PARAM_STR:
		*out = gf_value_str(p->def);
		return out->type == GF_VSTR ? 0 : -ENOMEM;
	case GF_PARAM_LIST:
	case GF_PARAM_TABLE:
	case GF_PARAM_ANY:
		break;
	}
	snprintf(err, errsize, "parameter '%s': default \"%s\" is not a valid %s%s", p->name, p->def,
	         gf_param_type_name(p->type),
	         p->type >= GF_PARAM_LIST ? " default (only NULL or \"nil\" are allowed)" : "");
	return GF_EPARAM;
}

/* ---- allowed ranges and choices ----
 *
 * `allowed` is text in the descriptor ("1..1048576", "0..", "sync|async")
 * so that it reads like the docs `ganflow stages` prints from it; it is
 * parsed here each time it is needed, which is once per stage instance. */

typedef struct range {
	int has_lo, has_hi;
	double lo, hi;
} range;

/* Parses the bound s[0..n) as a number of p's type into *out. */
static int parse_bound(const gf_param_desc *p, const char *s, size_t n, double *out)
{
	char buf[64];
	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	char *end = NULL;
	errno = 0;
	if (p->type == GF_PARAM_INT)
		*out = (double)strtoll(buf, &end, 0);
	else
		*out = strtod(buf, &end);
	return errno || end == buf || *end ? -1 : 0;
}

static int parse_range(const gf_param_desc *p, range *r)
{
	const char *dots = strstr(p->allowed, "..");
	if (!dots)
		return -1;
	size_t nlo = (size_t)(dots - p->allowed), nhi = strlen(dots + 2);
	r->has_lo = nlo > 0;
	r->has_hi = nhi > 0;
	if ((!r->has_lo && !r->has_hi) || (r->has_lo && parse_bound(p, p->allowed, nlo, &r->lo)) ||
	    (r->has_hi && parse_bound(p, dots + 2, nhi, &r->hi)))
		return -1;
	return r->has_lo && r->has_hi && r->lo > r->hi ? -1 : 0;
}

static int in_range(const range *r, double x)
{
	return (!r->has_lo || x >= r->lo) && (!r->has_hi || x <= r->hi);
}

/* The i-th choice of "a|b|c" into buf; returns 0, or -1 past the last. */
static int choice(const char *allowed, int i, char *buf, size_t size)
{
	const char *s = allowed;
	for (; i > 0; i--) {
		s = strchr(s, '|');
		if (!s)
			return -1;
		s++;
	}
	size_t n = strcspn(s, "|");
	snprintf(buf, size, "%.*s", (int)n, s);
	return 0;
}

static int is_choice(const char *allowed, const char *v)
{
	char c[128];
	for (int i = 0; choice(allowed, i, c, sizeof(c)) == 0; i++)
		if (strcmp(c, v) == 0)
			return 1;
	return 0;
}

int gf_param_check_desc(const gf_param_desc *p, char *err, size_t errsize)
{
	gf_value v;
	int rc = gf_param_default(p, &v, err, errsize);
	if (rc == GF_ENOTFOUND)
		rc = 0;
	if (rc || !p->allowed) {
		gf_value_free(&v);
		return rc;
	}
	range r;
	int bad = 0;
	switch (p->type) {
	case GF_PARAM_INT:
	case GF_PARAM_NUM:
		if (parse_range(p, &r))
			bad = snprintf(err, errsize, "parameter '%s': allowed \"%s\" is not a range lo..hi of %ss", p->name,
			               p->allowed, gf_param_type_name(p->type));
		else if (v.type != GF_VNIL && !in_range(&r, p->type == GF_PARAM_INT ? (double)v.u.i : v.u.n))
			bad = snprintf(err, errsize, "parameter '%s': default %s lies outside its range %s", p->name, p->def,
			               p->allowed);
		break;
	case GF_PARAM_STR: {
		char c[128];
		for (int i = 0; !bad && choice(p->allowed, i, c, sizeof(c)) == 0; i++)
			if (!c[0])
				bad = snprintf(err, errsize, "parameter '%s': allowed \"%s\" has an empty choice", p->name,
				               p->allowed);
		if (!bad && v.type == GF_VSTR && !is_choice(p->allowed, v.u.s))
			bad = snprintf(err, errsize, "parameter '%s': default \"%s\" is not one of %s", p->name, p->def,
			               p->allowed);
		break;
	}
	default:
		bad = snprintf(err, errsize, "parameter '%s': a %s parameter cannot declare allowed values", p->name,
		               gf_param_type_name(p->type));
	}
	gf_value_free(&v);
	return bad ? GF_EPARAM : 0;
}

/* Checks a converted value against p->allowed (already validated by
 * gf_param_check_desc when the stage was loaded). */
static int check_allowed(const gf_stage_desc *d, const char *instance, const gf_param_desc *p, const gf_value *v,
                         char *err, size_t errsize)
{
	if (!p->allowed || v->type == GF_VNIL)
		return 0;
	if (p->type == GF_PARAM_INT || p->type == GF_PARAM_NUM) {
		range r;
		double x = p->type == GF_PARAM_INT ? (double)v->u.i : v->u.n;
		if (parse_range(p, &r) == 0 && in_range(&r, x))
			return 0;
		char shown[64];
		if (p->type == GF_PARAM_INT)
			snprintf(shown, sizeof(shown), "%lld", (long long)v->u.i);
		else
			snprintf(shown, sizeof(shown), "%g", v->u.n);
		snprintf(err, errsize, "stage '%s' (%s): parameter '%s' is %s, outside its range %s", instance, d->name,
		         p->name, shown, p->allowed);
		return GF_EPARAM;
	}
	if (p->type != GF_PARAM_STR || is_choice(p->allowed, v->u.s))
		return 0;
	const char *names[32];
	char store[32][128];
	size_t n = 0;
	while (n < 32 && choice(p->allowed, (int)n, store[n], sizeof(store[n])) == 0) {
		names[n] = store[n];
		n++;
	}
	const char *best = gf_closest(v->u.s, names, n);
	int near = best && gf_edit_distance(v->u.s, best) <= 3;
	snprintf(err, errsize, "stage '%s' (%s): parameter '%s' is \"%s\", not one of %s%s%s%s", instance, d->name,
	         p->name, v->u.s, p->allowed, near ? "; did you mean '" : "", near ? best : "", near ? "'?" : "");
	return GF_EPARAM;
}

/* ---- reading checked parameters ---- */

const gf_value *gf_param(const gf_value *params, const char *key)
{
	const gf_value *v = gf_value_get(params, key);
	if (!v) {
		gf_log(GF_LOG_ERROR, "stage bug: reads parameter '%s', which its descriptor does not declare", key);
		return NULL;
	}
	return v->type == GF_VNIL ? NULL : v;
}

int64_t gf_param_int(const gf_value *params, const char *key)
{
	return gf_value_as_int(gf_param(params, key), 0, NULL);
}

double gf_param_num(const gf_value *params, const char *key)
{
	return gf_value_as_num(gf_param(params, key), 0, NULL);
}

int gf_param_bool(const gf_value *params, const char *key)
{
	return gf_value_as_bool(gf_param(params, key), 0, NULL);
}

const char *gf_param_str(const gf_value *params, const char *key)
{
	return gf_value_as_str(gf_param(params, key), NULL, NULL);
}

int gf_param_given(const gf_value *params, const char *key)
{
	return gf_param(params, key) != NULL;
}

/* ---- checking ---- */

static const gf_param_desc *find_param(const gf_stage_desc *d, const char *name)
{
	for (uint32_t i = 0; i < d->nparams; i++)
		if (strcmp(d->params[i].name, name) == 0)
			return &d->params[i];
	return NULL;
}

static void unknown_key(const gf_stage_desc *d, const char *instance, const char *key, char *err, size_t errsize)
{
	const char *names[64];
	size_t n = d->nparams < 64 ? d->nparams : 64;
	char list[512];
	size_t len = 0;
	list[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		names[i] = d->params[i].name;
		if (len < sizeof(list))
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", names[i]);
	}
	const char *best = gf_closest(key, names, n);
	if (best)
		snprintf(err, errsize, "stage '%s' (%s): unknown parameter '%s'; did you mean '%s'? (parameters: %s)",
		         instance, d->name, key, best, list);
	else
		snprintf(err, errsize, "stage '%s' (%s): unknown parameter '%s' (the stage takes no parameters)",
		         instance, d->name, key);
}

static int wrong_type(const gf_stage_desc *d, const char *instance, const gf_param_desc *p, const gf_value *v,
                      char *err, size_t errsize)
{
	char shown[64];
	/* -ENOSPC is fine here: a cut value ends in "...", enough to show it */
	(void)gf_value_format(v, shown, sizeof(shown));
	const char *article = p->type == GF_PARAM_INT ? "an" : "a";
	snprintf(err, errsize, "stage '%s' (%s): parameter '%s' must be %s %s, got %s %s", instance, d->name,
	         p->name, article, gf_param_type_name(p->type), gf_vtype_name(v->type), shown);
	return GF_EPARAM;
}

/* Converts v (given for p) into *out, or reports a type error. */
static int convert(const gf_stage_desc *d, const char *instance, const gf_param_desc *p, const gf_value *v,
                   gf_value *out, char *err, size_t errsize)
{
	*out = gf_value_nil();
	switch (p->type) {
	case GF_PARAM_INT:
		if (v->type == GF_VINT) {
			*out = *v;
			return 0;
		}
		if (v->type == GF_VNUM && isfinite(v->u.n) && v->u.n == floor(v->u.n) && fabs(v->u.n) < 9.2e18) {
			*out = gf_value_int((int64_t)v->u.n);
			return 0;
		}
		break;
	case GF_PARAM_NUM:
		if (v->type == GF_VNUM) {
			*out = *v;
			return 0;
		}
		if (v->type == GF_VINT) {
			*out = gf_value_num((double)v->u.i);
			return 0;
		}
		break;
	case GF_PARAM_BOOL:
		if (v->type == GF_VBOOL) {
			*out = *v;
			return 0;
		}
		break;
	case GF_PARAM_STR:
		if (v->type == GF_VSTR)
			return gf_value_copy(out, v);
		break;
	case GF_PARAM_LIST:
		if (v->type == GF_VLIST)
			return gf_value_copy(out, v);
		break;
	case GF_PARAM_TABLE:
		if (v->type == GF_VLIST || v->type == GF_VMAP)
			return gf_value_copy(out, v);
		break;
	case GF_PARAM_ANY:
		return gf_value_copy(out, v);
	}
	return wrong_type(d, instance, p, v, err, errsize);
}

int gf_params_check(const gf_stage_desc *d, const char *instance, const gf_value *given, gf_value *out,
                    char *err, size_t errsize)
{
	*out = gf_value_nil();
	if (given && given->type != GF_VNIL && given->type != GF_VMAP &&
	    !(given->type == GF_VLIST && given->u.c.len == 0)) {
		snprintf(err, errsize, "stage '%s' (%s): parameters must be a table of name = value, got a %s",
		         instance, d->name, gf_vtype_name(given->type));
		return GF_EPARAM;
	}
	/* Unknown keys first: a typo is the likeliest mistake and the most
	 * useful message. */
	size_t ngiven = given && given->type == GF_VMAP ? given->u.c.len : 0;
	for (size_t i = 0; i < ngiven; i++) {
		if (!find_param(d, given->u.c.keys[i])) {
			unknown_key(d, instance, given->u.c.keys[i], err, errsize);
			return GF_EPARAM;
		}
	}
	gf_value map = gf_value_map();
	int rc = 0;
	for (uint32_t i = 0; i < d->nparams; i++) {
		const gf_param_desc *p = &d->params[i];
		const gf_value *v = ngiven ? gf_value_get(given, p->name) : NULL;
		gf_value val;
		if (v && v->type != GF_VNIL) {
			rc = convert(d, instance, p, v, &val, err, errsize);
			if (rc == 0 && (rc = check_allowed(d, instance, p, &val, err, errsize)))
				gf_value_free(&val);
		} else {
			char derr[256];
			rc = gf_param_default(p, &val, derr, sizeof(derr));
			if (rc == GF_ENOTFOUND) {
				snprintf(err, errsize, "stage '%s' (%s): missing required parameter '%s'%s%s%s", instance,
				         d->name, p->name, p->doc ? " (" : "", p->doc ? p->doc : "", p->doc ? ")" : "");
				rc = GF_EPARAM;
			} else if (rc) {
				snprintf(err, errsize, "stage '%s' (%s): %s", instance, d->name, derr);
			}
		}
		if (rc == 0)
			rc = gf_value_set(&map, p->name, val);
		if (rc) {
			if (rc == -ENOMEM)
				snprintf(err, errsize, "stage '%s' (%s): out of memory", instance, d->name);
			goto fail;
		}
	}
	*out = map;
	return 0;
fail:
	gf_value_free(&map);
	return rc == -ENOMEM ? rc : GF_EPARAM;
}
