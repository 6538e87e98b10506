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
 */
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>

typedef struct label_shard {
	int64_t *list;     /* (nlist) explicit classes, or NULL */
	size_t nlist;
	int64_t rank, world;
	uint64_t passed, dropped;
} label_shard;

static const gf_port_desc inputs[] = {
	{ "records", "records", 0, "records (lmdb_reader.samples)" },
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

static int run(void *self, gf_ctx *ctx)
{
	label_shard *s = self;
	int rc;
	for (;;) {
		gf_msg *m;
		if ((rc = gf_pop(ctx, 0, &m)))
			return rc;
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
