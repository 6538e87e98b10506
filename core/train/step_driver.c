/* The step driver: the captured-step protocol of every step stage. See
 * gf_stepdrv in <ganflow/train.h> and docs/cuda.md ("Step stages").
 *
 * d_step, g_step and classifier_step each used to carry their own copy of
 * this protocol; here it is once. A stage queues entries (a step's device
 * work, bracketed by gf_stepgraph: eager warm-up, capture, replay) whose
 * values (losses, sums, the update's norm) the ops leave in gf_readback's
 * slots; the driver reads each entry back once the lag allows — a step
 * later on a device, at once on the host — hands its values to the stage's
 * fold in queue order (so sums add up in the eager order) and, when a
 * record (an iteration's or a step's entries) is complete and closed,
 * calls the stage's finish, which pushes that record's metrics. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/train.h>

struct rec {
	int64_t step;           /* -1 = free */
	int folded, need, closed;
};

struct gf_stepdrv {
	gf_stepdrv_conf c;
	gf_backend *be;
	gf_stepgraph *sg;
	gf_readback *rb;
	int eager;              /* the plan: every step eager, read at once */
	int lag;                /* entries whose results stay in flight now */
	gf_stepdrv_entry *pend; /* (max_lag + 1) queued entries, readback order */
	int pend_head, npend;
	struct rec recs[GF_STEPDRV_RECS];
	int64_t records;        /* closed */
	int64_t w_first, w_begin; /* host_waits at the first entry, at this one's begin; -1: none yet */
	int64_t waits_in;       /* waits while entries were queued */
};

/* The backend's count of host waits, or -1. */
static int64_t waits(const gf_stepdrv *d)
{
	return GF_BACKEND_HAS(d->be, host_waits) ? d->be->ops->host_waits(d->be) : -1;
}

int gf_stepdrv_create(gf_stepdrv **out, gf_backend *be, const gf_stepdrv_conf *conf)
{
	gf_stepdrv *d = calloc(1, sizeof(*d));
	*out = d;
	if (!d)
		return gf_seterr(-ENOMEM, "out of memory");
	d->c = *conf;
	d->be = be;
	if (d->c.max_lag < 0)
		d->c.max_lag = 0;
	for (int i = 0; i < GF_STEPDRV_RECS; i++)
		d->recs[i].step = -1;
	d->w_first = d->w_begin = -1;
	d->pend = calloc((size_t)d->c.max_lag + 1, sizeof(*d->pend));
	if (!d->pend)
		return gf_seterr(-ENOMEM, "out of memory");
	int rc = gf_stepgraph_create(&d->sg, be, conf->graphs, conf->what);
	if (!rc)
		rc = gf_readback_create(&d->rb, be, conf->nvals, d->c.max_lag + 1);
	return rc;
}

void gf_stepdrv_destroy(gf_stepdrv *d)
{
	if (!d)
		return;
	if (d->be && d->rb && gf_readback_deferred(d->rb))
		d->be->ops->sync(d->be); /* nothing of the stage's in flight any more */
	gf_readback_destroy(d->rb);
	gf_stepgraph_destroy(d->sg);
	free(d->pend);
	free(d);
}

void gf_stepdrv_plan(gf_stepdrv *d, int eager)
{
	d->eager = eager;
}

int gf_stepdrv_deferred(const gf_stepdrv *d)
{
	return gf_readback_deferred(d->rb) && !d->eager;
}

int gf_stepdrv_eager(const gf_stepdrv *d)
{
	return d->eager;
}

double *gf_stepdrv_slots(gf_stepdrv *d)
{
	return gf_readback_slots(d->rb);
}

/* ---- records ---- */

static struct rec *rec_of(gf_stepdrv *d, int64_t step)
{
	struct rec *r = &d->recs[step % GF_STEPDRV_RECS];
	return r->step == step ? r : NULL;
}

/* The lag that keeps one record's entries in flight. */
static void set_lag(gf_stepdrv *d, int need)
{
	d->lag = gf_stepdrv_deferred(d) ? (need > d->c.max_lag ? d->c.max_lag : need) : 0;
}

int gf_stepdrv_open(gf_stepdrv *d, gf_ctx *ctx, int64_t step, int need, int *r)
{
	int i = (int)(step % GF_STEPDRV_RECS);
	struct rec *x = &d->recs[i];
	if (x->step >= 0)
		return gf_fail(ctx, "%s %lld: the results of %s %lld are still in flight", d->c.unit, (long long)step,
		               d->c.unit, (long long)x->step);
	*x = (struct rec){ .step = step, .need = need };
	set_lag(d, need);
	*r = i;
	return 0;
}

void gf_stepdrv_need(gf_stepdrv *d, int64_t step, int more)
{
	struct rec *x = rec_of(d, step);
	if (!x)
		return;
	x->need += more;
	set_lag(d, x->need);
}

/* Calls finish when the record is closed and every entry folded. */
static int complete(gf_stepdrv *d, gf_ctx *ctx, struct rec *x)
{
	if (!x->closed || x->folded < x->need)
		return 0;
	int64_t step = x->step;
	x->step = -1;
	return d->c.finish(d->c.self, ctx, (int)(x - d->recs), step);
}

