/* lmdb_reader: streams dataset records into the graph.
 *
 * The source of every training pipeline. It opens a dataset (a directory of
 * LMDB shards) read-only and emits one "records" message per record in the
 * epoch order of gf_order (seeded permutation of blocks of records over the
 * whole set + shuffle window, class filter through the meta index, equal
 * disjoint parts per rank:
 * parameters part / parts, default: the run's rank % parts / world). The
 * engine is gf_stream (core/data/stream.c): io_uring readahead keeps the
 * pages of the next `readahead` values (and at least `readahead_mb` MiB)
 * on their way, so emitting never waits on a page fault. Payloads are
 * not copied: t[0] points into the LMDB map, which lives until the stage
 * is destroyed (with direct = true the value is read with O_DIRECT and
 * copied into the message).
 * msg->epoch / msg->pos are the resume point: start_epoch = epoch,
 * start_pos = pos continues right after that record.
 * A Caffe LMDB (format = "caffe", or found by format = "auto") streams the
 * same way: positions follow its keys in LMDB order, payloads point at the
 * Datum's data (JPEG, or raw planar BGR that jpeg_decode reorders), labels
 * come from the Datum.
 * Payload CRC-32C (checksums = true): checked here, unless every consumer
 * of `samples` checks it itself (an input flagged GF_PORT_CHECKS_CRC, such
 * as jpeg_decode's, reached directly or through GF_PORT_PASSES_RECORDS
 * stages): then the stored CRC travels in t[1][5] with GF_RECORD_CRC32C in
 * t[1][4], and the check runs where the payload is read anyway.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/ckpt.h>
#include <ganflow/dataset.h>
#include <ganflow/err.h>
#include <ganflow/params.h>
#include <ganflow/safetensors.h>
#include <ganflow/stage.h>

typedef struct reader {
	gf_dataset *ds;
	gf_stream *s;
	int direct;
	int pass_crc; /* consumers check the payload CRC-32C: pass it along (t[1][5]) */
	double max_bad;
	uint64_t min_seen;
	uint64_t seen, bad, emitted;
	int64_t *classes;  /* (nclasses) class filter */
	uint32_t nclasses;
} reader;

static const gf_port_desc outputs[] = {
	{ "samples", "records", 0,
	  "t[0] u8 payload (in the LMDB map), t[1] i32 {encoding, h, w, c, flags[, crc]}; label, key, epoch, pos, source" },
};

