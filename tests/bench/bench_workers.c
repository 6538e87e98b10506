/* bench_workers: an adaptive worker count (workers = "auto") against the
 * best fixed count.
 *
 *   count_source -> jitter (WORKERS UNDER TEST) -> check_sink
 *
 * Each jitter worker burns cpu_us of its own CPU time per item (a decoder
 * of fixed cost: on a loaded machine it takes longer, never less work);
 * the sink is a device that takes cpu_us / k per item with a queue of one
 * (check_sink pace_us: a GPU step that needs the output of k workers,
 * leaves the cores to them and loses the time an item comes late, not the
 * time its thread wakes late).
 * For every k from 1 to the cores this process may use, the pipeline runs
 * with every fixed count from 1 to the cores and with workers = "auto"
 * (which starts at 1), `seconds` of work each at the consumer's pace, in
 * `rounds` rounds (each setting's best round counts: other load on the
 * machine only ever slows a run down). The figure is the worst ratio of
 * auto to the best fixed count over k; target 0.9.
 *
 * work=sleep makes each item a sleep of cpu_us instead (a worker that waits
 * on something other than a core: the count that keeps up no longer
 * depends on the cores, nor the figures on other load of the machine),
 * with k and the fixed counts up to kmax (default 4) and auto at most kmax.
 *
 * Run: tests/bench/run workers [cpu_us=2000] [seconds=6] [rounds=2] [kmax=CORES] [work=cpu|sleep]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/graph.h>
#include <ganflow/log.h>
#include <ganflow/lua.h>
#include <ganflow/workers.h>

#define MAXK 64

struct result {
	double rate;       /* items/s at the sink */
	gf_worker_stat st; /* the stage under test */
};

static gf_value params(const char *code)
{
	gf_value v;
	char full[512];
	snprintf(full, sizeof(full), "return %s", code);
	if (gf_lua_eval(full, &v)) {
		fprintf(stderr, "bench_workers: %s\n", gf_errmsg());
		exit(1);
	}
	return v;
}

static void add(gf_graph *g, const char *stage, const char *name, const char *p, int workers, int *node)
{
	gf_value v = params(p);
	if (gf_graph_add(g, stage, name, &v, workers, node)) {
		fprintf(stderr, "bench_workers: %s\n", gf_graph_error(g));
		exit(1);
	}
	gf_value_free(&v);
}

static int sleep_work;

/* workers: n >= 1 fixed, GF_WORKERS_AUTO(_MAX) adaptive */
static struct result run(double cpu_us, int k, int workers, double seconds)
{
	gf_graph *g;
	char p[256];
	int a, b, c;
	double service = cpu_us / k;
	int n = (int)(seconds * 1e6 / service);
	gf_graph_create(&g);
	snprintf(p, sizeof(p), "{ n = %d }", n);
	add(g, "count_source", "src", p, 1, &a);
	snprintf(p, sizeof(p), sleep_work ? "{ mean_us = %g }" : "{ cpu_us = %g }", cpu_us);
	add(g, "jitter", "work", p, workers, &b);
	snprintf(p, sizeof(p), "{ expect = %d, pace_us = %g }", n, service);
	add(g, "check_sink", "sink", p, 1, &c);
	if (gf_graph_connect(g, a, "out", b, "inp", NULL) || gf_graph_connect(g, b, "out", c, "inp", NULL)) {
		fprintf(stderr, "bench_workers: %s\n", gf_graph_error(g));
		exit(1);
	}
	gf_run_info info = { .world = 1 };
	if (gf_graph_run(g, &info, GF_GRAPH_QUIET)) {
		fprintf(stderr, "bench_workers: %s\n", gf_graph_error(g));
		exit(1);
	}
	struct result r;
	memset(&r, 0, sizeof(r));
	r.rate = (double)gf_graph_items(g) / gf_graph_seconds(g);
	if (gf_graph_worker_stats(g, &r.st, 1) < 1) { /* one worker: no statistics */
		r.st.workers = r.st.min = r.st.max = r.st.limit = 1;
		r.st.mean = 1;
	}
	gf_graph_destroy(g);
	return r;
}

static const char *arg(int argc, char **argv, const char *key, const char *def)
{
	size_t n = strlen(key);
	for (int i = 1; i < argc; i++)
		if (!strncmp(argv[i], key, n) && argv[i][n] == '=')
			return argv[i] + n + 1;
	return def;
}

int main(int argc, char **argv)
{
	int cores = gf_workers_cores();
	if (cores > MAXK)
		cores = MAXK;
	double cpu_us = atof(arg(argc, argv, "cpu_us", "2000"));
	double seconds = atof(arg(argc, argv, "seconds", "6"));
	int rounds = atoi(arg(argc, argv, "rounds", "2"));
	sleep_work = !strcmp(arg(argc, argv, "work", "cpu"), "sleep");
	int kmax = atoi(arg(argc, argv, "kmax", "0"));
	if (sleep_work) /* the count no longer depends on the cores */
		cores = kmax >= 1 && kmax <= MAXK ? kmax : 4;
	if (kmax < 1 || kmax > cores)
		kmax = cores;
	int autos_w = sleep_work ? GF_WORKERS_AUTO_MAX(cores) : GF_WORKERS_AUTO;
	if (rounds < 1)
		rounds = 1;

	static struct result fixed[MAXK + 1][MAXK + 1], autos[MAXK + 1];
	for (int round = 0; round < rounds; round++) {
		for (int k = 1; k <= kmax; k++) {
			for (int f = 1; f <= cores; f++) {
				struct result r = run(cpu_us, k, f, seconds);
				if (r.rate > fixed[k][f].rate)
					fixed[k][f] = r;
			}
			struct result r = run(cpu_us, k, autos_w, seconds);
			if (r.rate > autos[k].rate)
				autos[k] = r;
		}
	}

	printf("%-3s %10s %10s", "k", "need/s", "device us");
	for (int f = 1; f <= cores; f++) {
		char h[32];
		snprintf(h, sizeof(h), "fixed %d", f);
		printf(" %9s", h);
	}
	printf(" %9s %9s %8s %6s %6s %7s\n", "auto", "auto/best", "workers", "mean", "max", "changes");
	double worst = 1e9;
	for (int k = 1; k <= kmax; k++) {
		double best = 0;
		printf("%-3d %10.1f %10.1f", k, k * 1e6 / cpu_us, cpu_us / k);
		for (int f = 1; f <= cores; f++) {
			printf(" %9.1f", fixed[k][f].rate);
			if (fixed[k][f].rate > best)
				best = fixed[k][f].rate;
		}
		double ratio = autos[k].rate / best;
		if (ratio < worst)
			worst = ratio;
		printf(" %9.1f %9.3f %8d %6.2f %6d %7llu\n", autos[k].rate, ratio, autos[k].st.workers, autos[k].st.mean,
		       autos[k].st.max, (unsigned long long)autos[k].st.changes);
	}
	printf("(items/s at the sink; %g us of %s per item and worker; %g s of work at the sink's pace per run, best of "
	       "%d rounds; %d usable cores)\n",
	       cpu_us, sleep_work ? "sleep" : "CPU", seconds, rounds, gf_workers_cores());
	printf("workers: auto_vs_best_fixed=%.3f target=0.9\n", worst);
	return 0;
}