int gf_stepdrv_close(gf_stepdrv *d, gf_ctx *ctx, int64_t step)
{
	struct rec *x = rec_of(d, step);
	if (!x)
		return gf_fail(ctx, "%s %lld closed without being open", d->c.unit, (long long)step);
	x->closed = 1;
	d->records++;
	return complete(d, ctx, x);
}

/* ---- entries ---- */

int gf_stepdrv_begin(gf_stepdrv *d, gf_ctx *ctx)
{
	d->w_begin = waits(d);
	if (d->w_first < 0)
		d->w_first = d->w_begin;
	int rc = gf_readback_begin(d->rb);
	return rc ? gf_fail(ctx, "%s: %s", d->c.what, gf_errmsg()) : 0;
}

int gf_stepdrv_run(gf_stepdrv *d, gf_ctx *ctx, int64_t step, const char *what, uint64_t key, int eager,
                   gf_stepdrv_ops ops, void *arg)
{
	if (!what)
		what = d->c.what;
	int rc = gf_stepgraph_begin(d->sg, key, eager || d->eager);
	if (rc)
		return gf_fail(ctx, "%s %lld: %s: %s", d->c.unit, (long long)step, what, gf_errmsg());
	rc = ops(d->c.self, ctx, arg);
	if ((rc = gf_stepgraph_end(d->sg, rc)) && rc != GF_EFAIL && rc != GF_ESTOP) {
		const char *m = gf_errmsg();
		/* the graph's own messages already name the step ("D step: the replayed step differs ...") */
		if (!strncmp(m, d->c.what, strlen(d->c.what)))
			rc = gf_fail(ctx, "%s %lld: %s", d->c.unit, (long long)step, m);
		else
			rc = gf_fail(ctx, "%s %lld: %s: %s", d->c.unit, (long long)step, what, m);
	}
	return rc;
}

int gf_stepdrv_push(gf_stepdrv *d, gf_ctx *ctx, const gf_stepdrv_entry *e)
{
	if (d->npend > d->c.max_lag)
		return gf_fail(ctx, "%s: %d entries in flight already", d->c.what, d->npend);
	int64_t w = waits(d);
	if (w >= 0 && d->w_begin >= 0)
		d->waits_in += w - d->w_begin;
	d->w_begin = -1;
	int rc = gf_readback_push(d->rb, e->step);
	if (rc)
		return gf_fail(ctx, "%s: %s", d->c.what, gf_errmsg());
	d->pend[(d->pend_head + d->npend) % (d->c.max_lag + 1)] = *e;
	d->npend++;
	return gf_stepdrv_settle(d, ctx, d->lag);
}

int gf_stepdrv_settle(gf_stepdrv *d, gf_ctx *ctx, int keep)
{
	while (gf_readback_count(d->rb) > keep) {
		int64_t tag;
		const double *val;
		double busy;
		int rc = gf_readback_take(d->rb, &tag, &val, &busy);
		if (rc)
			return gf_fail(ctx, "%s results: %s", d->c.what, gf_errmsg());
		gf_stepdrv_entry e = d->pend[d->pend_head];
		d->pend_head = (d->pend_head + 1) % (d->c.max_lag + 1);
		d->npend--;
		struct rec *x = rec_of(d, e.step);
		if (!x)
			return gf_fail(ctx, "%s results of %s %lld arrived without their %s", d->c.what, d->c.unit,
			               (long long)e.step, d->c.unit);
		if ((rc = d->c.fold(d->c.self, ctx, (int)(x - d->recs), &e, val)))
			return rc;
		gf_report_busy(ctx, busy, gf_readback_device_timed(d->rb));
		x->folded++;
		if ((rc = complete(d, ctx, x)))
			return rc;
	}
	return 0;
}

/* ---- counts ---- */

void gf_stepdrv_counts(const gf_stepdrv *d, int64_t *eager, int64_t *captured, int64_t *replayed)
{
	gf_stepgraph_counts(d->sg, eager, captured, replayed);
}

void gf_stepdrv_waits(const gf_stepdrv *d, int64_t *inside, int64_t *total, int64_t *forced)
{
	int64_t w = waits(d);
	*inside = w >= 0 ? d->waits_in : -1;
	*total = w >= 0 && d->w_first >= 0 ? w - d->w_first : -1;
	*forced = gf_stepgraph_forced(d->sg);
}

void gf_stepdrv_summary(const gf_stepdrv *d, gf_ctx *ctx, const char *extra)
{
	int64_t e, c, r, in, all, forced;
	gf_stepgraph_counts(d->sg, &e, &c, &r);
	gf_stepdrv_waits(d, &in, &all, &forced);
	if (!(c + r > 0 || gf_train_async(d->be)))
		return;
	char w[160] = "";
	if (in >= 0)
		snprintf(w, sizeof(w), ", %lld host waits inside steps, %.2f per %s", (long long)in,
		         d->records ? (double)all / (double)d->records : 0.0, d->c.unit);
	gf_info(ctx, "%ss: %lld eager, %lld captured, %lld replayed as graphs (%lld eager after warm-up%s)%s", d->c.what,
	        (long long)e, (long long)c, (long long)r, (long long)forced, w, extra ? extra : "");
}
