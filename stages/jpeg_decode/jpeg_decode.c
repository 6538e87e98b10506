/* jpeg_decode: records to normalised float images.
 *
 * Sits between lmdb_reader (or label_shard) and batch. Each record (JPEG or
 * raw) goes through gf_decode_record (core/data/decode.c): TurboJPEG decode
 * at a reduced DCT scale when the output is much smaller, crop, resize
 * (area or bilinear), random flip, gray/RGB conversion, x / 127.5 - 1. Runs
 * as several workers (GF_STAGE_WORKERS): the runtime deals records
 * round-robin and restores their order. Random crops and flips depend on
 * (seed, key, epoch) only, so they do not change with the worker count.
 * With paired = true every record must be a pair (GF_RECORD_PAIR: A | B
 * side by side, from `ganflow dataset paired` or `edges2fashion`): both
 * halves get the same crop, resize and flip and leave as one (2C, H, W)
 * sample, A's channels first, which is what a pix2pix D takes. A record
 * that is not a pair (or a pair without paired = true) is a bad record.
 * A bad record (corrupt JPEG, inconsistent header) is counted, named in a
 * warning (shard and key) and pushed back flagged GF_MSG_DROPPED; above
 * max_bad_fraction of the records the instance saw (all workers together)
 * the stage fails.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/decode.h>
#include <ganflow/err.h>
#include <ganflow/dataset.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>

/* Record counts shared by the workers of one stage instance, so the bad
 * fraction is judged over everything the instance saw, whatever the worker
 * count. Keyed by the run (its info pointer) and the instance name. */
typedef struct counts {
	const void *run;
	char name[128];
	int refs;
	atomic_int active;   /* workers still running */
	atomic_uint_fast64_t seen, bad;
	struct counts *next;
} counts;

static pthread_mutex_t counts_lock = PTHREAD_MUTEX_INITIALIZER;
static counts *counts_list;

static counts *counts_get(gf_ctx *ctx)
{
	char name[128];
	snprintf(name, sizeof(name), "%s", gf_ctx_name(ctx));
	char *hash = strrchr(name, '#');
	if (hash && gf_ctx_workers(ctx) > 1)
		*hash = '\0';
	const void *run = gf_ctx_run(ctx);
	pthread_mutex_lock(&counts_lock);
	counts *c = counts_list;
	while (c && (c->run != run || strcmp(c->name, name)))
		c = c->next;
	if (!c && (c = calloc(1, sizeof(*c)))) {
		c->run = run;
		snprintf(c->name, sizeof(c->name), "%s", name);
		c->next = counts_list;
		counts_list = c;
	}
	if (c) {
		c->refs++;
		atomic_fetch_add(&c->active, 1);
	}
	pthread_mutex_unlock(&counts_lock);
	return c;
}

static void counts_put(counts *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&counts_lock);
	if (--c->refs == 0) {
		counts **pp = &counts_list;
		while (*pp != c)
			pp = &(*pp)->next;
		*pp = c->next;
		free(c);
	}
	pthread_mutex_unlock(&counts_lock);
}

typedef struct decoder {
	gf_decoder *dec;
	gf_transform t;
	uint64_t seed;
	double max_bad;
	uint64_t min_seen;
	int paired;         /* records are A | B pairs: (2C, H, W) samples */
	uint64_t bad;       /* this worker's */
	counts *all;        /* every worker's */
} decoder;

static const gf_port_desc inputs[] = {
	{ "records", "records", GF_PORT_CHECKS_CRC,
	  "records from lmdb_reader (t[0] payload, t[1] {encoding, h, w, c, flags[, crc]})" },
};

static const gf_port_desc outputs[] = {
	{ "samples", "samples", 0, "t[0] f32 (C, H, W) in [-1, 1] (paired: (2C, H, W), A then B); label, key, epoch, pos, source "
	  "carried over" },
};

