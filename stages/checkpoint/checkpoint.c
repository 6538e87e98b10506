/* checkpoint: merges the state parts of the training stages into one
 * safetensors file per checkpoint step.
 *
 * g_step, d_step (and any stage with a "state" output) push their part of
 * a checkpoint every checkpoint_every steps and once more when they stop:
 * a safetensors image whose tensor and metadata names carry the producing
 * instance's name ("g.net.0.weight", "d.step"). When every connected
 * producer has delivered its part for a step, this stage writes
 * RUN_DIR/checkpoints/ckpt-<step>.safetensors atomically (temporary file,
 * fsync, rename: a full disk leaves the previous checkpoints intact and
 * fails the run with the path and the system's error), updates
 * RUN_DIR/checkpoints/latest (the name of the newest file, also replaced
 * atomically) and removes the oldest files beyond `keep`. After its
 * `latest`, a checkpoint puts the run's record of how it was started in
 * place of the one of the run it continues (gf_ckpt_commit_record).
 *
 * When the run stops, parts that did not complete a step (per-class pairs
 * that stopped at different steps) are written together as the final
 * checkpoint, named after the largest step among them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ganflow/ckpt.h>
#include <ganflow/err.h>
#include <ganflow/log.h>
#include <ganflow/params.h>
#include <ganflow/safetensors.h>
#include <ganflow/stage.h>

enum { IN_STATE };

#define MAX_PRODUCERS 256
#define MAX_KEEP 1024
#define STR_(x) #x
#define STR(x) STR_(x) /* a bound as text for the descriptor's `allowed` */

typedef struct part {
	char producer[96];
	int64_t step;
	gf_st_file *f;      /* decoded image, owned */
} part;

typedef struct ckpt {
	char dir[4096];
	int keep;
	int nproducers;     /* edges into `in` */
	int nparts;
	part parts[MAX_PRODUCERS]; /* latest part of each producer */
	int64_t written[MAX_KEEP]; /* steps of the files kept, oldest first */
	int nwritten;
	int64_t last_complete; /* step of the last complete checkpoint written */
} ckpt;

static int mkdir_p(const char *path)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

static int by_step(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* The checkpoints already in the directory (a resumed run's, continuing in
 * it) count towards `keep` as if this run had written them: their steps,
 * oldest first, the newest MAX_KEEP of them. */
static void find_written(ckpt *c)
{
	DIR *d = opendir(c->dir);
	struct dirent *e;
	int64_t *steps = NULL;
	size_t n = 0, cap = 0;
	while (d && (e = readdir(d))) {
		long long step;
		char name[64];
		/* exactly the names gf_ckpt_file_name gives (no .tmp files) */
		if (sscanf(e->d_name, "ckpt-%lld", &step) != 1 || step < 0 ||
		    snprintf(name, sizeof(name), "ckpt-%08lld.safetensors", step) >= (int)sizeof(name) ||
		    strcmp(name, e->d_name))
			continue;
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 64;
			int64_t *ns = realloc(steps, nc * sizeof(*ns));
			if (!ns)
				break;
			steps = ns;
			cap = nc;
		}
		steps[n++] = step;
	}
	if (d)
		closedir(d);
	if (n > 1)
		qsort(steps, n, sizeof(*steps), by_step);
	size_t first = n > MAX_KEEP ? n - MAX_KEEP : 0;
	for (size_t i = first; i < n; i++)
		c->written[c->nwritten++] = steps[i];
	free(steps);
}

static int ckpt_create(gf_ctx *ctx, const gf_value *p, void **self)
{
	const gf_run_info *run = gf_ctx_run(ctx);
	ckpt *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	*self = c;
	c->keep = (int)gf_param_int(p, "keep");
	const char *dir = gf_param_str(p, "dir");
	if (dir[0] == '/' || !run->run_dir)
		snprintf(c->dir, sizeof(c->dir), "%s", dir);
	else
		snprintf(c->dir, sizeof(c->dir), "%s/%s", run->run_dir, dir);
	int rc = mkdir_p(c->dir);
	if (rc)
		return gf_fail(ctx, "cannot create checkpoint directory '%s': %s", c->dir, strerror(-rc));
	if (access(c->dir, W_OK))
		return gf_fail(ctx, "checkpoint directory '%s' is not writable: %s", c->dir, strerror(errno));
	find_written(c);
	c->last_complete = -1;
	return 0;
}

