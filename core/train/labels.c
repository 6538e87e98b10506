/* Labels of generated batches: a per-class pair's fixed class, or classes
 * drawn uniformly or following a dataset's class histogram, each
 * data-parallel rank drawing its slice of one world-sized draw; and the
 * classes the training data serves a conditional network. See
 * <ganflow/train.h>. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/dist.h>
#include <ganflow/err.h>
#include <ganflow/dataset.h>
#include <ganflow/params.h>
#include <ganflow/train.h>

struct gf_labels {
	int classes, cls, max;
	double *cdf;            /* (classes) cumulative histogram, NULL = uniform */
	float *u;               /* (max) uniforms */
};

/* Cumulative class histogram of dataset path into l->cdf. */
static int load_cdf(gf_labels *l, const char *path)
{
	gf_dataset *ds;
	int rc = gf_dataset_open(path, &ds);
	if (rc)
		return gf_seterr(rc, "cannot open dataset '%s': %s", path, gf_errmsg());
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	if ((int)m->nclasses != l->classes) {
		rc = gf_seterr(GF_EPARAM, "dataset '%s' has %u classes, the generator %d", path, m->nclasses, l->classes);
	} else if (!(l->cdf = calloc((size_t)l->classes, sizeof(double)))) {
		rc = -ENOMEM;
	} else {
		double total = 0, acc = 0;
		for (int c = 0; c < l->classes; c++)
			total += (double)m->class_count[c];
		for (int c = 0; c < l->classes; c++) {
			acc += (double)m->class_count[c] / (total > 0 ? total : 1);
			l->cdf[c] = acc;
		}
	}
	gf_dataset_close(ds);
	return rc;
}

int gf_labels_create(gf_labels **out, int classes, int cls, int max, const char *dataset)
{
	gf_labels *l = calloc(1, sizeof(*l));
	*out = l;
	if (!l || !(l->u = malloc((size_t)(max > 0 ? max : 1) * sizeof(float))))
		return -ENOMEM;
	l->classes = classes;
	l->cls = cls;
	l->max = max;
	return classes && dataset && dataset[0] ? load_cdf(l, dataset) : 0;
}

void gf_labels_destroy(gf_labels *l)
{
	if (!l)
		return;
	free(l->cdf);
	free(l->u);
	free(l);
}

void gf_labels_draw(gf_labels *l, gf_rng *r, int32_t *out, int n, int rank, int world)
{
	if (n > l->max)
		n = l->max;
	if (!l->classes) {
		for (int i = 0; i < n; i++)
			out[i] = l->cls;
		return;
	}
	if (world > 1) {
		gf_dist_uniform_slice(r, l->u, (size_t)n, rank, world);
	} else {
		/* in draws of 64, as the sequence has always been drawn */
		for (int i = 0; i < n; i += 64)
			gf_rng_uniform(r, l->u + i, (size_t)(n - i < 64 ? n - i : 64), 0.0f, 1.0f);
	}
	for (int j = 0; j < n; j++) {
		int c = (int)(l->u[j] * (float)l->classes);
		if (l->cdf) {
			c = 0;
			while (c < l->classes - 1 && (double)l->u[j] >= l->cdf[c])
				c++;
		}
		out[j] = c < l->classes ? c : l->classes - 1;
	}
}

/* ---- the classes the training data serves ---- */

char *gf_data_classes_format(const unsigned char *mask, int classes, char *out, size_t size)
{
	size_t len = 0;
	out[0] = '\0';
	for (int c = 0; c < classes; c++) {
		if (!mask[c])
			continue;
		int e = c;
		while (e + 1 < classes && mask[e + 1])
			e++;
		char item[48];
		int n = e == c ? snprintf(item, sizeof(item), "%s%d", len ? "," : "", c)
		        : snprintf(item, sizeof(item), "%s%d%s%d", len ? "," : "", c, e == c + 1 ? "," : "-", e);
		if (len + (size_t)n + 4 >= size) {
			snprintf(out + len, size - len, "%s", size - len > 3 ? "..." : "");
			return out;
		}
		memcpy(out + len, item, (size_t)n + 1);
		len += (size_t)n;
		c = e;
	}
	return out;
}