static const gf_param_desc params[] = {
	{ "size", GF_PARAM_INT, "nil", "output height = width (or give height and width; none or 0: the record's size)",
	  "0..65535" },
	{ "height", GF_PARAM_INT, "nil", "output height (default: size)", "0..65535" },
	{ "width", GF_PARAM_INT, "nil", "output width (default: size)", "0..65535" },
	{ "channels", GF_PARAM_INT, "0", "1 (gray) or 3 (RGB); 0: the record's own", "0..3" },
	{ "resize", GF_PARAM_STR, "area", "resize filter: area or bilinear", "area|bilinear" },
	{ "crop", GF_PARAM_STR, "center", "center, random (keep aspect, crop the rest) or none (stretch)",
	  "center|random|none|centre" },
	{ "flip", GF_PARAM_BOOL, "false", "random horizontal flip (p = 1/2), from (seed, key, epoch)", NULL },
	{ "seed", GF_PARAM_INT, "nil", "seed of crops and flips (default: the run seed)", NULL },
	{ "fast", GF_PARAM_BOOL, "false", "fast (less accurate) IDCT and upsampling", NULL },
	{ "lenient", GF_PARAM_BOOL, "false", "accept JPEGs that decode with warnings (e.g. truncated)", NULL },
	{ "paired", GF_PARAM_BOOL, "false", "records are pairs (A | B side by side): both halves get the same crop, "
	                                    "resize and flip; samples are (2C, H, W), A's channels then B's", NULL },
	{ "max_bad_fraction", GF_PARAM_NUM, "0.01", "fail when more than this fraction of records is bad", "0..1" },
	{ "min_records", GF_PARAM_INT, "100", "records seen before max_bad_fraction is enforced", "0.." },
};

static int create(gf_ctx *ctx, const gf_value *p, void **self)
{
	decoder *d = calloc(1, sizeof(*d));
	if (!d)
		return gf_fail(ctx, "out of memory");
	*self = d;
	if (gf_decoder_create(&d->dec))
		return gf_fail(ctx, "%s", gf_errmsg());
	if (!(d->all = counts_get(ctx)))
		return gf_fail(ctx, "out of memory");
	/* ranges and choices are the runtime's (the descriptor); left here:
	 * what a range cannot say */
	int64_t size = gf_param_given(p, "size") ? gf_param_int(p, "size") : 0;
	int64_t h = gf_param_given(p, "height") ? gf_param_int(p, "height") : size;
	int64_t w = gf_param_given(p, "width") ? gf_param_int(p, "width") : size;
	int64_t c = gf_param_int(p, "channels");
	if ((!h) != (!w))
		return gf_fail(ctx, "parameters 'height' = %lld and 'width' = %lld: give both (or size), or neither",
		               (long long)h, (long long)w);
	if (c == 2)
		return gf_fail(ctx, "parameter 'channels' is 2: expected 1 (gray), 3 (RGB) or 0 (the record's own)");
	d->t.height = (int)h;
	d->t.width = (int)w;
	d->t.channels = (int)c;
	d->t.resize = !strcmp(gf_param_str(p, "resize"), "bilinear") ? GF_RESIZE_BILINEAR : GF_RESIZE_AREA;
	const char *cr = gf_param_str(p, "crop");
	d->t.crop = !strcmp(cr, "random") ? GF_CROP_RANDOM : !strcmp(cr, "none") ? GF_CROP_NONE : GF_CROP_CENTER;
	d->t.flip = gf_param_bool(p, "flip");
	d->t.fast = gf_param_bool(p, "fast");
	d->t.lenient = gf_param_bool(p, "lenient");
	d->seed = gf_param_given(p, "seed") ? (uint64_t)gf_param_int(p, "seed") : gf_ctx_run(ctx)->seed;
	d->max_bad = gf_param_num(p, "max_bad_fraction");
	d->paired = gf_param_bool(p, "paired");
	d->min_seen = (uint64_t)gf_param_int(p, "min_records"); /* 0 and 1 alike: nothing is judged before a record */
	return 0;
}

