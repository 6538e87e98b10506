/* What the functions of the `ganflow` module do once lua.c has turned
 * their arguments into C values: see pipeline.h. Part of core/lua; uses
 * the runtime (graphs, signals), dist (placement) and rundir.c, never a
 * Lua header.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/graph.h>
#include <ganflow/log.h>
#include <ganflow/value.h>

#include "../runtime/signals.h"
#include "pipeline.h"

/* ---- gf.stage: the runtime's keys ---- */

/* Integer runtime key (rank); returns -1 with a message in err
 * when it is not an integer. */
static int runtime_int(const char *stage, const char *key, const gf_value *v, int def, int *out, char *err,
                       size_t errsize)
{
	*out = def;
	if (!v || v->type == GF_VNIL)
		return 0;
	int ok;
	int64_t i = gf_value_as_int(v, def, &ok);
	if (!ok || i < -1000000 || i > 1000000) {
		char shown[64];
		gf_value_format(v, shown, sizeof(shown));
		snprintf(err, errsize, "gf.stage \"%s\": %s must be an integer, got %s", stage, key, shown);
		return -1;
	}
	*out = (int)i;
	return 0;
}

/* workers = n (a number, or its text: a command-line value given for a
 * default of "auto") or "auto" with max_workers = m, into gf_graph_add's
 * encoding (<ganflow/graph.h>). Returns -1 with err set when bad. */
static int workers_key(const char *stage, const gf_value *all, int *workers, char *err, size_t errsize)
{
	const gf_value *v = gf_value_get(all, "workers"), *vmax = gf_value_get(all, "max_workers");
	char shown[64];
	int max = 0, ok;
	if (vmax && vmax->type != GF_VNIL) {
		int64_t m = gf_value_as_int(vmax, 0, &ok);
		if (!ok || m < 1 || m > GF_MAX_WORKERS) {
			gf_value_format(vmax, shown, sizeof(shown));
			snprintf(err, errsize, "gf.stage \"%s\": max_workers must be an integer from 1 to %d, got %s", stage,
			         GF_MAX_WORKERS, shown);
			return -1;
		}
		max = (int)m;
	}
	if (v && v->type == GF_VSTR && !strcmp(v->u.s, "auto")) {
		*workers = max ? GF_WORKERS_AUTO_MAX(max) : GF_WORKERS_AUTO;
		return 0;
	}
	int64_t n = 1;
	ok = 1;
	if (v && v->type == GF_VSTR) {
		char *end;
		n = strtoll(v->u.s, &end, 10);
		ok = end != v->u.s && !*end;
	} else if (v && v->type != GF_VNIL) {
		n = gf_value_as_int(v, 1, &ok);
	}
	if (!ok || n < 1 || n > GF_MAX_WORKERS) {
		gf_value_format(v, shown, sizeof(shown));
		snprintf(err, errsize, "gf.stage \"%s\": workers must be \"auto\" or an integer from 1 to %d, got %s", stage,
		         GF_MAX_WORKERS, shown);
		return -1;
	}
	if (max) {
		snprintf(err, errsize, "gf.stage \"%s\": max_workers = %d is the limit of workers = \"auto\", not of workers = %lld",
		         stage, max, (long long)n);
		return -1;
	}
	*workers = (int)n;
	return 0;
}

int gf_pipeline_stage_keys(const char *stage, const gf_value *all, gf_value *params, char *name, size_t namesize,
                           int *workers, int *rank, char *err, size_t errsize)
{
	*params = gf_value_map();
	if (all->type == GF_VLIST && all->u.c.len > 0) {
		snprintf(err, errsize, "gf.stage \"%s\": parameters must be named (name = value), not a list", stage);
		return -1;
	}
	const gf_value *vname = gf_value_get(all, "name");
	if (vname && vname->type != GF_VSTR) {
		snprintf(err, errsize, "gf.stage \"%s\": name must be a string", stage);
		return -1;
	}
	name[0] = '\0';
	if (vname)
		snprintf(name, namesize, "%s", vname->u.s);
	if (workers_key(stage, all, workers, err, errsize) ||
	    runtime_int(stage, "rank", gf_value_get(all, "rank"), -1, rank, err, errsize))
		return -1;
	for (size_t i = 0; all->type == GF_VMAP && i < all->u.c.len; i++) {
		const char *k = all->u.c.keys[i];
		if (!strcmp(k, "name") || !strcmp(k, "workers") || !strcmp(k, "max_workers") || !strcmp(k, "rank"))
			continue;
		gf_value copy;
		if (gf_value_copy(&copy, &all->u.c.items[i]) || gf_value_set(params, k, copy)) {
			snprintf(err, errsize, "out of memory");
			gf_value_free(params);
			return -1;
		}
	}
	return 0;
}

