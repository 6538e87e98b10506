/* nan_batch (tests only): passes batches through, poisoning the images of
 * batch number `at` with NaN, to test the training stages' NaN guard, or
 * holding back every batch from number `stall_at` on (until the graph
 * stops), to test the stall watchdog's stop and the resume after it. */
#include <math.h>

#include <ganflow/params.h>
#include <ganflow/stage.h>

enum { IN_BATCH };
enum { OUT_BATCH };

typedef struct nb {
	int64_t at, stall_at, seen;
} nb;

static int nb_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	static nb s;
	(void)ctx;
	s.at = gf_param_int(p, "at");
	s.stall_at = gf_param_int(p, "stall_at");
	s.seen = 0;
	*self = &s;
	return 0;
}

static int nb_run(void *self, gf_ctx *ctx)
{
	nb *s = self;
	for (;;) {
		gf_msg *in, *out;
		int rc = gf_pop(ctx, IN_BATCH, &in);
		if (rc)
			return rc == GF_EEOF || rc == GF_ESTOP ? 0 : rc;
		if (s->stall_at >= 0 && s->seen >= s->stall_at) {
			gf_msg_release(in); /* swallowed: nothing reaches d any more */
			continue;
		}
		if ((rc = gf_msg_get(ctx, OUT_BATCH, &out))) {
			gf_msg_release(in);
			return rc;
		}
		for (int t = 0; t < in->ntensors; t++) {
			char *dst = gf_msg_tensor(out, t, in->t[t].dtype, in->t[t].ndim, in->t[t].shape);
			if (!dst) {
				gf_msg_release(in);
				gf_msg_release(out);
				return gf_fail(ctx, "out of memory");
			}
			const char *src = in->t[t].data;
			for (size_t i = 0; i < gf_tensor_bytes(&in->t[t]); i++)
				dst[i] = src[i];
		}
		if (s->seen++ == s->at) {
			float *x = out->t[0].data;
			for (int64_t i = 0; i < gf_tensor_numel(&out->t[0]); i++)
				x[i] = NAN;
		}
		out->epoch = in->epoch;
		out->pos = in->pos;
		gf_msg_release(in);
		if ((rc = gf_push(ctx, OUT_BATCH, out)))
			return rc;
	}
}

static const gf_port_desc inputs[] = { { "batch", "batch", 0, "batches" } };
static const gf_port_desc outputs[] = { { "batch", "batch", 0, "the same batches, one poisoned with NaN" } };
static const gf_param_desc params[] = {
	{ "at", GF_PARAM_INT, "10", "index of the batch to poison (-1: none)", "-1.." },
	{ "stall_at", GF_PARAM_INT, "-1", "index of the first batch held back, the stall (-1: none)", "-1.." },
};

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "nan_batch",
	.doc = "test stage: poisons one batch with NaN",
	.inputs = inputs,
	.ninputs = 1,
	.outputs = outputs,
	.noutputs = 1,
	.params = params,
	.nparams = 2,
	.create = nb_create,
	.run = nb_run,
};
