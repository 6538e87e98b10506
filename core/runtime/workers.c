/* The worker-count controller of a stage run with workers = "auto", and
 * the cores a process may use. See <ganflow/workers.h> for the rule.
 *
 * The controller's state is the monitor thread's; the figures other
 * threads read (count, range, mean, changes, the latest estimate) are
 * relaxed atomics: statistics, where a value one window old is fine.
 */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/workers.h>

#include "../base/atomics.h"

#define GROW_STARVED 0.05   /* the consumer waited at least this share of the window */
#define GROW_RATIO 1.05     /* needed above this many times n */
#define INPUT_STARVED 0.25  /* active workers waited for input less than this share */
#define IDLE_MIN 0.5        /* cores idle */
#define GROW_HEADROOM 1.1   /* grow to ceil(1.1 needed) */
#define SHRINK_STARVED 0.02 /* the consumer waited less than this share */
#define SHRINK_RATIO 0.8    /* needed at most 0.8 (n - 1) */
#define SHRINK_WINDOWS 2    /* ... in this many windows in a row */

struct gf_workers {
	int max;
	int n;        /* count now (monitor's) */
	int surplus;  /* windows in a row that allowed a shrink */
	int cooldown; /* the next window follows a change: not judged */

	atomic_int cur, dmin, dmax;
	atomic_uint_least64_t changes;
	atomic_uint_least64_t needed;   /* f64 */
	atomic_uint_least64_t t0;       /* f64: clock start, 0 = not started */
	atomic_uint_least64_t t_end;    /* f64: clock stop, 0 = running */
	atomic_uint_least64_t t_change; /* f64: last change */
	atomic_uint_least64_t area;     /* f64: sum of n dt up to t_change */
};

/* ---- life ---- */

int gf_workers_create(const gf_workers_opts *opts, gf_workers **out)
{
	*out = NULL;
	int max = opts ? opts->max : 0, start = opts && opts->start ? opts->start : 1;
	if (max < 1 || start < 1 || start > max)
		return -EINVAL;
	gf_workers *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->max = max;
	w->n = start;
	atomic_init(&w->cur, start);
	atomic_init(&w->dmin, start);
	atomic_init(&w->dmax, start);
	atomic_init(&w->changes, 0);
	atomic_init(&w->needed, 0);
	atomic_init(&w->t0, 0);
	atomic_init(&w->t_end, 0);
	atomic_init(&w->t_change, 0);
	atomic_init(&w->area, 0);
	*out = w;
	return 0;
}

void gf_workers_destroy(gf_workers *w)
{
	free(w);
}

void gf_workers_start(gf_workers *w, double now)
{
	gf_store_relaxed_f64(&w->t0, now);
	gf_store_relaxed_f64(&w->t_change, now);
	gf_store_relaxed_f64(&w->area, 0.0);
	gf_store_relaxed_f64(&w->t_end, 0.0);
}

void gf_workers_finish(gf_workers *w, double now)
{
	if (gf_load_relaxed_f64(&w->t0) != 0.0)
		gf_store_relaxed_f64(&w->t_end, now);
}

/* ---- deciding ---- */

static void set_count(gf_workers *w, int n, double now)
{
	if (n == w->n)
		return;
	double t0 = gf_load_relaxed_f64(&w->t0);
	if (t0 == 0.0) {
		gf_workers_start(w, now);
	} else {
		double tc = gf_load_relaxed_f64(&w->t_change);
		gf_store_relaxed_f64(&w->area, gf_load_relaxed_f64(&w->area) + (double)w->n * (now - tc));
		gf_store_relaxed_f64(&w->t_change, now);
	}
	w->n = n;
	gf_store_relaxed_int(&w->cur, n);
	if (n < gf_load_relaxed_int(&w->dmin))
		gf_store_relaxed_int(&w->dmin, n);
	if (n > gf_load_relaxed_int(&w->dmax))
		gf_store_relaxed_int(&w->dmax, n);
	gf_add_relaxed_u64(&w->changes, 1);
	w->surplus = 0;
	w->cooldown = 1;
}

