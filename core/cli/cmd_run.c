/* `ganflow run`, `ganflow stages` and `ganflow version`.
 *
 * run:     runs a Lua pipeline (core/lua/lua.c) and turns its outcome into an
 *          exit status: 0 done, 1 error (script, arguments, stage failure),
 *          2 usage, 130 / 143 stopped by SIGINT / SIGTERM.
 * stages:  every stage on the search path with its ports and parameters.
 * version: the version, stage ABI and embedded Lua.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/dist.h>
#include <ganflow/err.h>
#include <ganflow/graph.h>
#include <ganflow/loader.h>
#include <ganflow/log.h>
#include <ganflow/lua.h>
#include <ganflow/params.h>
#include <ganflow/stage.h>
#include <ganflow/workers.h>

#include "cmd.h"

/* ---- run ---- */

static void human_bytes(char *buf, size_t size, uint64_t b)
{
	if (b >= 1ull << 30)
		snprintf(buf, size, "%.2f GiB", (double)b / (double)(1ull << 30));
	else if (b >= 1ull << 20)
		snprintf(buf, size, "%.2f MiB", (double)b / (double)(1ull << 20));
	else if (b >= 1ull << 10)
		snprintf(buf, size, "%.2f KiB", (double)b / 1024.0);
	else
		snprintf(buf, size, "%llu B", (unsigned long long)b);
}

/* One line per rank at the end of a distributed run: what it sent. */
static void report_traffic(void)
{
	uint64_t bytes[GF_TRAFFIC_KINDS], calls[GF_TRAFFIC_KINDS];
	gf_dist_traffic(bytes, calls);
	char g[32], p[32], e[32];
	human_bytes(g, sizeof(g), bytes[GF_TRAFFIC_GRADS]);
	human_bytes(p, sizeof(p), bytes[GF_TRAFFIC_PARAMS]);
	human_bytes(e, sizeof(e), bytes[GF_TRAFFIC_EDGES]);
	gf_log(GF_LOG_INFO, "rank %d of %d sent: gradients %s in %llu collectives, parameters %s in %llu, edges %s in %llu messages",
	       gf_dist_rank(), gf_dist_world(), g, (unsigned long long)calls[GF_TRAFFIC_GRADS], p,
	       (unsigned long long)calls[GF_TRAFFIC_PARAMS], e, (unsigned long long)calls[GF_TRAFFIC_EDGES]);
}

static void run_usage(FILE *f)
{
	fprintf(f, "usage: ganflow run PIPELINE.lua [key=value ...]\n\n"
	           "Runs a pipeline. Run options given as key=value override the script's gf.run{}:\n"
	           "  steps=N      stop after N steps (0: at the end of the data)\n"
	           "  seed=N       run seed\n"
	           "  dir=PATH     run directory (default runs/<pipeline>-<date>-<time>)\n"
	           "  backend=B    auto, cpu or cuda\n"
	           "  threads=N    compute threads per stage (0: default)\n"
	           "  resume=FILE  checkpoint to resume from\n"
	           "  stall=S      report a stall after S seconds without a step (default: 60 before the\n"
	           "               first step, then 10 x the slowest step, at least 30)\n"
	           "  stall_stop=S stop a stalled run after S seconds (default 10 x stall), exit 1\n"
	           "Other keys are read by the script with gf.arg(\"key\", default).\n"
	           "Ctrl-C stops gracefully (stages drain and flush); a second Ctrl-C stops at once.\n"
	           "Distributed: mpirun -np N ganflow run PIPELINE.lua ... (or srun): every rank runs the\n"
	           "script; stages are placed with rank = r (docs/dist.md).\n");
}

int gf_cmd_run(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		run_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	const char *script = argv[1];
	FILE *f = fopen(script, "r");
	if (!f) {
		gf_log(GF_LOG_ERROR, "cannot open pipeline '%s': %s", script, strerror(errno));
		return 1;
	}
	fclose(f);
	/* under mpirun / srun: MPI starts here, once, before the script runs
	 * (gf.rank() and gf.world() are MPI's); without a launcher nothing */
	if (gf_dist_init()) {
		gf_log(GF_LOG_ERROR, "%s", gf_errmsg());
		gf_dist_finalize(0);
		return 1;
	}
	static char err[16384];
	gf_pipeline_status status;
	int rc = gf_lua_run_pipeline(script, argc - 2, argv + 2, &status, err, sizeof(err));
	int world = gf_dist_world();
	if (world > 1)
		report_traffic();
	/* MPI_Finalize waits for every rank: only after a run that ended well
	 * here (a failed rank exits at once; its peers notice on their own) */
	gf_dist_finalize(rc == 0);
	if (rc == 0)
		return 0;
	switch (status) {
	case GF_PIPELINE_SIGINT:
		gf_log(GF_LOG_WARN, "interrupted");
		return 130;
	case GF_PIPELINE_SIGTERM:
		gf_log(GF_LOG_WARN, "terminated");
		return 143;
	default:
		if (world > 1) {
			gf_log(GF_LOG_ERROR, "rank %d: %s", gf_dist_rank(), err);
			gf_dist_fail_job(gf_dist_probe_wait() + 1);
		} else
			gf_log(GF_LOG_ERROR, "%s", err);
		return 1;
	}
}

