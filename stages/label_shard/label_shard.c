/* label_shard: keeps only the records of the classes this rank owns.
 *
 * For label-partitioned training (one G/D pair per class, Lupo Pasini et
 * al.): placed right after lmdb_reader, it passes on the records whose
 * label is in its class set and releases the others. The set is an
 * explicit `classes` list, or round-robin over ranks: classes c with
 * c % parts == part (part and parts default to the run's rank % parts and
 * world; `rank` itself is reserved by the runtime for stage placement).
 * Messages are forwarded as they are (no copy). Unlabelled records (label
 * -1) belong to no class and are dropped. When the dataset is large, prefer
 * the reader's own class filter (lmdb_reader classes / class_shard), which
 * never reads the other classes at all.
 *
 * A shard that keeps nothing of a whole epoch (the classes reaching it were
 * filtered out upstream: two chained shards with disjoint classes) would
 * leave training at step 0 while the data cycles forever: it fails at the
 * end of the first complete epoch, naming its classes and those it saw.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>

#define SEEN_MAX 1024

typedef struct label_shard {
	int64_t *list;     /* (nlist) explicit classes, or NULL */
	size_t nlist;
	int64_t rank, world;
	uint64_t passed, dropped;
	/* the epoch being read: for the "passes no class" check */
	int64_t epoch;
	int epochs_seen;         /* epoch changes seen (the first epoch may be partial: resume) */
	uint64_t epoch_records;
	uint8_t seen[SEEN_MAX / 8]; /* labels met this epoch (those below SEEN_MAX) */
} label_shard;

static const gf_port_desc inputs[] = {
	{ "records", "records", GF_PORT_PASSES_RECORDS, "records (lmdb_reader.samples)" },
};

static const gf_port_desc outputs[] = {
	{ "records", "records", 0, "the records of the owned classes, unchanged" },
};

static const gf_param_desc params[] = {
	{ "classes", GF_PARAM_LIST, "nil", "class labels to keep (default: c % parts == part)", NULL },
	{ "part", GF_PARAM_INT, "nil", "this shard's index for the round-robin, below parts (default: the run's rank % parts)",
	  "0.." },
	{ "parts", GF_PARAM_INT, "nil", "shards in the round-robin (default: the run's world)", "1.." },
};

static int create(gf_ctx *ctx, const gf_value *p, void **self)
{
	label_shard *s = calloc(1, sizeof(*s));
	if (!s)
		return gf_fail(ctx, "out of memory");
	*self = s;
	s->epoch = -1;
	const gf_run_info *run = gf_ctx_run(ctx);
	const gf_value *cl = gf_param(p, "classes");
	if (cl) {
		if (gf_param_given(p, "part") || gf_param_given(p, "parts"))
			return gf_fail(ctx, "give either 'classes' or 'part'/'parts', not both");
		s->nlist = gf_value_len(cl);
		if (!s->nlist)
			return gf_fail(ctx, "parameter 'classes' is empty: this stage would drop every record");
		if (!(s->list = calloc(s->nlist, sizeof(int64_t))))
			return gf_fail(ctx, "out of memory");
		for (size_t i = 0; i < s->nlist; i++) {
			int ok = 0;
			s->list[i] = gf_value_as_int(gf_value_at(cl, i), -1, &ok);
			if (!ok || s->list[i] < 0)
				return gf_fail(ctx, "parameter 'classes': item %zu is not a class label (integer >= 0)", i + 1);
		}
		return 0;
	}
	s->world = gf_param_given(p, "parts") ? gf_param_int(p, "parts") : run->world;
	s->rank = gf_param_given(p, "part") ? gf_param_int(p, "part") : run->rank % s->world;
	if (s->rank >= s->world)
		return gf_fail(ctx, "part %lld of %lld parts%s: parameter 'part' must be below 'parts'", (long long)s->rank,
		               (long long)s->world, gf_param_given(p, "parts") ? "" : " (parts: the run's world)");
	return 0;
}

static int keep(const label_shard *s, int64_t label)
{
	if (label < 0)
		return 0;
	if (s->list) {
		for (size_t i = 0; i < s->nlist; i++)
			if (s->list[i] == label)
				return 1;
		return 0;
	}
	return label % s->world == s->rank;
}

/* Called at an epoch change while nothing passed: after a complete epoch,
 * fails naming this shard's classes and the ones that arrived. */
static int check_epoch(label_shard *s, gf_ctx *ctx)
{
	if (s->epochs_seen++ == 0)
		return 0;
	char mine[256], got[512];
	size_t len = 0;
	if (s->list) {
		for (size_t i = 0; i < s->nlist && len < sizeof(mine); i++)
			len += (size_t)snprintf(mine + len, sizeof(mine) - len, "%s%lld", i ? ", " : "", (long long)s->list[i]);
	} else {
		snprintf(mine, sizeof(mine), "c %% %lld == %lld", (long long)s->world, (long long)s->rank);
	}
	len = 0;
	got[0] = '\0';
	for (int c = 0; c < SEEN_MAX && len < sizeof(got); c++)
		if (s->seen[c / 8] & (1u << (c % 8)))
			len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%d", len ? ", " : "", c);
	return gf_fail(ctx,
	               "passes no class: its classes %s, but a whole epoch of %llu records arriving here held %s%s "
	               "(are they filtered out before this stage?)",
	               mine, (unsigned long long)s->epoch_records, len ? "only classes " : "no labelled record",
	               len ? got : "");
}

static int run(void *self, gf_ctx *ctx)
{
	label_shard *s = self;
	int rc;
	for (;;) {
		gf_msg *m;
		if ((rc = gf_pop(ctx, 0, &m)))
			return rc;
		if (m->epoch != s->epoch) {
			if (s->epoch >= 0 && !s->passed && (rc = check_epoch(s, ctx))) {
				gf_msg_release(m);
				return rc;
			}
			s->epoch = m->epoch;
			s->epoch_records = 0;
			memset(s->seen, 0, sizeof(s->seen));
		}
		s->epoch_records++;
		if (m->label >= 0 && m->label < SEEN_MAX)
			s->seen[m->label / 8] |= (uint8_t)(1u << (m->label % 8));
		if (!keep(s, m->label)) {
			s->dropped++;
			gf_msg_release(m);
			continue;
		}
		s->passed++;
		if ((rc = gf_push(ctx, 0, m)))
			return rc;
	}
}

static int flush(void *self, gf_ctx *ctx)
{
	label_shard *s = self;
	if (!s->passed)
		gf_warn(ctx, "no record belonged to this shard's classes (%llu dropped)", (unsigned long long)s->dropped);
	return 0;
}

static void destroy(void *self)
{
	label_shard *s = self;
	if (!s)
		return;
	free(s->list);
	free(s);
}

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "label_shard",
	.doc = "keeps the records of the classes this rank owns (a list, or c % world == rank)",
	.inputs = inputs,
	.ninputs = sizeof(inputs) / sizeof(inputs[0]),
	.outputs = outputs,
	.noutputs = sizeof(outputs) / sizeof(outputs[0]),
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.create = create,
	.run = run,
	.flush = flush,
	.destroy = destroy,
};
