/* Internal: what the functions of the `ganflow` Lua module do once lua.c
 * has turned their Lua arguments into C values: split a gf.stage table
 * into the runtime's keys and the stage's parameters, check a run before
 * anything is created, and run this rank's graph. No Lua here: every
 * failure comes back as a message in err, which lua.c raises at the
 * script line that called.
 */
#ifndef GF_PIPELINE_H
#define GF_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include <ganflow/graph.h>
#include <ganflow/value.h>

#include "../dist/placement.h"
#include "args.h"
#include "rundir.h"

/* gf.stage "NAME" { ... }: moves the stage's parameters of all (a map)
 * into *params (a new map, the caller's) and reads the runtime's keys:
 * name (a string, "" when absent), workers (default 1; "auto" and
 * max_workers become GF_WORKERS_AUTO or GF_WORKERS_AUTO_MAX(m)) and rank
 * (default -1: every rank). Returns 0, or -1 with err naming the stage and the key
 * (*params then holds nothing to free). */
int gf_pipeline_stage_keys(const char *stage, const gf_value *all, gf_value *params, char *name, size_t namesize,
                           int *workers, int *rank, char *err, size_t errsize);

/* gf.run, after every rank compared its declarations and the options
 * were read into *o: every command-line key was read by the script (see
 * args.h), resume names a checkpoint (o->resume is rewritten to the
 * file), the backend is auto, cpu or cuda, and the whole pipeline and
 * this rank's part of it validate, so a graph that cannot run leaves no
 * run directory behind. Returns 0, or -1 with err set. */
int gf_pipeline_check(gf_placement *pl, gf_run_opts *o, const gf_args *args, char *err, size_t errsize);

/* How a run ended. */
typedef struct gf_pipeline_end {
	int64_t step, items;
	double seconds;
	const char *reason;   /* gf_stop_reason_name, or "nothing to run" (static) */
	int signal;           /* the run stopped on a request: the signal (SIGINT when none arrived) */
} gf_pipeline_end;

/* Runs this rank's graph g (destroyed here) with the options o in the
 * run directory o->dir, the Ctrl-C handlers installed (signals.h); a
 * rank where no stage is placed only warns. Once every stage is created
 * (a resumed checkpoint loaded), rank 0 writes the run's record (script,
 * the arguments args: gf_rundir_record), and when the run ends puts a
 * record that replaces an earlier one in its place or drops it
 * (gf_rundir_finish). Returns 0 with *end filled (a run that reached its
 * end), GF_EGRAPH (the graph does not validate: an error of the script),
 * GF_EFAIL (a stage failed, or the record could not be written) or
 * GF_ESTOP (stopped by a request: end->signal), with the message in err
 * ("interrupted" for a graceful stop). */
int gf_pipeline_run(gf_graph *g, const gf_run_opts *o, const char *script, const gf_args *args, int rank, int world,
                    gf_pipeline_end *end, char *err, size_t errsize);

#endif
