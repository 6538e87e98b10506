/* count_source: a runtime test stage that emits numbered items.
 *
 * Item i (0-based) carries key = start + i and step = i + 1, and, when
 * width > 0, an f32 tensor (width) whose every element is the key, so a
 * sink can check order, completeness and contents. It stops after n items
 * (n = 0: until the graph stops), optionally paced at `rate` items/s. Its
 * flush hook pushes one "metrics" message on the optional `stats` output
 * (scalar "items" = number emitted): the graph tests use it to see that
 * flush runs after a graceful stop. Used by the runtime tests, benchmarks
 * and the demo pipeline; not installed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <ganflow/log.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>

enum { OUT_ITEMS, OUT_STATS };

typedef struct count_source {
	int64_t n, start, width, fail_at;
	double rate;
	int ignore_stop;
	int64_t emitted;
} count_source;

static const gf_port_desc outputs[] = {
	{ "out", "items", 0, "numbered items: key = start + i, step = i + 1" },
	{ "stats", "metrics", GF_PORT_OPTIONAL, "one message at the end: scalar \"items\" = number emitted" },
};

static const gf_param_desc params[] = {
	{ "n", GF_PARAM_INT, "1000", "number of items (0: until the graph stops)", "0.." },
	{ "start", GF_PARAM_INT, "0", "key of the first item", NULL },
	{ "rate", GF_PARAM_NUM, "0", "items per second (0: as fast as the graph takes them)", "0.." },
	{ "width", GF_PARAM_INT, "0", "f32 elements per item, each equal to the key (0: no tensor)", "0..16777216" },
	{ "fail_at", GF_PARAM_INT, "-1", "fail when about to emit this key (-1: never)", NULL },
	{ "ignore_stop", GF_PARAM_BOOL, "false", "keep emitting after a graceful stop (tests the grace period)", NULL },
};

static int create(gf_ctx *ctx, const gf_value *p, void **self)
{
	count_source *s = calloc(1, sizeof(*s));
	if (!s)
		return gf_fail(ctx, "out of memory");
	*self = s; /* destroy() frees it, also when create fails below */
	s->n = gf_param_int(p, "n");
	s->start = gf_param_int(p, "start");
	s->rate = gf_param_num(p, "rate");
	s->width = gf_param_int(p, "width");
	s->fail_at = gf_param_int(p, "fail_at");
	s->ignore_stop = gf_param_bool(p, "ignore_stop");
	return 0;
}

static void pace(double t0, int64_t i, double rate)
{
	double due = t0 + (double)i / rate;
	double now = gf_now();
	if (due <= now)
		return;
	struct timespec ts = { (time_t)(due - now), (long)(((due - now) - (double)(time_t)(due - now)) * 1e9) };
	nanosleep(&ts, NULL);
}

static int run(void *self, gf_ctx *ctx)
{
	count_source *s = self;
	double t0 = gf_now();
	for (int64_t i = 0; s->n == 0 || i < s->n; i++) {
		if (gf_should_stop(ctx) && !s->ignore_stop)
			break;
		int64_t key = s->start + i;
		if (key == s->fail_at)
			return gf_fail(ctx, "injected failure at item %lld", (long long)key);
		if (s->rate > 0)
			pace(t0, i, s->rate);
		gf_msg *m;
		int rc = gf_msg_get(ctx, OUT_ITEMS, &m);
		if (rc)
			return rc;
		m->key = (uint64_t)key;
		m->step = i + 1;
		if (s->width > 0) {
			int64_t shape[1] = { s->width };
			float *x = gf_msg_tensor(m, 0, GF_F32, 1, shape);
			if (!x) {
				gf_msg_release(m);
				return gf_fail(ctx, "out of memory for a %lld-element tensor", (long long)s->width);
			}
			for (int64_t j = 0; j < s->width; j++)
				x[j] = (float)key;
		}
		if ((rc = gf_push(ctx, OUT_ITEMS, m)))
			return rc;
		s->emitted++;
	}
	return 0;
}

static int flush(void *self, gf_ctx *ctx)
{
	count_source *s = self;
	gf_msg *m;
	int rc = gf_msg_get(ctx, OUT_STATS, &m);
	if (rc)
		return rc;
	gf_msg_set_scalar(m, "items", (double)s->emitted);
	m->step = s->emitted;
	return gf_push(ctx, OUT_STATS, m);
}

static void destroy(void *self)
{
	free(self);
}

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "count_source",
	.doc = "emits n numbered items (runtime test stage)",
	.outputs = outputs,
	.noutputs = 2,
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.create = create,
	.run = run,
	.flush = flush,
	.destroy = destroy,
};