int gf_workers_observe(gf_workers *w, const gf_workers_obs *o, double now)
{
	int n = w->n;
	if (o->items == 0 || !(o->t > 0)) {
		w->surplus = 0; /* nothing moved: nothing to judge */
		return n;
	}
	/* the consumer's own time: a consumer that waited the whole window
	 * still had some, or the estimate would be infinite */
	double own = o->t - o->starved;
	if (own < 0.05 * o->t)
		own = 0.05 * o->t;
	double needed = (o->busy > 0 ? o->busy : 0.0) / own;
	gf_store_relaxed_f64(&w->needed, needed);
	if (w->cooldown) {
		w->cooldown = 0;
		return n;
	}
	if (n < w->max && o->starved >= GROW_STARVED * o->t && needed > GROW_RATIO * n &&
	    o->in_wait < INPUT_STARVED * n * o->t && o->idle >= IDLE_MIN) {
		/* the cores one more working worker takes */
		double share = o->busy > 0 ? o->cpu / o->busy : 1.0;
		if (share > 1.0)
			share = 1.0;
		double fit = share > 1e-3 ? o->idle / share : (double)w->max;
		long by_idle = fit < (double)w->max ? lround(fit) : w->max;
		int nn = n + (by_idle > 1 ? (int)by_idle : 1);
		double want = ceil(GROW_HEADROOM * needed);
		if (want < nn)
			nn = (int)want;
		if (nn <= n)
			nn = n + 1;
		if (nn > w->max)
			nn = w->max;
		set_count(w, nn, now);
		return nn;
	}
	if (n > 1 && o->starved < SHRINK_STARVED * o->t && needed <= SHRINK_RATIO * (n - 1)) {
		if (++w->surplus >= SHRINK_WINDOWS)
			set_count(w, n - 1, now);
	} else {
		w->surplus = 0;
	}
	return w->n;
}

/* ---- reading ---- */

int gf_workers_count(const gf_workers *w)
{
	return gf_load_relaxed_int(&w->cur);
}

void gf_workers_stat(const gf_workers *w, double now, gf_worker_stat *out)
{
	out->workers = gf_load_relaxed_int(&w->cur);
	out->min = gf_load_relaxed_int(&w->dmin);
	out->max = gf_load_relaxed_int(&w->dmax);
	out->limit = w->max;
	out->changes = gf_load_relaxed_u64(&w->changes);
	out->needed = gf_load_relaxed_f64(&w->needed);
	out->adaptive = 1;
	double t0 = gf_load_relaxed_f64(&w->t0), te = gf_load_relaxed_f64(&w->t_end);
	if (te > 0.0)
		now = te;
	double tc = gf_load_relaxed_f64(&w->t_change);
	if (t0 == 0.0 || now <= t0) {
		out->mean = out->workers;
		return;
	}
	double area = gf_load_relaxed_f64(&w->area) + (double)out->workers * (now > tc ? now - tc : 0.0);
	out->mean = area / (now - t0);
}

/* ---- cores ---- */

/* The cgroup v2 CPU quota of this process in cores ("max" or absent: 0). */
static double cgroup_quota(void)
{
	char path[640] = "/sys/fs/cgroup/cpu.max", line[512];
	FILE *f = fopen("/proc/self/cgroup", "r");
	if (f) {
		/* cgroup v2: one line "0::/PATH" */
		while (fgets(line, sizeof(line), f)) {
			if (strncmp(line, "0::", 3))
				continue;
			line[strcspn(line, "\n")] = '\0';
			snprintf(path, sizeof(path), "/sys/fs/cgroup%s/cpu.max", strcmp(line + 3, "/") ? line + 3 : "");
			break;
		}
		fclose(f);
	}
	double quota = 0;
	if ((f = fopen(path, "r")) || (f = fopen("/sys/fs/cgroup/cpu.max", "r"))) {
		char q[32];
		double period;
		if (fscanf(f, "%31s %lf", q, &period) == 2 && strcmp(q, "max") && period > 0)
			quota = atof(q) / period;
		fclose(f);
	}
	return quota;
}

int gf_workers_cores(void)
{
	int n = 0;
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	if (n < 1)
		n = 1;
	double quota = cgroup_quota();
	if (quota > 0 && quota < n)
		n = (int)ceil(quota - 1e-9);
	return n < 1 ? 1 : n;
}
