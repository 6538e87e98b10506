/* batch: collates samples into training batches.
 *
 * Takes "samples" (t[0] f32 (C, H, W)) and emits "batch" messages:
 * t[0] f32 (N, C, H, W) and t[1] i32 (N) labels, with epoch / pos / key /
 * source of the last sample (so a checkpoint taken after the batch resumes
 * the reader right after it). A batch never spans two epochs: it is closed
 * at a sample flagged GF_MSG_LAST or when the epoch changes; a short batch
 * at the end of an epoch or of the data is emitted (shape (n, C, H, W)) or,
 * with drop_last, dropped. Samples are copied once into the batch buffer,
 * which the envelope keeps between uses. With drop_last, a whole epoch
 * shorter than one batch would make no batch ever while the data cycles
 * forever: the stage fails at the end of the first complete epoch that
 * made none, naming the shard and both counts.
 */
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>

typedef struct batch {
	int64_t n;          /* batch size */
	int drop_last;
	gf_msg *cur;        /* batch being filled, or NULL */
	int64_t fill;
	int64_t c, h, w;    /* sample shape of cur */
	int64_t epoch;
	uint64_t batches, dropped_samples;
	int64_t epoch_samples; /* samples of the epoch being read */
	uint64_t epoch_batches;
	int epoch_ends;        /* epoch ends seen (the first may be partial: resume) */
} batch;

static const gf_port_desc inputs[] = {
	{ "samples", "samples", 0, "t[0] f32 (C, H, W), label" },
};

static const gf_port_desc outputs[] = {
	{ "batch", "batch", 0, "t[0] f32 (N, C, H, W), t[1] i32 (N) labels; epoch/pos of the last sample" },
};

static const gf_param_desc params[] = {
	{ "size", GF_PARAM_INT, "64", "samples per batch", "1..1048576" },
	{ "drop_last", GF_PARAM_BOOL, "false", "drop the short batch at the end of an epoch", NULL },
};

static int create(gf_ctx *ctx, const gf_value *p, void **self)
{
	batch *b = calloc(1, sizeof(*b));
	if (!b)
		return gf_fail(ctx, "out of memory");
	*self = b;
	b->n = gf_param_int(p, "size");
	b->drop_last = gf_param_bool(p, "drop_last");
	return 0;
}

/* At the end of an epoch: a complete epoch (not the first, which a
 * resume may have started midway) that made no batch means none ever will. */
static int end_epoch(batch *b, gf_ctx *ctx, const char *source)
{
	int64_t n = b->epoch_samples;
	int full = b->epoch_ends++ > 0;
	uint64_t made = b->epoch_batches;
	b->epoch_samples = 0;
	b->epoch_batches = 0;
	if (!full || made || !b->drop_last)
		return 0;
	/* the dataset, not its shard: "data/ten/shard-00000" -> "data/ten" */
	if (!source)
		source = "?";
	const char *slash = strrchr(source, '/');
	int len = slash && !strncmp(slash + 1, "shard-", 6) ? (int)(slash - source) : (int)strlen(source);
	return gf_fail(ctx,
	               "the data has %lld record%s per epoch (dataset %.*s), batch %lld with drop_last: no batch can be made "
	               "(give a smaller batch size or drop_last = false)",
	               (long long)n, n == 1 ? "" : "s", len, source, (long long)b->n);
}

/* Emits (or drops) the batch being filled; at the end of an epoch (eoe)
 * also checks that the epoch made a batch. */
static int close_batch(batch *b, gf_ctx *ctx, int eoe)
{
	gf_msg *m = b->cur;
	b->cur = NULL;
	if (!m)
		return 0;
	const char *source = m->source;
	if (b->fill < b->n && b->drop_last) {
		b->dropped_samples += (uint64_t)b->fill;
		gf_msg_release(m);
		return eoe ? end_epoch(b, ctx, source) : 0;
	}
	m->t[0].shape[0] = b->fill;
	m->t[1].shape[0] = b->fill;
	b->batches++;
	b->epoch_batches++;
	int rc = gf_push(ctx, 0, m);
	if (!rc && eoe)
		rc = end_epoch(b, ctx, source);
	return rc;
}

