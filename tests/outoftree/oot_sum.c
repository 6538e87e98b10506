/* oot_sum: a stage built outside the ganflow tree, the way a user would:
 *
 *   cc -shared -fPIC -fvisibility=hidden -o oot_sum.so oot_sum.c \
 *      $(pkg-config --cflags --libs ganflow)
 *
 * It reads "items" messages and, at the end of the data, writes
 * "count=N sum=S sumsq=Q scale=X" (S, Q: sums of key and key^2, times
 * `scale`) to the file named by its `out` parameter. The out-of-tree test
 * compares that line with the expected values. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <ganflow/params.h>
#include <ganflow/stage.h>

typedef struct oot_sum {
	const char *out;
	double scale;
	int64_t count;
	double sum, sumsq;
} oot_sum;

static const gf_port_desc inputs[] = { { "inp", "items", 0, "items to sum" } };

static const gf_param_desc params[] = {
	{ "out", GF_PARAM_STR, NULL, "file to write the sums to", NULL },
	{ "scale", GF_PARAM_NUM, "1", "factor applied to the sums", "0.." },
};

static int create(gf_ctx *ctx, const gf_value *p, void **self)
{
	oot_sum *s = calloc(1, sizeof(*s));
	if (!s)
		return gf_fail(ctx, "out of memory");
	*self = s;
	s->out = gf_param_str(p, "out");
	s->scale = gf_param_num(p, "scale");
	return 0;
}

static int run(void *self, gf_ctx *ctx)
{
	oot_sum *s = self;
	for (;;) {
		gf_msg *m;
		int rc = gf_pop(ctx, 0, &m);
		if (rc == GF_EEOF)
			break;
		if (rc)
			return rc;
		double k = (double)m->key;
		s->count++;
		s->sum += k;
		s->sumsq += k * k;
		gf_msg_release(m);
	}
	FILE *f = fopen(s->out, "w");
	if (!f)
		return gf_fail(ctx, "cannot write %s", s->out);
	fprintf(f, "count=%lld sum=%.0f sumsq=%.0f scale=%g\n", (long long)s->count, s->sum * s->scale,
	        s->sumsq * s->scale, s->scale);
	fclose(f);
	return 0;
}

static void destroy(void *self)
{
	free(self);
}

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "oot_sum",
	.doc = "sums the keys of items into a file (a stage built out of tree)",
	.inputs = inputs,
	.ninputs = 1,
	.params = params,
	.nparams = 2,
	.create = create,
	.run = run,
	.destroy = destroy,
};
