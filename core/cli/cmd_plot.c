/* `ganflow plot RUN_DIR [out=PATH]`: draws a run's curves from its
 * metrics.jsonl into a PNG (default RUN_DIR/plot.png).
 *
 * Every numeric top-level field of the JSONL lines becomes a series over
 * "step"; series are grouped into panels: losses (loss*), discriminator
 * outputs (d_real, d_fake), throughput (images_per_s) and evaluation
 * figures (fid, is, kid, ...). Nested objects (edge tables) are skipped. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/plot.h>

#include "cmd.h"

#define MAX_FIELDS 64

typedef struct field {
	char name[48];
	double *y;     /* (cap) values, NaN where a line lacks the field */
} field;

typedef struct table {
	int n, cap, nfields;
	double *step;  /* (cap) */
	field f[MAX_FIELDS];
} table;

/* ---- a minimal JSON reader for flat records ---- */

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++;
	return p;
}

/* Skips one JSON value; returns the character after it, or NULL. */
static const char *skip_value(const char *p, int depth)
{
	p = skip_ws(p);
	if (depth > 32)
		return NULL;
	if (*p == '"') {
		for (p++; *p && *p != '"'; p++)
			if (*p == '\\' && p[1])
				p++;
		return *p ? p + 1 : NULL;
	}
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		p = skip_ws(p + 1);
		if (*p == close)
			return p + 1;
		for (;;) {
			if (close == '}') {
				p = skip_value(p, depth + 1); /* key */
				if (!p || *(p = skip_ws(p)) != ':')
					return NULL;
				p++;
			}
			p = skip_value(p, depth + 1);
			if (!p)
				return NULL;
			p = skip_ws(p);
			if (*p == ',') {
				p++;
				continue;
			}
			return *p == close ? p + 1 : NULL;
		}
	}
	const char *s = p;
	while (*p && !strchr(",}] \t\r\n", *p))
		p++;
	return p > s ? p : NULL;
}

static field *get_field(table *t, const char *name)
{
	for (int i = 0; i < t->nfields; i++)
		if (!strcmp(t->f[i].name, name))
			return &t->f[i];
	if (t->nfields == MAX_FIELDS)
		return NULL;
	field *f = &t->f[t->nfields];
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->y = malloc((size_t)t->cap * sizeof(double));
	if (!f->y)
		return NULL;
	for (int i = 0; i < t->cap; i++)
		f->y[i] = NAN;
	t->nfields++;
	return f;
}

static int grow(table *t)
{
	if (t->n < t->cap)
		return 0;
	int cap = t->cap ? t->cap * 2 : 256;
	double *s = realloc(t->step, (size_t)cap * sizeof(double));
	if (!s)
		return -ENOMEM;
	t->step = s;
	for (int i = 0; i < t->nfields; i++) {
		double *y = realloc(t->f[i].y, (size_t)cap * sizeof(double));
		if (!y)
			return -ENOMEM;
		for (int j = t->cap; j < cap; j++)
			y[j] = NAN;
		t->f[i].y = y;
	}
	t->cap = cap;
	return 0;
}

/* Parses one line {"key": number, ...} into row t->n. Returns 1 when a row
 * with a step was added, 0 when the line is skipped, <0 on a bad line. */
static int parse_line(table *t, const char *p)
{
	p = skip_ws(p);
	if (!*p)
		return 0;
	if (*p != '{')
		return -1;
	if (grow(t))
		return -ENOMEM;
	int row = t->n, has_step = 0;
	p = skip_ws(p + 1);
	while (*p && *p != '}') {
		char key[48];
		if (*p != '"')
			return -1;
		const char *k = ++p;
		while (*p && *p != '"')
			p++;
		if (!*p)
			return -1;
		snprintf(key, sizeof(key), "%.*s", (int)(p - k), k);
		p = skip_ws(p + 1);
		if (*p != ':')
			return -1;
		p = skip_ws(p + 1);
		char *end;
		double v = strtod(p, &end);
		if (end != p && (*p == '-' || (*p >= '0' && *p <= '9'))) {
			p = end;
			if (!strcmp(key, "step")) {
				t->step[row] = v;
				has_step = 1;
			} else {
				field *f = get_field(t, key);
				if (f)
					f->y[row] = v;
			}
		} else if (!(p = skip_value(p, 0))) {
			return -1;
		}
		p = skip_ws(p);
		if (*p == ',')
			p = skip_ws(p + 1);
	}
	if (!has_step)
		return 0;
	t->n++;
	return 1;
}