static const gf_param_desc params[] = {
	{ "path", GF_PARAM_STR, NULL, "dataset directory (shard-NNNNN/ shards), one shard directory or a Caffe LMDB",
	  NULL },
	{ "format", GF_PARAM_STR, "auto",
	  "ganflow shards, or a Caffe LMDB of Datum values (convert_imageset); auto: ganflow when the shard has a meta "
	  "record, else caffe when its first value is a Datum",
	  "auto|ganflow|caffe" },
	{ "shuffle", GF_PARAM_BOOL, "true",
	  "shuffle: blocks of records in a random order over the whole set, then a shuffle window", NULL },
	{ "window", GF_PARAM_INT, "65536", "shuffle window in records (0: the whole part)", "0.." },
	{ "block", GF_PARAM_INT, "0",
	  "records read as one run (0: those in 64 KiB of values, at most window / 8192); larger: longer reads, "
	  "fewer places a batch draws from",
	  "0.." },
	{ "seed", GF_PARAM_INT, "nil", "shuffle seed (default: the run seed)", NULL },
	{ "epochs", GF_PARAM_INT, "0", "epochs to read, counted from epoch 0 (0: forever)", "0.." },
	{ "part", GF_PARAM_INT, "nil", "which part of the records to read, below parts (default: the run's rank % parts)",
	  "0.." },
	{ "parts", GF_PARAM_INT, "nil", "number of equal parts (default: the run's world; 1: no partition)", "1..1048576" },
	{ "remainder", GF_PARAM_STR, "drop",
	  "the records an equal split leaves over (fewer than parts): drop (left out of the epoch, different ones "
	  "each epoch; parts stay equal, as lockstep ranks need) or spread (parts differ by one record; every record "
	  "exactly once per epoch)",
	  "drop|spread" },
	{ "classes", GF_PARAM_LIST, "nil", "read only these classes (labels), through the meta index", NULL },
	{ "class_shard", GF_PARAM_BOOL, "false",
	  "read the classes c with c % parts == part (every record of them) instead of a record part", NULL },
	{ "start_epoch", GF_PARAM_INT, "0", "resume: epoch to start in", "0.." },
	{ "start_pos", GF_PARAM_INT, "0", "resume: position in that epoch (a message's pos)", "0.." },
	{ "readahead", GF_PARAM_INT, "64", "records located and prefetched ahead of the consumer", "1..65536" },
	{ "readahead_mb", GF_PARAM_INT, "32",
	  "without direct: also keep this many MiB of values on their way (more records, at most 4096); 0: off",
	  "0..4096" },
	{ "direct", GF_PARAM_BOOL, "false", "O_DIRECT reads through io_uring (data sets larger than memory)", NULL },
	{ "checksums", GF_PARAM_BOOL, "true",
	  "check each record's payload CRC-32C (records without one pass); here, or in the consumers when every one "
	  "checks it (jpeg_decode)",
	  NULL },
	{ "uring", GF_PARAM_BOOL, "true", "use io_uring (false: posix_fadvise / pread)", NULL },
	{ "max_bad_fraction", GF_PARAM_NUM, "0.01", "fail when more than this fraction of records is bad", "0..1" },
	{ "min_records", GF_PARAM_INT, "100", "records read before max_bad_fraction is enforced mid-epoch", "1.." },
};

/* Resume: the position of the last real batch a d_step used, recorded in
 * the checkpoint under "<d>.data_pos" with metadata "<d>.reader" naming
 * this reader instance. Leaves epoch/pos alone when the checkpoint has no
 * position for this reader (a warning says so). */
static int resume_position(gf_ctx *ctx, const char *path, int64_t *epoch, int64_t *pos)
{
	gf_ckpt *c;
	int64_t v[2];
	int found = 0, rc = gf_ckpt_open(&c, path);
	if (!rc)
		rc = gf_ckpt_data_pos(c, gf_ctx_name(ctx), v, &found);
	gf_ckpt_close(c);
	if (rc)
		return gf_fail(ctx, "resume from %s: %s", path, gf_errmsg());
	if (!found)
		gf_warn(ctx, "resume: %s records no data position for reader '%s'; reading from epoch %lld position %lld",
		        path, gf_ctx_name(ctx), (long long)*epoch, (long long)*pos);
	else if (v[0] >= 0 && v[1] >= 0)
		*epoch = v[0], *pos = v[1];
	return 0;
}