/* ---- stages ---- */

static void print_ports(const char *title, const gf_port_desc *ports, uint32_t n)
{
	if (!n)
		return;
	printf("  %s:\n", title);
	int w = 4, wk = 4;
	for (uint32_t i = 0; i < n; i++) {
		if ((int)strlen(ports[i].name) > w)
			w = (int)strlen(ports[i].name);
		if ((int)strlen(ports[i].kind) > wk)
			wk = (int)strlen(ports[i].kind);
	}
	for (uint32_t i = 0; i < n; i++) {
		char flags[64] = "";
		if (ports[i].flags & GF_PORT_OPTIONAL)
			strcat(flags, " [optional]");
		if (ports[i].flags & GF_PORT_MULTI)
			strcat(flags, " [multi]");
		printf("    %-*s  %-*s  %s%s\n", w, ports[i].name, wk, ports[i].kind, ports[i].doc ? ports[i].doc : "",
		       flags);
	}
}

static void print_stage(const char *name, const char *path, const gf_stage_desc *d)
{
	printf("%s  (%s)\n", name, path);
	if (d->doc)
		printf("    %s\n", d->doc);
	if (d->flags & GF_STAGE_WORKERS)
		printf("    runs as several workers: workers = n, or workers = \"auto\" (a count that follows the consumer:\n"
		       "    a worker is added while the consumer waits on this stage and cores are idle, one is dropped\n"
		       "    while the output stays full; max_workers = m, default the usable cores, here %d)\n",
		       gf_workers_cores() < GF_MAX_WORKERS ? gf_workers_cores() : GF_MAX_WORKERS);
	print_ports("inputs", d->inputs, d->ninputs);
	print_ports("outputs", d->outputs, d->noutputs);
	if (d->nparams) {
		printf("  parameters:\n");
		int w = 4, wd = 8;
		for (uint32_t i = 0; i < d->nparams; i++) {
			const gf_param_desc *p = &d->params[i];
			int l = (int)strlen(p->name);
			if (l > w)
				w = l;
			int ld = p->def ? (int)strlen(p->def) + 2 : 8;
			if (ld > wd && ld < 40)
				wd = ld;
		}
		for (uint32_t i = 0; i < d->nparams; i++) {
			const gf_param_desc *p = &d->params[i];
			char def[256];
			if (!p->def)
				snprintf(def, sizeof(def), "required");
			else if (!strcmp(p->def, "nil"))
				snprintf(def, sizeof(def), "optional");
			else if (p->type == GF_PARAM_STR)
				snprintf(def, sizeof(def), "\"%s\"", p->def);
			else
				snprintf(def, sizeof(def), "%s", p->def);
			printf("    %-*s  %-7s  %-*s  %s", w, p->name, gf_param_type_name(p->type), wd, def,
			       p->doc ? p->doc : "");
			if (p->allowed)
				printf(p->type == GF_PARAM_STR ? " [one of %s]" : " [range %s]", p->allowed);
			printf("\n");
		}
	}
	printf("\n");
}

struct list_state {
	int count;
	int broken;
};

static int list_one(void *ud, const char *name, const char *path, const gf_stage_desc *d, const char *err)
{
	struct list_state *st = ud;
	if (!d) {
		printf("%s  (%s)\n    cannot load: %s\n\n", name, path, err);
		st->broken++;
		return 0;
	}
	print_stage(name, path, d);
	st->count++;
	return 0;
}

int gf_cmd_stages(int argc, char **argv)
{
	if (argc > 2 || (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))) {
		fprintf(argc > 2 ? stderr : stdout,
		        "usage: ganflow stages [NAME]\n\nLists every stage on the search path (GANFLOW_STAGE_PATH, the build tree,\n"
		        "the install prefix) with its ports, parameters, defaults and docs.\n");
		return argc > 2 ? 2 : 0;
	}
	char path[8192];
	gf_stage_search_path(path, sizeof(path));
	if (argc == 2) {
		char err[4096];
		const gf_stage_desc *d;
		const char *file;
		int rc = gf_stage_load(argv[1], &d, &file, err, sizeof(err));
		if (rc) {
			gf_log(GF_LOG_ERROR, "%s", err);
			return 1;
		}
		print_stage(argv[1], file, d);
		return 0;
	}
	printf("search path: %s\n\n", path);
	struct list_state st = { 0, 0 };
	gf_stage_foreach(list_one, &st);
	printf("%d stage%s found", st.count, st.count == 1 ? "" : "s");
	if (st.broken)
		printf(", %d file%s could not be loaded", st.broken, st.broken == 1 ? "" : "s");
	printf("\n");
	return 0;
}

/* ---- version ---- */

int gf_cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("ganflow %s (stage ABI %u, %s)\n", GF_VERSION, GF_STAGE_ABI, gf_lua_version());
	return 0;
}