int gf_data_classes_parse(const char *text, int classes, unsigned char *mask)
{
	memset(mask, 0, (size_t)classes);
	const char *p = text;
	while (*p) {
		char *end;
		long a = strtol(p, &end, 10), b = a;
		if (end == p || a < 0)
			goto bad;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			if (end == p + 1 || b < a)
				goto bad;
			p = end;
		}
		if (b >= classes)
			goto bad;
		for (long c = a; c <= b; c++)
			mask[c] = 1;
		if (*p == ',')
			p++;
		else if (*p)
			goto bad;
	}
	return 0;
bad:
	return gf_seterr(GF_EPARAM, "data classes '%.80s': not ranges of classes below %d", text, classes);
}

int gf_data_classes(gf_ctx *ctx, int port, int classes, const char *what, char *out, size_t size)
{
	out[0] = '\0';
	const gf_value *rp = classes > 0 ? gf_port_upstream_params(ctx, port, "lmdb_reader") : NULL;
	/* classes chosen further down the path, or per rank: not the dataset's */
	if (!rp || gf_port_upstream(ctx, port, "label_shard") || gf_param_bool(rp, "class_shard"))
		return 0;
	const char *path = gf_param_str(rp, "path"), *fmt = gf_param_str(rp, "format");
	gf_dataset *ds;
	int rc = gf_dataset_open_as(path, !strcmp(fmt, "caffe") ? GF_FORMAT_CAFFE
	                                  : !strcmp(fmt, "ganflow") ? GF_FORMAT_GANFLOW : GF_FORMAT_AUTO, &ds);
	if (rc)
		return 0; /* the reader reports it */
	const gf_dataset_meta *m = gf_dataset_metadata(ds);
	uint32_t nd = m->nclasses;
	unsigned char *has = calloc((size_t)classes + nd + 1, 1), *beyond = has ? has + classes : NULL;
	if (!has) {
		gf_dataset_close(ds);
		return gf_fail(ctx, "out of memory");
	}
	const gf_value *filter = gf_param(rp, "classes");
	for (uint32_t c = 0; c < nd; c++) {
		int keep = m->class_count[c] > 0;
		if (keep && filter) {
			keep = 0;
			for (size_t i = 0; i < gf_value_len(filter) && !keep; i++)
				keep = gf_value_as_int(gf_value_at(filter, i), -1, NULL) == (int64_t)c;
		}
		if (keep && (int)c < classes)
			has[c] = 1;
		else if (keep)
			beyond[c] = 1;
	}
	char list[256], missing[256], present[256];
	rc = 0;
	if (nd == 0) {
		rc = gf_fail(ctx, "the training data '%s' is unlabelled, %s is conditional on %d classes: give labelled data "
		                  "or an unconditional %s", path, what, classes, what);
	} else if (gf_data_classes_format(beyond, (int)nd, list, sizeof(list))[0]) {
		rc = gf_fail(ctx, "the training data '%s' holds images of classes %s, beyond the %d classes (0-%d) %s is "
		                  "conditional on: give data of at most %d classes, or the reader a `classes` filter",
		             path, list, classes, classes - 1, what, classes);
	} else {
		int n = 0;
		for (int c = 0; c < classes; c++)
			n += has[c];
		gf_data_classes_format(has, classes, out, size);
		if (strstr(out, "..."))
			out[0] = '\0'; /* too many ranges to record: unknown */
		if (n < classes && gf_ctx_run(ctx)->rank == 0) {
			gf_data_classes_format(has, classes, present, sizeof(present));
			for (int c = 0; c < classes; c++)
				has[c] = !has[c];
			gf_data_classes_format(has, classes, missing, sizeof(missing));
			gf_warn(ctx, "%s is conditional on %d classes, the training data '%s' holds images of %d of them: %s "
			             "(none of %s): what G makes of those labels matches no real image; `ganflow sample` and "
			             "`ganflow eval` leave them out",
			        what, classes, path, n, n ? present : "none", missing);
		}
	}
	free(has);
	gf_dataset_close(ds);
	return rc;
}
