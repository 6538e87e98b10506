/* collect: a runtime test stage with a multi-edge input that takes anything.
 *
 * Its input is GF_PORT_MULTI with kind "any": several producers of any
 * message kind may feed it, and it pops from whichever has a message. It
 * counts the messages, sums their keys and the "items" scalar of metrics
 * messages (count_source's end-of-run stats), and publishes the figures as
 * "collect_items", "collect_sum" and "collect_stats" (gf_report_value) when
 * its input ends. Optionally fails if the count differs from `expect`.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/params.h>
#include <ganflow/stage.h>

typedef struct collect {
	int64_t expect;
	int64_t count, sum;
	double stats;
} collect;

static const gf_port_desc inputs[] = {
	{ "inp", "any", GF_PORT_MULTI, "messages of any kind from any number of producers" },
};

static const gf_param_desc params[] = {
	{ "expect", GF_PARAM_INT, "-1", "number of messages expected (-1: any)", "-1.." },
};

static int create(gf_ctx *ctx, const gf_value *p, void **self)
{
	collect *c = calloc(1, sizeof(*c));
	if (!c)
		return gf_fail(ctx, "out of memory");
	c->expect = gf_param_int(p, "expect");
	*self = c;
	return 0;
}

static int run(void *self, gf_ctx *ctx)
{
	collect *c = self;
	for (;;) {
		gf_msg *m;
		int rc = gf_pop(ctx, 0, &m);
		if (rc == GF_EEOF)
			break;
		if (rc)
			return rc;
		c->count++;
		c->sum += (int64_t)m->key;
		c->stats += gf_msg_scalar(m, "items", 0.0);
		gf_msg_release(m);
	}
	gf_report_value(ctx, "collect_items", (double)c->count);
	gf_report_value(ctx, "collect_sum", (double)c->sum);
	gf_report_value(ctx, "collect_stats", c->stats);
	if (c->expect >= 0 && c->count != c->expect)
		return gf_fail(ctx, "expected %" PRId64 " messages, got %" PRId64, c->expect, c->count);
	return 0;
}

static void destroy(void *self)
{
	free(self);
}

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "collect",
	.doc = "counts messages of any kind from several producers (runtime test stage)",
	.inputs = inputs,
	.ninputs = 1,
	.params = params,
	.nparams = 1,
	.create = create,
	.run = run,
	.destroy = destroy,
};
