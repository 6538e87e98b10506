/* bench_depth: adaptive depth against fixed depths (ParaGAN's
 * congestion-aware prefetch).
 *
 *   count_source --(fixed 64)--> jitter --(EDGE UNDER TEST)--> check_sink
 *
 * The sink is a fixed-rate consumer (1 ms per item). The jitter stage is the
 * producer of the edge under test:
 *   bursty   400 us per item, and a 15 ms pause before every 50th item: it
 *            keeps up on average (0.7 ms per item) but a shallow ring runs
 *            dry during each pause;
 *   steady   500 us per item, no jitter.
 * Each is run with the edge fixed at depth 1, fixed at 64 (= capacity),
 * and adaptive. Targets: under bursty jitter the adaptive edge reaches
 * >= 95% of the fixed-64 throughput with a mean active depth <= 32; with no
 * jitter its depth settles at <= 4. Run: tests/bench/run depth
 */
#include <stdio.h>
#include <stdlib.h>

#include <ganflow/graph.h>
#include <ganflow/log.h>
#include <ganflow/lua.h>

#define SERVICE_US 1000
#define CAPACITY 64

struct row {
	double rate;        /* items/s at the sink */
	gf_edge_stat st;    /* the edge under test */
};

static gf_value params(const char *code)
{
	gf_value v;
	char full[512];
	snprintf(full, sizeof(full), "return %s", code);
	if (gf_lua_eval(full, &v)) {
		fprintf(stderr, "bench_depth: %s\n", gf_errmsg());
		exit(1);
	}
	return v;
}

static void add(gf_graph *g, const char *stage, const char *name, const char *p, int *node)
{
	gf_value v = params(p);
	if (gf_graph_add(g, stage, name, &v, 1, node)) {
		fprintf(stderr, "bench_depth: %s\n", gf_graph_error(g));
		exit(1);
	}
	gf_value_free(&v);
}

static struct row run(const char *jitter, int n, uint32_t depth)
{
	gf_graph *g;
	char p[256];
	int a, b, c;
	gf_graph_create(&g);
	snprintf(p, sizeof(p), "{ n = %d }", n);
	add(g, "count_source", "src", p, &a);
	add(g, "jitter", "jit", jitter, &b);
	snprintf(p, sizeof(p), "{ expect = %d, service_us = %d }", n, SERVICE_US);
	add(g, "check_sink", "sink", p, &c);
	gf_edge_opts feed = { .capacity = CAPACITY, .depth = CAPACITY };
	gf_edge_opts test = { .capacity = CAPACITY, .depth = depth };
	if (gf_graph_connect(g, a, "out", b, "inp", &feed) || gf_graph_connect(g, b, "out", c, "inp", &test)) {
		fprintf(stderr, "bench_depth: %s\n", gf_graph_error(g));
		exit(1);
	}
	gf_run_info info = { .world = 1 };
	if (gf_graph_run(g, &info, GF_GRAPH_QUIET)) {
		fprintf(stderr, "bench_depth: %s\n", gf_graph_error(g));
		exit(1);
	}
	struct row r;
	gf_edge_stat st[2];
	gf_graph_edge_stats(g, st, 2);
	r.st = st[1];
	r.rate = (double)gf_graph_items(g) / gf_graph_seconds(g);
	gf_graph_destroy(g);
	return r;
}

static void print_row(const char *scenario, const char *setting, const struct row *r, double ref)
{
	printf("%-8s %-10s %10.1f %9.1f%% %6u %6u %7.1f %6u %8llu %10llu\n", scenario, setting, r->rate,
	       100.0 * r->rate / ref, r->st.depth, r->st.depth_min, r->st.depth_mean, r->st.depth_max,
	       (unsigned long long)r->st.stalls, (unsigned long long)r->st.full_waits);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2500;
	const char *bursty = "{ dist = 'bursty', mean_us = 400, burst_every = 50, burst_us = 15000 }";
	const char *steady = "{ dist = 'none', mean_us = 500 }";

	struct row b1 = run(bursty, n, 1);
	struct row b64 = run(bursty, n, CAPACITY);
	struct row ba = run(bursty, n, 0);
	struct row s1 = run(steady, n / 2, 1);
	struct row s64 = run(steady, n / 2, CAPACITY);
	struct row sa = run(steady, n / 2, 0);

	printf("%-8s %-10s %10s %10s %6s %6s %7s %6s %8s %10s\n", "jitter", "depth", "items/s", "vs fixed64",
	       "final", "min", "mean", "max", "stalls", "full waits");
	print_row("bursty", "fixed 1", &b1, b64.rate);
	print_row("bursty", "fixed 64", &b64, b64.rate);
	print_row("bursty", "adaptive", &ba, b64.rate);
	print_row("none", "fixed 1", &s1, s64.rate);
	print_row("none", "fixed 64", &s64, s64.rate);
	print_row("none", "adaptive", &sa, s64.rate);

	double ratio = ba.rate / b64.rate;
	int ok_ratio = ratio >= 0.95, ok_mean = ba.st.depth_mean <= CAPACITY / 2, ok_settle = sa.st.depth <= 4;
	printf("\nbursty adaptive: %.1f%% of fixed-64 throughput (target >= 95%%) %s; mean depth %.1f (target <= %d) %s\n",
	       100.0 * ratio, ok_ratio ? "ok" : "MISSED", ba.st.depth_mean, CAPACITY / 2, ok_mean ? "ok" : "MISSED");
	printf("steady adaptive: final depth %u (target <= 4) %s\n", sa.st.depth, ok_settle ? "ok" : "MISSED");
	printf("(%d items per bursty run, %d per steady run; consumer %d us per item; capacity %d)\n", n, n / 2,
	       SERVICE_US, CAPACITY);
	printf("depth: adaptive_vs_fixed64=%.3f target=0.95\n", ratio);
	return 0;
}