/* Rows in step order (evaluation lines can arrive after later steps):
 * a stable insertion sort, the table being nearly sorted already. */
static void sort_by_step(table *t)
{
	for (int i = 1; i < t->n; i++) {
		for (int j = i; j > 0 && t->step[j - 1] > t->step[j]; j--) {
			double tmp = t->step[j];
			t->step[j] = t->step[j - 1];
			t->step[j - 1] = tmp;
			for (int k = 0; k < t->nfields; k++) {
				tmp = t->f[k].y[j];
				t->f[k].y[j] = t->f[k].y[j - 1];
				t->f[k].y[j - 1] = tmp;
			}
		}
	}
}

static void add_series(gf_plot_panel *p, const table *t, const field *f)
{
	if (p->nseries == GF_PLOT_MAX_SERIES)
		return;
	p->series[p->nseries++] = (gf_plot_series){ f->name, t->step, f->y, t->n };
}

static int group_of(const char *name)
{
	static const char *const evals[] = { "fid", "is", "is_std", "kid", "kid_std", "precision", "recall", NULL };
	if (!strncmp(name, "loss", 4))
		return 0;
	if (!strcmp(name, "d_real") || !strcmp(name, "d_fake"))
		return 1;
	if (!strcmp(name, "images_per_s"))
		return 2;
	for (int i = 0; evals[i]; i++)
		if (!strcmp(name, evals[i]))
			return 3;
	return -1;
}

int gf_cmd_plot(int argc, char **argv)
{
	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: ganflow plot RUN_DIR [out=PATH]\n"
		                "  draws the curves of RUN_DIR/metrics.jsonl into RUN_DIR/plot.png (or PATH)\n");
		return 2;
	}
	char in[4096], out[4096];
	snprintf(in, sizeof(in), "%s/metrics.jsonl", argv[1]);
	snprintf(out, sizeof(out), "%s/plot.png", argv[1]);
	for (int i = 2; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4)) {
			snprintf(out, sizeof(out), "%s", argv[i] + 4);
		} else {
			fprintf(stderr, "ganflow plot: unknown argument '%s' (expected out=PATH)\n", argv[i]);
			return 2;
		}
	}
	FILE *f = fopen(in, "r");
	if (!f) {
		fprintf(stderr, "ganflow plot: %s: %s\n", in, strerror(errno));
		return 1;
	}
	table t = { 0 };
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0, bad = 0, rc = 0;
	while (getline(&line, &cap, f) > 0) {
		lineno++;
		int r = parse_line(&t, line);
		if (r == -ENOMEM) {
			rc = 1;
			fprintf(stderr, "ganflow plot: out of memory\n");
			break;
		}
		if (r < 0 && bad++ < 3)
			fprintf(stderr, "ganflow plot: %s:%d: not a JSON object, skipped\n", in, lineno);
	}
	free(line);
	fclose(f);
	if (rc == 0)
		sort_by_step(&t);
	if (rc == 0 && t.n == 0) {
		fprintf(stderr, "ganflow plot: %s: no lines with a \"step\" field\n", in);
		rc = 1;
	}
	if (rc == 0) {
		static const char *const titles[] = { "losses", "discriminator outputs: mean D(x), mean D(G(z))",
		                                      "throughput: images/s", "evaluation" };
		gf_plot_panel all[4], panels[4];
		memset(all, 0, sizeof(all));
		for (int g = 0; g < 4; g++)
			all[g].title = titles[g], all[g].xlabel = "step";
		for (int i = 0; i < t.nfields; i++) {
			int g = group_of(t.f[i].name);
			if (g >= 0)
				add_series(&all[g], &t, &t.f[i]);
		}
		int np = 0;
		for (int g = 0; g < 4; g++)
			if (all[g].nseries)
				panels[np++] = all[g];
		if (np == 0) {
			fprintf(stderr, "ganflow plot: %s: no loss, D output, images/s or evaluation fields\n", in);
			rc = 1;
		} else if (gf_plot_png(out, panels, np, 1000, 320) != 0) {
			fprintf(stderr, "ganflow plot: %s\n", gf_errmsg());
			rc = 1;
		} else {
			printf("%s: %d points, %d panels\n", out, t.n, np);
		}
	}
	for (int i = 0; i < t.nfields; i++)
		free(t.f[i].y);
	free(t.step);
	return rc;
}