/* Writes the parts whose indices are listed as one file for `step`. */
static int write_checkpoint(ckpt *c, gf_ctx *ctx, int64_t step, const int *which, int n)
{
	size_t ntensors = 0, nmeta = 0;
	for (int i = 0; i < n; i++) {
		gf_st_file *f = c->parts[which[i]].f;
		ntensors += gf_st_count(f);
		nmeta += gf_st_meta_count(f);
	}
	gf_st_entry *e = calloc(ntensors ? ntensors : 1, sizeof(*e));
	const char **meta = calloc(2 * nmeta + 5, sizeof(*meta));
	char stepbuf[32], path[4200];
	int rc = 0;
	if (!e || !meta) {
		rc = gf_fail(ctx, "out of memory");
		goto out;
	}
	size_t k = 0, m = 0;
	meta[m++] = "format";
	meta[m++] = GF_CKPT_FORMAT;
	snprintf(stepbuf, sizeof(stepbuf), "%" PRId64, step);
	meta[m++] = "step";
	meta[m++] = stepbuf;
	for (int i = 0; i < n; i++) {
		gf_st_file *f = c->parts[which[i]].f;
		for (size_t j = 0; j < gf_st_count(f); j++, k++) {
			e[k].name = gf_st_name(f, j);
			if ((rc = gf_st_get(f, e[k].name, &e[k].t)))
				goto fail;
		}
		for (size_t j = 0; j < gf_st_meta_count(f); j++) {
			meta[m++] = gf_st_meta_key(f, j);
			meta[m++] = gf_st_meta(f, gf_st_meta_key(f, j));
		}
	}
	meta[m] = NULL;
	gf_ckpt_file_name(c->dir, step, path, sizeof(path));
	if ((rc = gf_st_write(path, e, k, meta)))
		goto fail;
	if ((rc = gf_ckpt_set_latest(c->dir, path)))
		goto fail;
	/* the run has proven itself: its record of how it was started
	 * replaces the one of the run it continues (<ganflow/ckpt.h>) */
	const char *run_dir = gf_ctx_run(ctx)->run_dir;
	if (run_dir && gf_ckpt_commit_record(run_dir))
		gf_warn(ctx, "the run's record (pipeline.lua, args.txt) is not in place: %s", gf_errmsg());
	/* keep the last `keep` files */
	int seen = 0;
	for (int i = 0; i < c->nwritten; i++)
		seen |= c->written[i] == step;
	if (!seen) {
		if (c->nwritten == MAX_KEEP) {
			memmove(c->written, c->written + 1, (MAX_KEEP - 1) * sizeof(c->written[0]));
			c->nwritten--;
		}
		c->written[c->nwritten++] = step;
	}
	while (c->nwritten > c->keep) {
		char old[4200];
		gf_ckpt_file_name(c->dir, c->written[0], old, sizeof(old));
		if (unlink(old) && errno != ENOENT)
			gf_warn(ctx, "cannot remove old checkpoint %s: %s", old, strerror(errno));
		memmove(c->written, c->written + 1, (size_t)(c->nwritten - 1) * sizeof(c->written[0]));
		c->nwritten--;
	}
	gf_info(ctx, "wrote %s", path);
	goto out;
fail:
	rc = gf_fail(ctx, "checkpoint at step %" PRId64 " not written (the previous ones are intact): %s", step,
	             gf_errmsg());
out:
	free(e);
	free(meta);
	return rc;
}

/* Index of the producer's slot, adding it when new. */
static int slot(ckpt *c, const char *producer)
{
	for (int i = 0; i < c->nparts; i++)
		if (!strcmp(c->parts[i].producer, producer))
			return i;
	if (c->nparts == MAX_PRODUCERS)
		return -1;
	snprintf(c->parts[c->nparts].producer, sizeof(c->parts[0].producer), "%s", producer);
	c->parts[c->nparts].step = -1;
	return c->nparts++;
}

static int ckpt_run(void *self, gf_ctx *ctx)
{
	ckpt *c = self;
	c->nproducers = gf_port_edges(ctx, 0, IN_STATE);
	int which[MAX_PRODUCERS];
	for (;;) {
		gf_msg *m;
		int rc = gf_pop(ctx, IN_STATE, &m);
		if (rc == GF_EEOF)
			break;
		if (rc)
			return rc == GF_ESTOP ? 0 : rc;
		const char *producer = m->source ? m->source : "?";
		int i = slot(c, producer);
		if (i < 0) {
			gf_msg_release(m);
			return gf_fail(ctx, "more than %d stages send checkpoint parts", MAX_PRODUCERS);
		}
		gf_st_file *f;
		rc = gf_st_open_mem(&f, m->t[0].data, gf_tensor_bytes(&m->t[0]), producer);
		int64_t step = m->step;
		gf_msg_release(m);
		if (rc)
			return gf_fail(ctx, "checkpoint part from '%s': %s", producer, gf_errmsg());
		gf_st_close(c->parts[i].f);
		c->parts[i].f = f;
		c->parts[i].step = step;
		/* complete when every producer has a part for this step */
		int n = 0;
		for (int j = 0; j < c->nparts; j++)
			if (c->parts[j].step == step)
				which[n++] = j;
		if (n == c->nproducers) {
			if ((rc = write_checkpoint(c, ctx, step, which, n)))
				return rc;
			c->last_complete = step;
		}
	}
	/* the end: parts newer than the last complete checkpoint, at mixed steps */
	int newer = 0, n = 0;
	int64_t top = -1;
	for (int j = 0; j < c->nparts; j++) {
		if (!c->parts[j].f)
			continue;
		newer |= c->parts[j].step > c->last_complete;
		top = c->parts[j].step > top ? c->parts[j].step : top;
		which[n++] = j;
	}
	if (newer && n > 0) {
		if (n < c->nproducers)
			gf_warn(ctx, "final checkpoint holds %d of %d parts (some stages sent none)", n, c->nproducers);
		return write_checkpoint(c, ctx, top, which, n);
	}
	return 0;
}

static void ckpt_destroy(void *self)
{
	ckpt *c = self;
	for (int i = 0; i < c->nparts; i++)
		gf_st_close(c->parts[i].f);
	free(c);
}

static const gf_port_desc inputs[] = {
	{ "state", "state", GF_PORT_MULTI, "checkpoint parts from g_step, d_step, ..." },
};

static const gf_param_desc params[] = {
	{ "dir", GF_PARAM_STR, "checkpoints", "directory for the files, relative to the run directory", NULL },
	{ "keep", GF_PARAM_INT, "3", "number of checkpoint files kept (oldest removed)", "1.." STR(MAX_KEEP) },
};

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "checkpoint",
	.doc = "merges the training stages' state into one safetensors file per checkpoint step, atomically",
	.inputs = inputs,
	.ninputs = 1,
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.create = ckpt_create,
	.run = ckpt_run,
	.destroy = ckpt_destroy,
};