/* ---- gf.run ---- */

int gf_pipeline_check(gf_placement *pl, gf_run_opts *o, const gf_args *args, char *err, size_t errsize)
{
	if (gf_args_check_used(args, gf_run_keys, GF_NRUN_KEYS, err, errsize))
		return -1;
	if (o->resume[0] && gf_rundir_resolve_resume(o->resume, sizeof(o->resume), err, errsize))
		return -1;
	if (o->resume[0] && gf_rundir_check_steps(o, err, errsize))
		return -1;
	if (strcmp(o->backend, "auto") && strcmp(o->backend, "cpu") && strcmp(o->backend, "cuda")) {
		snprintf(err, errsize, "gf.run: backend must be \"auto\", \"cpu\" or \"cuda\", not \"%s\"", o->backend);
		return -1;
	}
	/* a graph that cannot run leaves no run directory behind: the whole
	 * pipeline first, then what runs on this rank */
	if (gf_placement_validate(pl)) {
		snprintf(err, errsize, "%s", gf_placement_error(pl));
		return -1;
	}
	return 0;
}

/* What gf_graph_run calls once every stage is created: the run's record. */
struct record {
	const gf_run_opts *o;
	const char *script;
	const gf_args *args;
	int rank;
};

static int record_run(void *arg)
{
	const struct record *r = arg;
	char err[4800];
	if (gf_rundir_record(r->o, r->rank, r->script, r->args, err, sizeof(err)))
		return gf_seterr(GF_EFAIL, "%s", err);
	return 0;
}

int gf_pipeline_run(gf_graph *g, const gf_run_opts *o, const char *script, const gf_args *args, int rank, int world,
                    gf_pipeline_end *end, char *err, size_t errsize)
{
	memset(end, 0, sizeof(*end));
	struct record rec = { o, script, args, rank };
	if (gf_graph_nodes(g) == 0) {
		gf_log(GF_LOG_WARN, "rank %d of %d: no stage of the pipeline is placed on this rank; it has nothing to run",
		       rank, world);
		gf_graph_destroy(g);
		end->reason = "nothing to run";
		if (record_run(&rec)) {
			snprintf(err, errsize, "%s", gf_errmsg());
			return GF_EFAIL;
		}
		gf_rundir_finish(o, rank, 1);
		return 0;
	}
	gf_graph_on_created(g, record_run, &rec);
	gf_run_info info = {
		.rank = rank,
		.world = world,
		.seed = (uint64_t)o->seed,
		.steps = o->steps,
		.run_dir = o->dir,
		.backend = o->backend,
		.resume = o->resume[0] ? o->resume : NULL,
		.pipeline = script,
		.threads = (int)o->threads,
		.checkpoint_every = o->checkpoint_every,
	};
	gf_graph_set_grace(g, o->grace);
	gf_graph_set_stall(g, o->stall, o->stall_stop);
	int sig;
	int rc = gf_signals_run_graph(g, &info, o->quiet ? GF_GRAPH_QUIET : 0, &sig);

	gf_stop_reason why = gf_graph_stop_reason(g);
	if (rc == GF_EGRAPH) {
		snprintf(err, errsize, "%s", gf_graph_error(g));
	} else if (rc || why == GF_STOP_REQUEST) {
		if (why == GF_STOP_REQUEST || why == GF_STOP_HARD) {
			end->signal = sig ? sig : SIGINT;
			snprintf(err, errsize, "%s", rc ? gf_graph_error(g) : "interrupted");
			rc = GF_ESTOP;
		} else {
			snprintf(err, errsize, "%s", gf_graph_error(g));
			rc = GF_EFAIL;
		}
	} else {
		end->step = gf_graph_step(g);
		end->items = gf_graph_items(g);
		end->seconds = gf_graph_seconds(g);
		end->reason = gf_stop_reason_name(why);
	}
	gf_graph_destroy(g);
	/* a run that ended well has proven itself; one that did not leaves the
	 * record of the run it continued, unless a checkpoint of its own
	 * already replaced it */
	gf_rundir_finish(o, rank, rc == 0);
	return rc;
}