/* The record header a "records" message describes; 0 or a reason. */
static const char *message_header(const gf_msg *m, gf_record_header *h)
{
	if (m->ntensors < 2 || m->t[0].dtype != GF_U8 || m->t[0].ndim != 1 || m->t[1].dtype != GF_I32 ||
	    m->t[1].ndim != 1 || m->t[1].shape[0] < 4 || m->t[1].shape[0] > 6)
		return "not a record message (t[0] u8 payload, t[1] i32 {encoding, h, w, c, flags[, crc]})";
	const int32_t *v = m->t[1].data;
	if (v[0] < 0 || v[1] <= 0 || v[2] <= 0 || v[3] <= 0 || m->t[0].shape[0] < 0 ||
	    m->t[0].shape[0] > (int64_t)UINT32_MAX)
		return "bad record header fields";
	*h = (gf_record_header){ .label = (int32_t)m->label, .encoding = (uint32_t)v[0], .height = (uint32_t)v[1],
		                     .width = (uint32_t)v[2], .channels = (uint32_t)v[3],
		                     .payload = (uint32_t)m->t[0].shape[0],
		                     .flags = m->t[1].shape[0] >= 5 ? (uint32_t)v[4] & GF_RECORD_PAIR : 0 };
	if (m->t[1].shape[0] == 6 && ((uint32_t)v[4] & GF_RECORD_CRC32C)) { /* the reader left the check to us */
		h->flags |= GF_RECORD_CRC32C;
		h->crc = (uint32_t)v[5];
	}
	if (h->encoding >= GF_ENC_COUNT || (h->channels != 1 && h->channels != 3) || h->height > GF_RECORD_MAX_DIM ||
	    h->width > GF_RECORD_MAX_DIM)
		return "bad record header fields";
	if ((h->encoding == GF_ENC_RAW || h->encoding == GF_ENC_BGR) &&
	    (uint64_t)h->height * h->width * h->channels != h->payload)
		return "raw payload is not height x width x channels bytes";
	return NULL;
}

static int bad_record(decoder *d, gf_ctx *ctx, const gf_msg *in, const char *why)
{
	d->bad++;
	uint64_t bad = atomic_fetch_add(&d->all->bad, 1) + 1, seen = atomic_load(&d->all->seen);
	if (bad <= 20 || bad % 1000 == 0)
		gf_warn(ctx, "skipping bad record (%llu so far): shard %s key %llu: %s", (unsigned long long)bad,
		        in->source ? in->source : "?", (unsigned long long)in->key, why);
	if (gf_bad_exceeded(bad, seen, d->max_bad, d->min_seen, 0))
		return gf_fail(ctx, "%llu of %llu records are bad (more than max_bad_fraction = %g); last: shard %s key "
		                    "%llu: %s",
		               (unsigned long long)bad, (unsigned long long)seen, d->max_bad, in->source ? in->source : "?",
		               (unsigned long long)in->key, why);
	return 0;
}

/* At the end of the input: the last worker to finish judges the total. */
static int end_of_input(decoder *d, gf_ctx *ctx, int rc)
{
	if (rc != GF_EEOF || atomic_fetch_sub(&d->all->active, 1) != 1)
		return rc;
	uint64_t bad = atomic_load(&d->all->bad), seen = atomic_load(&d->all->seen);
	if (gf_bad_exceeded(bad, seen, d->max_bad, d->min_seen, 1))
		return gf_fail(ctx, "%llu of %llu records are bad (more than max_bad_fraction = %g)",
		               (unsigned long long)bad, (unsigned long long)seen, d->max_bad);
	return rc;
}

