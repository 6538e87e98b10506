/* The arguments of a pipeline run and their rules: see args.h. Part of
 * core/lua (the layer that runs pipeline scripts); uses only base. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/log.h>
#include <ganflow/params.h>

#include "args.h"

int gf_args_parse(gf_args *out, int argc, char *const *argv, char *err, size_t errsize)
{
	memset(out, 0, sizeof(*out));
	out->a = calloc((size_t)argc + 1, sizeof(*out->a));
	if (!out->a)
		return -ENOMEM;
	for (int i = 0; i < argc; i++) {
		const char *eq = strchr(argv[i], '=');
		if (!eq || eq == argv[i]) {
			snprintf(err, errsize, "argument '%s' is not of the form key=value", argv[i]);
			return GF_EPARAM;
		}
		char *key = strndup(argv[i], (size_t)(eq - argv[i]));
		char *val = strdup(eq + 1);
		if (!key || !val) {
			free(key);
			free(val);
			return -ENOMEM;
		}
		gf_run_arg *dup = gf_args_find(out, key);
		if (dup) { /* the last one wins, as on most command lines */
			free(dup->val);
			dup->val = val;
			free(key);
			continue;
		}
		out->a[out->n++] = (gf_run_arg){ key, val, 0, 0 };
	}
	return 0;
}

void gf_args_free(gf_args *a)
{
	for (int i = 0; i < a->n; i++) {
		free(a->a[i].key);
		free(a->a[i].val);
	}
	free(a->a);
	for (int i = 0; i < a->nasked; i++)
		free(a->asked[i]);
	memset(a, 0, sizeof(*a));
}

gf_run_arg *gf_args_find(gf_args *a, const char *key)
{
	for (int i = 0; i < a->n; i++)
		if (strcmp(a->a[i].key, key) == 0)
			return &a->a[i];
	return NULL;
}

const char *gf_args_use(gf_args *a, const char *key, int remember)
{
	gf_run_arg *e = gf_args_find(a, key);
	if (e) {
		e->used = 1;
		e->by_arg |= remember;
		return e->val;
	}
	/* remembered to suggest it for a mistyped command-line key */
	if (remember && a->nasked < (int)(sizeof(a->asked) / sizeof(a->asked[0]))) {
		int seen = 0;
		for (int i = 0; i < a->nasked && !seen; i++)
			seen = !strcmp(a->asked[i], key);
		char *k = seen ? NULL : strdup(key);
		if (k)
			a->asked[a->nasked++] = k;
	}
	return NULL;
}

int gf_args_add(gf_args *a, char *key, char *val)
{
	gf_run_arg *grown = realloc(a->a, (size_t)(a->n + 2) * sizeof(*grown));
	if (!grown) {
		free(key);
		free(val);
		return -ENOMEM;
	}
	a->a = grown;
	a->a[a->n++] = (gf_run_arg){ key, val, 0, 0 };
	a->a[a->n] = (gf_run_arg){ 0 };
	return 0;
}

int gf_args_check_used(const gf_args *a, const char *const *known, size_t nknown, char *err, size_t errsize)
{
	/* a command-line key that neither the script read nor gf.run knows is
	 * a typo: refuse it before anything runs, as script keys are */
	for (int i = 0; i < a->n; i++) {
		const char *key = a->a[i].key;
		if (a->a[i].used)
			continue;
		const char *best = gf_closest(key, known, nknown);
		const char *alt = a->nasked ? gf_closest(key, (const char *const *)a->asked, (size_t)a->nasked) : NULL;
		if (alt && (!best || gf_edit_distance(alt, key) < gf_edit_distance(best, key)))
			best = alt;
		if (best && gf_edit_distance(best, key) > 2)
			best = NULL;
		snprintf(err, errsize,
		         "argument '%s' (command line) is used by the pipeline neither as a gf.run option nor through gf.arg%s%s%s",
		         key, best ? "; did you mean '" : "", best ? best : "", best ? "'?" : "");
		return GF_EPARAM;
	}
	return 0;
}

int gf_args_check_option(const char *what, const char *key, const char *const *known, size_t nknown, char *err,
                         size_t errsize)
{
	for (size_t i = 0; i < nknown; i++)
		if (strcmp(key, known[i]) == 0)
			return 0;
	const char *best = gf_closest(key, known, nknown);
	snprintf(err, errsize, "%s: unknown option '%s'; did you mean '%s'?", what, key, best ? best : "?");
	return GF_EPARAM;
}

void gf_args_warn_unused(const gf_args *a, const char *const *known, size_t nknown)
{
	for (int i = 0; i < a->n; i++) {
		const char *key = a->a[i].key;
		if (a->a[i].used)
			continue;
		const char *best = gf_closest(key, known, nknown);
		int near = best && gf_edit_distance(best, key) <= 2;
		gf_log(GF_LOG_WARN, "argument '%s' was not used by the pipeline (neither a gf.run option nor read with gf.arg)%s%s%s",
		       key, near ? "; did you mean '" : "", near ? best : "", near ? "'?" : "");
	}
}

int gf_args_parse_bool(const char *s, int *out)
{
	if (!strcmp(s, "true") || !strcmp(s, "1") || !strcmp(s, "yes") || !strcmp(s, "on"))
		*out = 1;
	else if (!strcmp(s, "false") || !strcmp(s, "0") || !strcmp(s, "no") || !strcmp(s, "off"))
		*out = 0;
	else
		return -1;
	return 0;
}

/* ---- where a value came from ---- */

/* 1 when the command-line text s denotes v (as gf.arg converts it). */
static int same_value(const char *s, const gf_value *v)
{
	char *end;
	double d;
	int b;
	switch (v->type) {
	case GF_VINT:
	case GF_VNUM:
		d = strtod(s, &end);
		return end != s && !*end && d == (v->type == GF_VINT ? (double)v->u.i : v->u.n);
	case GF_VBOOL: return !gf_args_parse_bool(s, &b) && b == v->u.b;
	case GF_VSTR: return !strcmp(s, v->u.s);
	default: return 0;
	}
}

int gf_args_source(const gf_args *a, const char *param, const gf_value *v, char *out, size_t size)
{
	int n = 0;
	out[0] = '\0';
	for (int i = 0; v && i < a->n; i++) {
		const gf_run_arg *e = &a->a[i];
		if (!e->by_arg || !strcmp(e->key, param) || !same_value(e->val, v))
			continue;
		size_t len = strlen(out);
		snprintf(out + len, size - len, "%s%s=%s", n ? " or " : "", e->key, e->val);
		n++;
	}
	return n;
}

int gf_args_explain(char *msg, size_t size, const char *param, const char *given)
{
	char quoted[160], plain[160];
	snprintf(quoted, sizeof(quoted), "parameter '%s'", param);
	snprintf(plain, sizeof(plain), "(parameter %s)", param);
	if (!given[0] || (!strstr(msg, quoted) && !strstr(msg, plain)))
		return 0;
	size_t len = strlen(msg);
	snprintf(msg + len, size - len, ": the pipeline passes the command line's %s as %s", given, param);
	return 1;
}
