/* Graph statistics: per-edge depth and stall figures, the run's step,
 * items and time, the values stages publish, and how they are shown: the
 * live progress line the monitor draws and the end-of-run summary with the
 * edge table. See <ganflow/graph.h>; graph_internal.h for the structures.
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/depth.h>
#include <ganflow/graph.h>
#include <ganflow/log.h>
#include <ganflow/ring.h>

#include "graph_internal.h"

/* ---- numbers for people ---- */

static void human(char *buf, size_t size, double v)
{
	if (v >= 1e9)
		snprintf(buf, size, "%.2fG", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, size, "%.2fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, size, "%.2fk", v / 1e3);
	else
		snprintf(buf, size, "%.1f", v);
}

static void human_time(char *buf, size_t size, double s)
{
	if (s >= 3600)
		snprintf(buf, size, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
	else if (s >= 60)
		snprintf(buf, size, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
	else
		snprintf(buf, size, "%.0fs", s);
}

static void human_dur(char *buf, size_t size, double s)
{
	if (s >= 1)
		snprintf(buf, size, "%.2fs", s);
	else if (s >= 1e-3)
		snprintf(buf, size, "%.2fms", s * 1e3);
	else
		snprintf(buf, size, "%.1fus", s * 1e6);
}

/* "41.2 GFLOP/s" (unit "FLOP/s") or "1.23 TFLOP" (unit "FLOP") */
static void human_flops(char *buf, size_t size, double v, const char *unit)
{
	static const char prefix[] = " kMGTPE";
	int i = 0;
	while (v >= 1000 && prefix[i + 1]) {
		v /= 1000;
		i++;
	}
	if (i)
		snprintf(buf, size, "%.*f %c%s", v < 10 ? 2 : v < 100 ? 1 : 0, v, prefix[i], unit);
	else
		snprintf(buf, size, "%.0f %s", v, unit);
}

/* ---- FLOPs and the devices' peaks ---- */

double gf_graph_flops(gf_graph *g)
{
	double sum = 0;
	for (int i = 0; i < g->ninst; i++)
		sum += gf_load_relaxed_f64(&g->inst[i]->flops);
	return sum;
}

/* The largest peak reported for the device of instance `from`, and
 * whether `from` is the first instance to report that device. Under the
 * lock. */
static double device_peak(gf_graph *g, int from, int *first)
{
	const char *dev = g->inst[from]->peak_dev;
	double best = 0;
	*first = 1;
	for (int j = 0; j < g->ninst; j++) {
		const gf_ctx *c = g->inst[j];
		if (!c->peak_set || strcmp(c->peak_dev, dev))
			continue;
		if (j < from)
			*first = 0;
		if (c->peak > best)
			best = c->peak;
	}
	return best;
}

double gf_graph_peak(gf_graph *g)
{
	double sum = 0;
	int any = 0, unknown = 0;
	pthread_mutex_lock(&g->lock);
	for (int i = 0; i < g->ninst; i++) {
		int first;
		if (!g->inst[i]->peak_set)
			continue;
		double p = device_peak(g, i, &first);
		if (!first)
			continue;
		any = 1;
		unknown |= !(p > 0);
		sum += p;
	}
	pthread_mutex_unlock(&g->lock);
	return any && !unknown ? sum : 0;
}

/* ---- the progress line ---- */

void gf_graph_progress_text(gf_graph *g, struct gf_progress *pr, double now, char *buf, size_t size)
{
	int64_t step = gf_load_relaxed_i64(&g->step);
	int64_t items = gf_load_relaxed_i64(&g->items);
	int64_t base = gf_load_relaxed_i64(&g->step_base); /* a resumed run's steps before it are not progress */
	if (pr->step_last < base)
		pr->step_last = base;
	double dt = now - pr->t_last;
	if (dt > 0.05) {
		double r = (double)(items - pr->items_last) / dt;
		double sr = (double)(step - pr->step_last) / dt;
		pr->rate = pr->t_last == g->t_start ? r : 0.7 * pr->rate + 0.3 * r;
		pr->step_rate = pr->t_last == g->t_start ? sr : 0.7 * pr->step_rate + 0.3 * sr;
		pr->t_last = now;
		pr->items_last = items;
		pr->step_last = step;
	}
	size_t len = 0;
	char a[32], b[32];
	human_time(a, sizeof(a), now - g->t_start);
	len += (size_t)snprintf(buf + len, size - len, "[%s] ", a);
	if (g->info.steps > 0)
		len += (size_t)snprintf(buf + len, size - len, "step %" PRId64 "/%" PRId64, step, g->info.steps);
	else
		len += (size_t)snprintf(buf + len, size - len, "step %" PRId64, step);
	human(a, sizeof(a), pr->rate);
	len += (size_t)snprintf(buf + len, size - len, "  %s items/s", a);
	/* slowest edge: the one whose consumer takes longest per item */
	struct edge *slow = NULL;
	double worst = 0;
	for (int i = 0; i < g->nedges; i++) {
		double s = gf_depth_service_mean(g->edges[i]->depth);
		if (s > worst) {
			worst = s;
			slow = g->edges[i];
		}
	}
	if (slow && len < size) {
		human_dur(b, sizeof(b), worst);
		len += (size_t)snprintf(buf + len, size - len, "  slowest %s>%s %s/item d=%u", slow->from, slow->to, b,
		                        gf_ring_depth(slow->ring));
	}
	if (len < size) {
		gf_graph_workers_text(g, buf + len, size - len);
		len += strlen(buf + len);
	}
	/* a rate decaying through a stall gives ETAs of years: say what it is */
	double idle = now - g->t_progress;
	int stalled = g->t_progress > 0 && idle >= 5 && idle >= 3 * g->slowest;
	if (stalled && (step > 0 || idle >= gf_graph_stall_limit(g)) && len < size) {
		human_time(a, sizeof(a), idle);
		len += (size_t)snprintf(buf + len, size - len, "  stalled %s", a);
	} else if (g->info.steps > 0 && pr->step_rate > 0 && step < g->info.steps && len < size) {
		human_time(a, sizeof(a), (double)(g->info.steps - step) / pr->step_rate);
		len += (size_t)snprintf(buf + len, size - len, "  ETA %s", a);
	}
	/* step stages' busy fractions over the last seconds (window >= 1 s) */
	for (int i = 0; i < g->ninst && len < size; i++) {
		gf_ctx *c = g->inst[i];
		int kind = gf_load_relaxed_int(&c->busy_kind);
		if (!kind)
			continue;
		int64_t ns = gf_load_relaxed_i64(&c->busy_ns);
		if (c->busy_seen_t == 0) {
			c->busy_seen_t = g->t_start;
			c->busy_frac = -1;
		}
		if (now - c->busy_seen_t >= 1.0) {
			/* a step's time arrives when it is read, a step later: a
			 * window can hold a little more than its length */
			c->busy_frac = fmin(1.0, (double)(ns - c->busy_seen_ns) * 1e-9 / (now - c->busy_seen_t));
			c->busy_seen_ns = ns;
			c->busy_seen_t = now;
		}
		if (c->busy_frac >= 0)
			len += (size_t)snprintf(buf + len, size - len, "  %s busy %.0f%% %s", c->name, 100 * c->busy_frac,
			                        kind == 2 ? "device" : "host");
	}
	/* the run's FLOP/s and MFU over the last seconds (window >= 1 s, as
	 * the busy fractions: FLOPs are reported as steps are queued) */
	double flops = gf_graph_flops(g);
	if (now - pr->flops_t >= 1.0) {
		pr->flop_rate = flops > 0 ? (flops - pr->flops_last) / (now - pr->flops_t) : -1;
		pr->flops_last = flops;
		pr->flops_t = now;
	}
	if (pr->flop_rate >= 0 && len < size) {
		double peak = gf_graph_peak(g);
		human_flops(a, sizeof(a), pr->flop_rate, "FLOP/s");
		len += (size_t)snprintf(buf + len, size - len, "  %s", a);
		if (peak > 0 && len < size)
			len += (size_t)snprintf(buf + len, size - len, " MFU %.1f%%", 100 * pr->flop_rate / peak);
	}
	pthread_mutex_lock(&g->lock);
	for (int i = 0; i < g->nvalues && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "  %s %.4g", g->values[i].name, g->values[i].v);
	pthread_mutex_unlock(&g->lock);
}

/* The step stages' busy fractions over the whole run: device time of
 * their steps on a GPU, compute time on the host. */
static void print_busy(gf_graph *g, double el)
{
	int n = 0;
	for (int i = 0; i < g->ninst; i++)
		n += gf_load_relaxed_int(&g->inst[i]->busy_kind) != 0;
	if (!n || !(el > 0))
		return;
	gf_log(GF_LOG_INFO, "%-24s %8s %10s  %s", "step stage", "busy", "seconds", "measured");
	for (int i = 0; i < g->ninst; i++) {
		gf_ctx *c = g->inst[i];
		int kind = gf_load_relaxed_int(&c->busy_kind);
		if (!kind)
			continue;
		double s = (double)gf_load_relaxed_i64(&c->busy_ns) * 1e-9;
		gf_log(GF_LOG_INFO, "%-24s %7.1f%% %10.2f  %s", c->name, 100 * s / el, s,
		       kind == 2 ? "device time (timed events around each step)" : "host compute time of its steps");
	}
}

/* The step stages' FLOPs over the whole run: each one's FLOP/s and MFU
 * against its device's peak (stages sharing a device add up to the
 * device's), then the run's against the peaks of its devices, each once. */
static void print_flops(gf_graph *g, double el)
{
	double total = gf_graph_flops(g), peak = gf_graph_peak(g);
	if (!(total > 0) || !(el > 0))
		return;
	char f[32], r[32], p[32];
	gf_log(GF_LOG_INFO, "%-24s %12s %14s %7s  %s", "step stage", "FLOPs", "FLOP/s", "MFU", "peak of its device");
	pthread_mutex_lock(&g->lock);
	for (int i = 0; i < g->ninst; i++) {
		gf_ctx *c = g->inst[i];
		double n = gf_load_relaxed_f64(&c->flops);
		if (!(n > 0) && !c->peak_set)
			continue;
		int first;
		double dp = c->peak_set ? device_peak(g, i, &first) : 0;
		char mfu[16] = "-";
		if (dp > 0)
			snprintf(mfu, sizeof(mfu), "%.1f%%", 100 * n / el / dp);
		human_flops(f, sizeof(f), n, "FLOP");
		human_flops(r, sizeof(r), n / el, "FLOP/s");
		if (dp > 0)
			human_flops(p, sizeof(p), dp, "FLOP/s");
		gf_log(GF_LOG_INFO, "%-24s %12s %14s %7s  %s%s%s: %s", c->name, f, r, mfu, c->peak_set ? c->peak_dev : "no device",
		       dp > 0 ? " " : "", dp > 0 ? p : "", c->peak_set ? c->peak_what : "its stage reported no peak");
	}
	pthread_mutex_unlock(&g->lock);
	char mfu[16] = "-";
	if (peak > 0)
		snprintf(mfu, sizeof(mfu), "%.1f%%", 100 * total / el / peak);
	human_flops(f, sizeof(f), total, "FLOP");
	human_flops(r, sizeof(r), total / el, "FLOP/s");
	human_flops(p, sizeof(p), peak, "FLOP/s");
	gf_log(GF_LOG_INFO, "%-24s %12s %14s %7s  %s", "run", f, r, mfu,
	       peak > 0 ? p : "no MFU: a device's peak is not known");
}

/* ---- what a stall looks like ---- */

double gf_graph_stall_limit(const gf_graph *g)
{
	if (g->stall > 0)
		return g->stall;
	if (g->wd_step <= 0 || g->slowest <= 0)
		return 60;
	return 10 * g->slowest > 30 ? 10 * g->slowest : 30;
}

double gf_graph_stall_stop_limit(const gf_graph *g)
{
	if (g->stall_stop > 0)
		return g->stall_stop;
	return 10 * gf_graph_stall_limit(g);
}


void gf_graph_stall_text(gf_graph *g, char *buf, size_t size)
{
	size_t len = 0;
	char busy[512];
	size_t blen = 0;
	buf[0] = busy[0] = '\0';
	for (int i = 0; i < g->ninst; i++) {
		gf_ctx *c = g->inst[i];
		if (!c->started || gf_load_relaxed_int(&c->done))
			continue;
		int wait = gf_load_relaxed_int(&c->wait), port = gf_load_relaxed_int(&c->wait_port);
		const gf_stage_desc *d = c->node->desc;
		if (wait == WAIT_POP && gf_graph_worker_parked(c))
			continue; /* nothing is dealt to it: not a starved edge */
		if (wait == WAIT_POP && port >= 0 && (uint32_t)port < d->ninputs) {
			struct in_port *ip = &c->in[port];
			for (int k = 0; k < ip->nedges && len < size; k++)
				if (gf_ring_count(ip->edges[k]->ring) == 0 && !gf_ring_is_closed(ip->edges[k]->ring))
					len += (size_t)snprintf(buf + len, size - len, "%sedge %s -> %s is starved ('%s' waits on it)",
					                        len ? "; " : "", ip->edges[k]->from, ip->edges[k]->to, c->name);
		} else if (wait == WAIT_PUSH && port >= 0 && (uint32_t)port < d->noutputs && len < size) {
			len += (size_t)snprintf(buf + len, size - len, "%s'%s' waits to push into a full edge from %s.%s",
			                        len ? "; " : "", c->name, c->name, d->outputs[port].name);
		} else if (wait == WAIT_GET && port >= 0 && (uint32_t)port < d->noutputs && len < size) {
			len += (size_t)snprintf(buf + len, size - len, "%s'%s' waits for its messages of %s.%s to be released",
			                        len ? "; " : "", c->name, c->name, d->outputs[port].name);
		} else if (wait == WAIT_NONE && blen < sizeof(busy)) {
			blen += (size_t)snprintf(busy + blen, sizeof(busy) - blen, "%s'%s'", blen ? ", " : "", c->name);
		}
	}
	if (len < size)
		snprintf(buf + len, size - len, "%sbusy: %s", len ? "; " : "", blen ? busy : "no stage");
}

/* ---- statistics ---- */

int gf_graph_edge_stats(gf_graph *g, gf_edge_stat *out, int max)
{
	double now = gf_now();
	int n = 0;
	for (int i = 0; i < g->nedges; i++) {
		struct edge *e = g->edges[i];
		if (gf_graph_edge_unused(g, e))
			continue; /* a worker never dealt to */
		if (n < max) {
			memset(&out[n], 0, sizeof(out[n]));
			snprintf(out[n].from, sizeof(out[n].from), "%s", e->from);
			snprintf(out[n].to, sizeof(out[n].to), "%s", e->to);
			gf_depth_stat(e->depth, now, &out[n]);
		}
		n++;
	}
	return n;
}

int64_t gf_graph_step(const gf_graph *g)
{
	return gf_load_relaxed_i64(&g->step);
}

int64_t gf_graph_items(const gf_graph *g)
{
	return gf_load_relaxed_i64(&g->items);
}

double gf_graph_seconds(const gf_graph *g)
{
	if (g->t_start == 0)
		return 0;
	return (g->t_end > 0 ? g->t_end : gf_now()) - g->t_start;
}

int gf_graph_value(gf_graph *g, const char *name, double *out)
{
	int found = 0;
	pthread_mutex_lock(&g->lock);
	for (int i = 0; i < g->nvalues && !found; i++) {
		if (strncmp(g->values[i].name, name, sizeof(g->values[i].name) - 1) == 0) {
			*out = g->values[i].v;
			found = 1;
		}
	}
	pthread_mutex_unlock(&g->lock);
	return found;
}

void gf_graph_print_edges(gf_graph *g)
{
	if (g->nedges == 0)
		return;
	gf_edge_stat *st = calloc((size_t)g->nedges, sizeof(*st));
	if (!st)
		return;
	int n = gf_graph_edge_stats(g, st, g->nedges);
	int w = 4;
	for (int i = 0; i < n; i++) {
		int l = (int)(strlen(st[i].from) + strlen(st[i].to) + 4);
		if (l > w)
			w = l;
	}
	gf_log(GF_LOG_INFO, "%-*s %8s %6s %6s %7s %6s %10s %10s %12s", w, "edge", "capacity", "depth", "min", "mean",
	       "max", "stalls", "full waits", "items");
	for (int i = 0; i < n; i++) {
		char name[256];
		snprintf(name, sizeof(name), "%s -> %s", st[i].from, st[i].to);
		if (st[i].fixed)
			gf_log(GF_LOG_INFO, "%-*s %8u %6u %6s %7s %6s %10" PRIu64 " %10" PRIu64 " %12" PRIu64, w, name,
			       st[i].capacity, st[i].depth, "fixed", "", "", st[i].stalls, st[i].full_waits, st[i].items);
		else
			gf_log(GF_LOG_INFO, "%-*s %8u %6u %6u %7.1f %6u %10" PRIu64 " %10" PRIu64 " %12" PRIu64, w, name,
			       st[i].capacity, st[i].depth, st[i].depth_min, st[i].depth_mean, st[i].depth_max, st[i].stalls,
			       st[i].full_waits, st[i].items);
	}
	free(st);
}

void gf_graph_print_summary(gf_graph *g)
{
	char a[32], b[32];
	double el = g->t_end - g->t_start;
	human(a, sizeof(a), el > 0 ? (double)gf_load_relaxed_i64(&g->items) / el : 0);
	human_time(b, sizeof(b), el);
	gf_log(GF_LOG_INFO, "run ended (%s) after %s (%.2f s): step %" PRId64 ", %" PRId64 " items, %s items/s",
	       gf_stop_reason_name(gf_graph_stop_reason(g)), b, el, gf_load_relaxed_i64(&g->step),
	       gf_load_relaxed_i64(&g->items), a);
	gf_graph_print_edges(g);
	gf_graph_print_workers(g);
	print_busy(g, el);
	print_flops(g, el);
}