static int create(gf_ctx *ctx, const gf_value *p, void **self)
{
	reader *r = calloc(1, sizeof(*r));
	if (!r)
		return gf_fail(ctx, "out of memory");
	*self = r;
	/* ranges are the runtime's (the descriptor); what is left here are the
	 * defaults that come from the run and the rules between parameters */
	const gf_run_info *run = gf_ctx_run(ctx);
	const char *path = gf_param_str(p, "path");
	int64_t seed = gf_param_given(p, "seed") ? gf_param_int(p, "seed") : (int64_t)run->seed;
	int64_t world = gf_param_given(p, "parts") ? gf_param_int(p, "parts") : run->world;
	int64_t rank = gf_param_given(p, "part") ? gf_param_int(p, "part") : run->rank % world;
	if (rank >= world)
		return gf_fail(ctx, "part %lld of %lld parts%s: parameter 'part' must be below 'parts'", (long long)rank,
		               (long long)world, gf_param_given(p, "parts") ? "" : " (parts: the run's world)");
	int64_t start_epoch = gf_param_int(p, "start_epoch"), start_pos = gf_param_int(p, "start_pos");
	if (run->resume && resume_position(ctx, run->resume, &start_epoch, &start_pos))
		return GF_EFAIL;
	r->max_bad = gf_param_num(p, "max_bad_fraction");
	r->min_seen = (uint64_t)gf_param_int(p, "min_records");
	r->direct = gf_param_bool(p, "direct");
	int class_shard = gf_param_bool(p, "class_shard");
	const gf_value *cl = gf_param(p, "classes");
	if (cl && class_shard)
		return gf_fail(ctx, "give either 'classes' or 'class_shard', not both");

	const char *fmt = gf_param_str(p, "format");
	gf_dataset_format format = !strcmp(fmt, "caffe")     ? GF_FORMAT_CAFFE
	                           : !strcmp(fmt, "ganflow") ? GF_FORMAT_GANFLOW
	                                                     : GF_FORMAT_AUTO;
	int rc = gf_dataset_open_as(path, format, &r->ds);
	if (rc)
		return gf_fail(ctx, "%s", gf_errmsg());
	const gf_dataset_meta *m = gf_dataset_metadata(r->ds);
	size_t cap = (cl ? gf_value_len(cl) : 0) + m->nclasses + 1;
	if (!(r->classes = calloc(cap, sizeof(int64_t))))
		return gf_fail(ctx, "out of memory");
	if (cl) {
		if (gf_value_len(cl) == 0)
			return gf_fail(ctx, "parameter 'classes': give at least one class label");
		for (size_t i = 0; i < gf_value_len(cl); i++) {
			int ok = 0;
			r->classes[i] = gf_value_as_int(gf_value_at(cl, i), -1, &ok);
			if (!ok)
				return gf_fail(ctx, "parameter 'classes': item %zu is not an integer", i + 1);
		}
		r->nclasses = (uint32_t)gf_value_len(cl);
	} else if (class_shard) {
		for (uint32_t c = 0; c < m->nclasses && r->nclasses < cap; c++)
			if ((int64_t)(c % (uint64_t)world) == rank)
				r->classes[r->nclasses++] = c;
		if (!r->nclasses)
			return gf_fail(ctx, "class_shard: part %lld of %lld owns no class of %s (%u classes)",
			               (long long)rank, (long long)world, path, m->nclasses);
		rank = 0;
		world = 1;
	}
	gf_stream_opts so = {
		.order = { .shuffle = gf_param_bool(p, "shuffle"),
		           .window = (uint64_t)gf_param_int(p, "window"),
		           .block = (uint64_t)gf_param_int(p, "block"),
		           .spread_remainder = !strcmp(gf_param_str(p, "remainder"), "spread"),
		           .seed = (uint64_t)seed,
		           .rank = (uint32_t)rank,
		           .world = (uint32_t)world,
		           .classes = r->nclasses ? r->classes : NULL,
		           .nclasses = r->nclasses },
		.epochs = (uint64_t)gf_param_int(p, "epochs"),
		.start_epoch = (uint64_t)start_epoch,
		.start_pos = (uint64_t)start_pos,
		.readahead = (uint32_t)gf_param_int(p, "readahead"),
		.readahead_bytes = (uint64_t)gf_param_int(p, "readahead_mb") << 20,
		.direct = r->direct,
		.no_uring = !gf_param_bool(p, "uring"),
	};
	/* Verify where the payload is read anyway: when every consumer checks
	 * the CRC itself (jpeg_decode workers, before decoding, in parallel),
	 * pass it along instead of making a pass over the payload here. */
	r->pass_crc = gf_param_bool(p, "checksums") && gf_port_feeds(ctx, 0, GF_PORT_CHECKS_CRC, GF_PORT_PASSES_RECORDS);
	so.no_checksum = !gf_param_bool(p, "checksums") || r->pass_crc;
	if ((rc = gf_stream_open(r->ds, &so, &r->s)))
		return gf_fail(ctx, "%s", gf_errmsg());
	return 0;
}