static int run(void *self, gf_ctx *ctx)
{
	batch *b = self;
	int rc;
	for (;;) {
		gf_msg *in;
		if ((rc = gf_pop(ctx, 0, &in))) {
			if (rc == GF_EEOF)
				return close_batch(b, ctx, 0);
			return rc;
		}
		const gf_tensor *t = &in->t[0];
		if (in->ntensors < 1 || t->dtype != GF_F32 || t->ndim != 3) {
			char s[96];
			rc = gf_fail(ctx, "sample key %llu: expected t[0] f32 (C, H, W), got %s", (unsigned long long)in->key,
			             in->ntensors ? gf_tensor_shape_str(t, s, sizeof(s)) : "no tensor");
			gf_msg_release(in);
			return rc;
		}
		if (b->cur && in->epoch != b->epoch && (rc = close_batch(b, ctx, 1))) {
			gf_msg_release(in);
			return rc;
		}
		if (!b->cur) {
			if ((rc = gf_msg_get(ctx, 0, &b->cur))) {
				gf_msg_release(in);
				return rc;
			}
			b->c = t->shape[0];
			b->h = t->shape[1];
			b->w = t->shape[2];
			b->fill = 0;
			b->epoch = in->epoch;
			const int64_t is[4] = { b->n, b->c, b->h, b->w }, ls[1] = { b->n };
			if (!gf_msg_tensor(b->cur, 0, GF_F32, 4, is) || !gf_msg_tensor(b->cur, 1, GF_I32, 1, ls)) {
				gf_msg_release(in);
				return gf_fail(ctx, "out of memory for a batch of %lld x %lldx%lldx%lld", (long long)b->n,
				               (long long)b->c, (long long)b->h, (long long)b->w);
			}
		} else if (t->shape[0] != b->c || t->shape[1] != b->h || t->shape[2] != b->w) {
			rc = gf_fail(ctx, "sample key %llu (shard %s) is %lldx%lldx%lld but the batch holds %lldx%lldx%lld; "
			                  "give jpeg_decode a size",
			             (unsigned long long)in->key, in->source ? in->source : "?", (long long)t->shape[0],
			             (long long)t->shape[1], (long long)t->shape[2], (long long)b->c, (long long)b->h,
			             (long long)b->w);
			gf_msg_release(in);
			return rc;
		}
		size_t chw = (size_t)(b->c * b->h * b->w);
		float *dst = (float *)b->cur->t[0].data + (size_t)b->fill * chw;
		memcpy(dst, t->data, chw * sizeof(float));
		((int32_t *)b->cur->t[1].data)[b->fill] = (int32_t)in->label;
		b->fill++;
		b->epoch_samples++;
		b->cur->epoch = in->epoch;
		b->cur->pos = in->pos;
		b->cur->key = in->key;
		b->cur->label = in->label;
		b->cur->source = in->source;
		int last = (in->flags & GF_MSG_LAST) != 0;
		if (last)
			b->cur->flags |= GF_MSG_LAST;
		gf_msg_release(in);
		if ((b->fill == b->n || last) && (rc = close_batch(b, ctx, last)))
			return rc;
	}
}

static void destroy(void *self)
{
	batch *b = self;
	if (!b)
		return;
	gf_msg_release(b->cur);
	free(b);
}

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "batch",
	.doc = "collates samples into batches: t[0] f32 (N, C, H, W), t[1] i32 (N) labels",
	.inputs = inputs,
	.ninputs = sizeof(inputs) / sizeof(inputs[0]),
	.outputs = outputs,
	.noutputs = sizeof(outputs) / sizeof(outputs[0]),
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.create = create,
	.run = run,
	.destroy = destroy,
};
