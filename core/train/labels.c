/* Labels of generated batches: a per-class pair's fixed class, or classes
 * drawn uniformly or following a dataset's class histogram, each
 * data-parallel rank drawing its slice of one world-sized draw. See
 * <ganflow/train.h>. */
#include <errno.h>
#include <stdlib.h>

#include <ganflow/dist.h>
#include <ganflow/err.h>
#include <ganflow/dataset.h>
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