static int run(void *self, gf_ctx *ctx)
{
	decoder *d = self;
	int rc;
	for (;;) {
		gf_msg *in, *out;
		if ((rc = gf_pop(ctx, 0, &in)))
			return end_of_input(d, ctx, rc);
		if ((rc = gf_msg_get(ctx, 0, &out))) {
			gf_msg_release(in);
			return rc;
		}
		atomic_fetch_add(&d->all->seen, 1);
		out->label = in->label;
		out->key = in->key;
		out->epoch = in->epoch;
		out->pos = in->pos;
		out->step = in->step;
		out->source = in->source;
		out->flags = in->flags & GF_MSG_LAST;
		gf_record_header h;
		int c, oh, ow;
		char whybuf[512];
		const char *why = message_header(in, &h);
		if (!why && gf_record_check(&h, in->t[0].data)) { /* the payload CRC-32C, before decoding */
			snprintf(whybuf, sizeof(whybuf), "%s", gf_errmsg());
			why = whybuf;
		}
		int pair = !why && (h.flags & GF_RECORD_PAIR);
		if (!why && pair != d->paired)
			why = d->paired ? "not a pair record (paired = true takes records of `ganflow dataset paired`)"
			                : "a pair record (A | B side by side): set paired = true on jpeg_decode";
		else if (!why && pair && h.width % 2)
			why = "a pair record of odd width";
		if (!why && (pair ? gf_pair_shape(&d->t, &h, &c, &oh, &ow) : gf_transform_shape(&d->t, &h, &c, &oh, &ow)))
			why = strcpy(whybuf, "bad transform");
		if (!why) {
			const int64_t shape[3] = { pair ? 2 * c : c, oh, ow };
			float *dst = gf_msg_tensor(out, 0, GF_F32, 3, shape);
			if (!dst) {
				gf_msg_release(in);
				gf_msg_release(out);
				return gf_fail(ctx, "out of memory for a %dx%dx%d image", c, oh, ow);
			}
			uint64_t rnd = gf_hash3(d->seed, in->key, (uint64_t)in->epoch);
			rc = pair ? gf_decode_pair(d->dec, &d->t, &h, in->t[0].data, rnd, dst, (size_t)shape[0] * oh * ow)
			          : gf_decode_record(d->dec, &d->t, &h, in->t[0].data, rnd, dst, (size_t)c * oh * ow);
			if (rc == GF_ECORRUPT) {
				snprintf(whybuf, sizeof(whybuf), "%s", gf_errmsg());
				why = whybuf;
			} else if (rc) {
				rc = gf_fail(ctx, "shard %s key %llu: %s", in->source ? in->source : "?",
				             (unsigned long long)in->key, gf_errmsg()[0] ? gf_errmsg() : gf_strerror(rc));
				gf_msg_release(in);
				gf_msg_release(out);
				return rc;
			}
		}
		if (why) {
			out->flags = GF_MSG_DROPPED;
			out->ntensors = 0;
			if ((rc = bad_record(d, ctx, in, why))) {
				gf_msg_release(in);
				gf_msg_release(out);
				return rc;
			}
		}
		gf_msg_release(in);
		if ((rc = gf_push(ctx, 0, out)))
			return rc;
	}
}

static int flush(void *self, gf_ctx *ctx)
{
	decoder *d = self;
	if (d->bad)
		gf_warn(ctx, "%llu bad records skipped", (unsigned long long)d->bad);
	return 0;
}

static void destroy(void *self)
{
	decoder *d = self;
	if (!d)
		return;
	gf_decoder_destroy(d->dec);
	counts_put(d->all);
	free(d);
}

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "jpeg_decode",
	.doc = "decodes JPEG/raw records (TurboJPEG, reduced DCT scale), crops, resizes, flips, normalises to [-1, 1]",
	.inputs = inputs,
	.ninputs = sizeof(inputs) / sizeof(inputs[0]),
	.outputs = outputs,
	.noutputs = sizeof(outputs) / sizeof(outputs[0]),
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.flags = GF_STAGE_WORKERS,
	.create = create,
	.run = run,
	.flush = flush,
	.destroy = destroy,
};
