/* metrics: one JSONL line per logging interval for a training run.
 *
 * Training stages (g_step, d_step, the evaluator) push "metrics" messages:
 * a step and named scalars (loss_d, loss_g, d_real, d_fake, images, fid...).
 * This stage averages each scalar over the interval (`every` steps; the
 * evaluation figures, counters and ADA's p and r_t keep their latest
 * value, and so does a scheduled option's value, `<option>_<tag>` such as
 * lr_d: a setting at the source's latest step, not a statistic, whose
 * mean would be the curve's value at no step), adds wall time,
 * images/s, how far every producing stage got ("sources": its latest step
 * and when that arrived, so a lagging stage or rank shows), the state of
 * every graph edge (active depth, stalls) and the worker count of every
 * stage running several workers (with workers = "auto": the count now, its
 * range and mean so far, how often it changed, the workers its consumer
 * needs), and appends the line to RUN_DIR/metrics.jsonl, flushing it so a
 * crash loses at most the line being written. The latest figures also go to the live
 * progress line through gf_report_value. Each line also has flop_s, the
 * FLOP/s the step stages reported over the interval (gf_report_flops),
 * and mfu, that rate over their devices' peak (gf_flops_stats; absent
 * when no peak is known).
 *
 * The same figures go to the run's TensorBoard event file
 * (<ganflow/tfevents.h>; parameter tensorboard): every scalar of a line
 * under its name, the edges as "edges/<from> -> <to>/depth" and ".../stalls",
 * the worker counts as "workers/<stage>", and at the start the pipeline script and its arguments as texts.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ganflow/ckpt.h>
#include <ganflow/log.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>
#include <ganflow/tfevents.h>
#include <ganflow/train.h>

#define MAX_NAMES 48
#define MAX_EDGES 64
#define MAX_SOURCES 64
#define MAX_WORKER_STAGES 16

enum { IN_METRICS };

typedef struct acc {
	char name[GF_MSG_SCALAR_NAME];
	double sum;
	double last;
	int64_t count;
	int latest_only; /* evaluation figures and counters: report the latest value */
	int setting;     /* a scheduled option's value: the latest of the interval */
	int64_t line;    /* step of the last line that carried it, -1 = none */
} acc;

/* How far one producing stage got: its latest step and when it arrived. */
typedef struct source {
	char name[64];
	int64_t step;
	double time;
} source;

typedef struct metrics {
	FILE *f;
	gf_tb *tb;           /* the run's TensorBoard events, NULL = off */
	const char *run_dir;
	char path[4096];
	int64_t every;
	int64_t next;        /* next step at which a line is written */
	int64_t last_step;
	int64_t last_line;   /* step of the last line written */
	double t0;           /* run start */
	double t_line;       /* time of the previous line */
	double images;       /* images since the previous line */
	double flops_line;   /* the graph's FLOPs at the previous line (gf_flops_stats) */
	int nacc;
	acc a[MAX_NAMES];
	int nsrc;
	source src[MAX_SOURCES];
	gf_edge_stat edges[MAX_EDGES];
	gf_worker_stat workers[MAX_WORKER_STAGES];
} metrics;

static int is_latest_only(const char *name)
{
	static const char *const names[] = { "fid", "is", "is_std", "kid", "kid_std", "precision", "recall",
	                                     "staleness_max", "skipped", "eval_n", "test_acc", "ada_p", "ada_rt", NULL };
	for (int i = 0; names[i]; i++)
		if (!strcmp(name, names[i]) || !strncmp(name, "fid_class", 9))
			return 1;
	return 0;
}

static acc *find(metrics *m, const char *name)
{
	for (int i = 0; i < m->nacc; i++)
		if (!strcmp(m->a[i].name, name))
			return &m->a[i];
	if (m->nacc == MAX_NAMES)
		return NULL;
	acc *a = &m->a[m->nacc++];
	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", name);
	a->latest_only = is_latest_only(name);
	a->setting = gf_train_schedule_metric(name);
	a->last = NAN;
	a->line = -1;
	return a;
}

/* Notes that `name` reached `step` now (sources beyond MAX_SOURCES are
 * not tracked). */