/* Counts a bad record; returns non-zero when the stage must fail. */
static int count_bad(reader *r, gf_ctx *ctx, int final)
{
	if (gf_bad_exceeded(r->bad, r->seen, r->max_bad, r->min_seen, final))
		return gf_fail(ctx, "%llu of %llu records read are bad (more than max_bad_fraction = %g); "
		                    "check the dataset with `ganflow dataset verify %s`",
		               (unsigned long long)r->bad, (unsigned long long)r->seen, r->max_bad,
		               gf_dataset_path(r->ds));
	return 0;
}

static int run(void *self, gf_ctx *ctx)
{
	reader *r = self;
	int rc;
	const int64_t hdr_shape[1] = { r->pass_crc ? 6 : 5 };
	while (!gf_should_stop(ctx)) {
		gf_stream_item it;
		rc = gf_stream_next(r->s, &it);
		if (rc == GF_EEOF)
			return count_bad(r, ctx, 1);
		r->seen++;
		if (rc == GF_ECORRUPT) {
			r->bad++;
			if (r->bad <= 20 || r->bad % 1000 == 0)
				gf_warn(ctx, "skipping bad record (%llu so far): %s", (unsigned long long)r->bad, gf_errmsg());
			if ((rc = count_bad(r, ctx, it.last)))
				return rc;
			continue;
		}
		if (rc)
			return gf_fail(ctx, "%s", gf_errmsg());
		gf_msg *m;
		if ((rc = gf_msg_get(ctx, 0, &m)))
			return rc;
		int64_t len = it.rec.h.payload;
		if (r->direct) {
			void *dst = gf_msg_tensor(m, 0, GF_U8, 1, &len);
			if (!dst) {
				gf_msg_release(m);
				return gf_fail(ctx, "out of memory for a %lld-byte record", (long long)len);
			}
			memcpy(dst, it.rec.payload, (size_t)len);
		} else {
			m->t[0] = gf_tensor_make((void *)it.rec.payload, GF_U8, 1, &len);
		}
		int32_t *h = gf_msg_tensor(m, 1, GF_I32, 1, hdr_shape);
		if (!h) {
			gf_msg_release(m);
			return gf_fail(ctx, "out of memory");
		}
		h[0] = (int32_t)it.rec.h.encoding;
		h[1] = (int32_t)it.rec.h.height;
		h[2] = (int32_t)it.rec.h.width;
		h[3] = (int32_t)it.rec.h.channels;
		h[4] = (int32_t)(it.rec.h.flags & GF_RECORD_PAIR); /* what decoding needs of the flags */
		if (r->pass_crc) { /* the check the consumers make (gf_record_check) */
			h[4] |= (int32_t)(it.rec.h.flags & GF_RECORD_CRC32C);
			h[5] = (int32_t)it.rec.h.crc;
		}
		m->label = it.rec.h.label;
		m->key = it.rec.key;
		m->epoch = (int64_t)it.epoch;
		m->pos = it.pos;
		m->source = gf_dataset_shard(r->ds, it.rec.shard)->path;
		if (it.last)
			m->flags |= GF_MSG_LAST;
		if ((rc = gf_push(ctx, 0, m)))
			return rc;
		r->emitted++;
		if (it.last && (rc = count_bad(r, ctx, 1)))
			return rc;
	}
	return 0;
}

static int flush(void *self, gf_ctx *ctx)
{
	reader *r = self;
	if (r->bad)
		gf_warn(ctx, "%llu bad records skipped, %llu read", (unsigned long long)r->bad,
		        (unsigned long long)r->seen);
	return 0;
}

static void destroy(void *self)
{
	reader *r = self;
	if (!r)
		return;
	gf_stream_close(r->s);
	gf_dataset_close(r->ds);
	free(r->classes);
	free(r);
}

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "lmdb_reader",
	.doc = "streams dataset records (LMDB shards) with io_uring readahead, shuffle, class filter, rank parts",
	.outputs = outputs,
	.noutputs = sizeof(outputs) / sizeof(outputs[0]),
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.create = create,
	.run = run,
	.flush = flush,
	.destroy = destroy,
};