static void note_source(metrics *m, const char *name, int64_t step, double now)
{
	if (!name || !name[0])
		return;
	source *s = NULL;
	for (int i = 0; i < m->nsrc && !s; i++)
		if (!strcmp(m->src[i].name, name))
			s = &m->src[i];
	if (!s) {
		if (m->nsrc == MAX_SOURCES)
			return;
		s = &m->src[m->nsrc++];
		snprintf(s->name, sizeof(s->name), "%s", name);
		s->step = -1;
	}
	if (step >= s->step) {
		s->step = step;
		s->time = now - m->t0;
	}
}

/* Writes a JSON number; non-finite values become null (JSON has no NaN). */
static void put_num(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.9g", v);
	else
		fputs("null", f);
}

/* ---- TensorBoard ---- */

static double wall_time(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A scalar to the event file; a failure (a full disk) is warned about
 * once and ends the event file, not the run: metrics.jsonl is the record. */
static void tb_scalar(metrics *m, gf_ctx *ctx, const char *tag, int64_t step, double v)
{
	if (!m->tb || !isfinite(v))
		return;
	if (gf_tb_scalar(m->tb, tag, step, wall_time(), (float)v)) {
		gf_warn(ctx, "TensorBoard events: %s; no more events are written", gf_errmsg());
		gf_tb_close(m->tb);
		m->tb = NULL;
	}
}

static void tb_flush(metrics *m, gf_ctx *ctx)
{
	if (m->tb && gf_tb_flush(m->tb)) {
		gf_warn(ctx, "TensorBoard events: %s; no more events are written", gf_errmsg());
		gf_tb_close(m->tb);
		m->tb = NULL;
	}
}

/* The run's script and arguments, as the run directory keeps them. */
static void tb_texts(metrics *m, gf_ctx *ctx)
{
	static const char *const files[][2] = { { "pipeline.lua", "pipeline" }, { "args.txt", "arguments" } };
	for (int i = 0; i < 2 && m->tb && m->run_dir; i++) {
		char path[4200];
		gf_ckpt_record_file(m->run_dir, files[i][0], path, sizeof(path)); /* this run's, <ganflow/ckpt.h> */
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		/* markdown: a code block keeps the script's lines */
		char *text = malloc(1 << 20);
		size_t n = 0;
		if (text) {
			n = (size_t)snprintf(text, 1 << 20, "```\n");
			n += fread(text + n, 1, (1 << 20) - n - 8, f);
			memcpy(text + n, "\n```", 5);
			if (gf_tb_text(m->tb, files[i][1], 0, wall_time(), text))
				gf_warn(ctx, "TensorBoard events: %s", gf_errmsg());
		}
		free(text);
		fclose(f);
	}
	tb_flush(m, ctx);
}

static int write_line(metrics *m, gf_ctx *ctx, int64_t step)
{
	double now = gf_now();
	double dt = now - m->t_line;
	FILE *f = m->f;
	fprintf(f, "{\"step\":%lld,\"time\":", (long long)step);
	put_num(f, now - m->t0);
	fputs(",\"images_per_s\":", f);
	put_num(f, dt > 0 && m->images > 0 ? m->images / dt : NAN);
	tb_scalar(m, ctx, "images_per_s", step, dt > 0 && m->images > 0 ? m->images / dt : NAN);
	/* the FLOP/s the step stages queued over the interval, and its
	 * fraction of their devices' peak (no peak known: no mfu) */
	double flops, peak;
	gf_flops_stats(ctx, &flops, &peak);
	if (dt > 0 && flops > m->flops_line) {
		double fs = (flops - m->flops_line) / dt;
		fputs(",\"flop_s\":", f);
		put_num(f, fs);
		tb_scalar(m, ctx, "flop_s", step, fs);
		if (peak > 0) {
			fputs(",\"mfu\":", f);
			put_num(f, fs / peak);
			tb_scalar(m, ctx, "mfu", step, fs / peak);
		}
	}
	m->flops_line = flops;
	for (int i = 0; i < m->nacc; i++) {
		acc *a = &m->a[i];
		if (!strcmp(a->name, "images"))
			continue;
		if (!a->latest_only && a->count == 0)
			continue;
		if (a->latest_only && isnan(a->last))
			continue;
		double v = a->latest_only || a->setting ? a->last : a->sum / (double)a->count;
		fprintf(f, ",\"%s\":", a->name);
		put_num(f, v);
		gf_report_value(ctx, a->name, v);
		tb_scalar(m, ctx, a->name, step, v);
		a->line = step;
		a->sum = 0;
		a->count = 0;
	}
	/* every producer's latest step and its arrival time: how far each
	 * stage (on every rank) got, and its own pace */
	fputs(",\"sources\":{", f);
	for (int i = 0; i < m->nsrc; i++) {
		fprintf(f, "%s\"%s\":[%lld,", i ? "," : "", m->src[i].name, (long long)m->src[i].step);
		put_num(f, m->src[i].time);
		fputc(']', f);
	}
	fputc('}', f);
	int n = gf_edge_stats(ctx, m->edges, MAX_EDGES);
	if (n > MAX_EDGES)
		n = MAX_EDGES;
	fputs(",\"edges\":[", f);
	for (int i = 0; i < n; i++) {
		const gf_edge_stat *e = &m->edges[i];
		fprintf(f, "%s{\"from\":\"%s\",\"to\":\"%s\",\"depth\":%u,\"depth_mean\":", i ? "," : "", e->from, e->to,
		        e->depth);
		put_num(f, e->depth_mean);
		fprintf(f, ",\"capacity\":%u,\"stalls\":%llu,\"items\":%llu}", e->capacity,
		        (unsigned long long)e->stalls, (unsigned long long)e->items);
		char tag[300];
		snprintf(tag, sizeof(tag), "edges/%s -> %s/depth", e->from, e->to);
		tb_scalar(m, ctx, tag, step, (double)e->depth);
		snprintf(tag, sizeof(tag), "edges/%s -> %s/stalls", e->from, e->to);
		tb_scalar(m, ctx, tag, step, (double)e->stalls);
	}
	fputc(']', f);
	/* worker counts, as the edges: the decisions of the controllers */
	n = gf_worker_stats(ctx, m->workers, MAX_WORKER_STAGES);
	if (n > MAX_WORKER_STAGES)
		n = MAX_WORKER_STAGES;
	fputs(",\"workers\":[", f);
	for (int i = 0; i < n; i++) {
		const gf_worker_stat *w = &m->workers[i];
		fprintf(f, "%s{\"stage\":\"%s\",\"workers\":%d,\"adaptive\":%s,\"min\":%d,\"max\":%d,\"mean\":",
		        i ? "," : "", w->stage, w->workers, w->adaptive ? "true" : "false", w->min, w->max);
		put_num(f, w->mean);
		fprintf(f, ",\"limit\":%d,\"changes\":%llu,\"needed\":", w->limit, (unsigned long long)w->changes);
		put_num(f, w->needed);
		fputc('}', f);
		char tag[100];
		snprintf(tag, sizeof(tag), "workers/%s", w->stage);
		tb_scalar(m, ctx, tag, step, (double)w->workers);
	}
	tb_flush(m, ctx);
	fputs("]}\n", f);
	m->t_line = now;
	m->images = 0;
	m->last_line = step;
	if (fflush(f) != 0 || ferror(f))
		return gf_fail(ctx, "%s: cannot write: %s", m->path, strerror(errno));
	return 0;
}

/* An evaluation message (only figures such as fid, is, kid, test_acc,
 * measured at one step, possibly long after training passed it) gets a
 * line of its own at its own step, so that evaluations never merge. */
static int is_evaluation(const gf_msg *msg)
{
	for (int i = 0; i < msg->nscalars; i++)
		if (!is_latest_only(msg->scalars[i].name) || !strcmp(msg->scalars[i].name, "staleness_max"))
			return 0;
	return msg->nscalars > 0;
}

static int write_evaluation(metrics *m, gf_ctx *ctx, const gf_msg *msg)
{
	FILE *f = m->f;
	fprintf(f, "{\"step\":%lld,\"time\":", (long long)msg->step);
	put_num(f, gf_now() - m->t0);
	for (int i = 0; i < msg->nscalars; i++) {
		fprintf(f, ",\"%s\":", msg->scalars[i].name);
		put_num(f, msg->scalars[i].value);
		gf_report_value(ctx, msg->scalars[i].name, msg->scalars[i].value);
		tb_scalar(m, ctx, msg->scalars[i].name, msg->step, msg->scalars[i].value);
	}
	tb_flush(m, ctx);
	fputs("}\n", f);
	if (fflush(f) != 0 || ferror(f))
		return gf_fail(ctx, "%s: cannot write: %s", m->path, strerror(errno));
	return 0;
}

static int metrics_create(gf_ctx *ctx, const gf_value *params, void **self)
{
	const gf_run_info *run = gf_ctx_run(ctx);
	int64_t every = gf_param_int(params, "every");
	metrics *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->every = every;
	const char *file = gf_param_str(params, "file");
	if (file[0] == '/' || !run->run_dir)
		snprintf(m->path, sizeof(m->path), "%s", file);
	else
		snprintf(m->path, sizeof(m->path), "%s/%s", run->run_dir, file);
	/* Appending keeps the lines of the run being resumed in the same directory. */
	m->f = fopen(m->path, "a");
	if (!m->f) {
		int err = errno;
		free(m);
		return gf_fail(ctx, "cannot open '%s' for writing: %s", file, strerror(err));
	}
	m->next = m->every;
	m->last_step = -1;
	m->last_line = -1;
	*self = m;
	m->run_dir = run->run_dir;
	if (gf_param_bool(params, "tensorboard") && run->run_dir && gf_tb_open(run->run_dir, &m->tb))
		return gf_fail(ctx, "TensorBoard events: %s (tensorboard = false turns them off)", gf_errmsg());
	return 0;
}

static int metrics_run(void *self, gf_ctx *ctx)
{
	metrics *m = self;
	m->t0 = m->t_line = gf_now();
	tb_texts(m, ctx);
	for (;;) {
		gf_msg *msg;
		int rc = gf_pop(ctx, IN_METRICS, &msg);
		if (rc == GF_EEOF || rc == GF_ESTOP)
			break;
		if (rc)
			return rc;
		int64_t step = msg->step;
		if (is_evaluation(msg)) {
			rc = write_evaluation(m, ctx, msg);
			gf_msg_release(msg);
			if (rc)
				return rc;
			continue;
		}
		note_source(m, msg->source, step, gf_now());
		for (int i = 0; i < msg->nscalars; i++) {
			const gf_scalar *s = &msg->scalars[i];
			if (!strcmp(s->name, "images")) {
				m->images += s->value;
				continue;
			}
			acc *a = find(m, s->name);
			if (!a)
				continue;
			a->last = s->value;
			if (isfinite(s->value)) {
				a->sum += s->value;
				a->count++;
			}
		}
		gf_msg_release(msg);
		if (step > m->last_step)
			m->last_step = step;
		if (step >= m->next) {
			rc = write_line(m, ctx, step);
			if (rc)
				return rc;
			m->next = (step / m->every + 1) * m->every;
		}
	}
	/* The tail of the run: the steps after the last full interval, or a
	 * figure the last line did not carry (an evaluation or a test accuracy
	 * that finished last). Late figures of a step already written in full
	 * (G's loss of the last step) are not repeated in a line of their own. */
	int pending = m->images > 0, late = 0;
	for (int i = 0; i < m->nacc; i++) {
		pending |= m->a[i].count > 0;
		late |= m->a[i].count > 0 && m->a[i].line != m->last_line;
	}
	if ((pending && m->last_step > m->last_line) || late)
		return write_line(m, ctx, m->last_step);
	return 0;
}

static void metrics_destroy(void *self)
{
	metrics *m = self;
	if (m->f)
		fclose(m->f);
	gf_tb_close(m->tb);
	free(m);
}

static const gf_port_desc inputs[] = {
	{ "inp", "metrics", GF_PORT_MULTI, "figures from training and evaluation stages" },
};

static const gf_param_desc params[] = {
	{ "every", GF_PARAM_INT, "50", "write one line every this many steps", "1.." },
	{ "file", GF_PARAM_STR, "metrics.jsonl", "output file, relative to the run directory", NULL },
	{ "tensorboard", GF_PARAM_BOOL, "true", "also write the figures to the run's TensorBoard event file", NULL },
};

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = GF_STAGE_ABI,
	.size = sizeof(gf_stage_desc),
	.name = "metrics",
	.doc = "writes one JSONL line per logging interval: losses, D outputs, images/s, edge depths and stalls, worker counts",
	.inputs = inputs,
	.ninputs = 1,
	.params = params,
	.nparams = sizeof(params) / sizeof(params[0]),
	.create = metrics_create,
	.run = metrics_run,
	.destroy = metrics_destroy,
};
