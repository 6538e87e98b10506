/* Internal: the options of a pipeline run and the directory it writes into.
 *
 * gf.run (core/lua/lua.c) reads the options from the script and the command
 * line; this file names them, resolves `resume` to a checkpoint file, and
 * creates the run directory with a copy of the script and the effective
 * arguments, so a run can be repeated from its directory alone. Nothing
 * here touches Lua: every failure comes back as a message naming the path.
 */
#ifndef GF_RUNDIR_H
#define GF_RUNDIR_H

#include <stddef.h>
#include <stdint.h>

#include "args.h"

/* The options of one run (gf.run { ... }, command-line key=value wins). */
typedef struct gf_run_opts {
	int64_t steps;
	int64_t seed;
	int64_t threads;
	int64_t checkpoint_every;
	double grace;
	double stall, stall_stop; /* watchdog limits, 0 = automatic */
	int quiet;
	int force;                /* force=1: run into a directory that holds another run */
	char dir[4096];
	char backend[32];
	char resume[4096];
} gf_run_opts;

/* Their names, as gf.run and the command line spell them. */
#define GF_NRUN_KEYS 12
extern const char *const gf_run_keys[GF_NRUN_KEYS];

/* resume=PATH may name a checkpoint file, a run directory or its
 * checkpoints/ directory: the last two mean the newest checkpoint there
 * (the name in checkpoints/latest, written by the checkpoint stage).
 * Rewrites path (size bytes) to the file. Returns 0, or -1 with err set
 * ("resume: '...': No such file or directory") when there is none. */
int gf_rundir_resolve_resume(char *path, size_t size, char *err, size_t errsize);

/* A resumed run's step target against its checkpoint (o->resume, the
 * resolved file): steps = N at or below the step it was written at leaves
 * nothing to run, and is refused before anything is written. Returns 0,
 * or -1 with err naming the file, its step and steps. */
int gf_rundir_check_steps(const gf_run_opts *o, char *err, size_t errsize);

/* resume=RUN_DIR without dir=: the run continues in RUN_DIR. Adds dir=RUN_DIR
 * to args, and every argument RUN_DIR/args.txt recorded (run options and
 * the pipeline's own) that args lacks (the command line wins); rank 0 logs
 * what was restored, and in one line what the command line changed
 * ("resume: changed from RUN/args.txt: mixing 0 -> 0.9"). A checkpoint file, or a directory without args.txt,
 * changes nothing (a new run directory unless dir= says otherwise).
 * Returns 0, or -ENOMEM with err set. */
int gf_rundir_resume_in_place(gf_args *args, int rank, char *err, size_t errsize);

/* Reads back the key=value lines of DIR/args.txt (as gf_rundir_record
 * wrote them) into *out (n entries, used = 0; each key and val malloc'ed,
 * the array too: gf_rundir_args_free). Returns 1 when dir holds an
 * args.txt, 0 when it does not (*out NULL), or -ENOMEM. */
int gf_rundir_read_args(const char *dir, gf_run_arg **out, int *n);
void gf_rundir_args_free(gf_run_arg *a, int n);

/* Writes the default run directory of script into out:
 * "runs/<script name without .lua>-<YYYYmmdd-HHMMSS>" (local time). */
void gf_rundir_default(const char *script, char *out, size_t size);

/* Creates o->dir (and its parents); rank 0 then locks it for this process
 * (DIR/.lock: a second run into it is refused naming the process that
 * holds it; *lock_fd receives the descriptor to close when the run ends,
 * -1 on other ranks), refuses a directory that already holds files unless
 * o->resume lies inside it (resuming that run) or o->force, and removes
 * what a killed run left: partial checkpoints (checkpoints/ *.tmp.PID) and
 * a record that never took its place (DIR/.next). Writes nothing of the
 * run's own: gf_rundir_record does, once the run is known to start.
 * Returns 0, or -1 with err naming the path that failed. */
int gf_rundir_prepare(const gf_run_opts *o, int rank, int *lock_fd, char *err, size_t errsize);

/* gf.run's directory: o->dir, or when empty the default of script (rank
 * 0's name, sent to every rank of a world), then gf_rundir_prepare.
 * Returns 0, or -1 with err set. */
int gf_rundir_open(gf_run_opts *o, const char *script, int rank, int world, int *lock_fd, char *err,
                   size_t errsize);

/* Rank 0, once every stage of the run was created (a resumed checkpoint
 * loaded): the run's record, a copy of script (may be NULL) as
 * pipeline.lua and args.txt (the effective run options, then the
 * arguments of args that are not run options), each written under a
 * hidden temporary name and renamed into place. Where o->dir holds a
 * record already (the run this one continues), they go to o->dir/.next/
 * and take the old one's place with the run's first checkpoint, or at its
 * end (gf_rundir_finish): <ganflow/ckpt.h>. Other ranks: nothing. Returns
 * 0, or -1 with err naming the file and the cause ("cannot write
 * 'RUN/args.txt' into the run directory: No space left on device"),
 * nothing half-written left behind. */
int gf_rundir_record(const gf_run_opts *o, int rank, const char *script, const gf_args *args, char *err,
                     size_t errsize);

/* Rank 0, when the run has ended: ok (it ended well), a record still
 * waiting in .next takes its place; else it is removed and the record of
 * the run it continued stays as it was. */
void gf_rundir_finish(const gf_run_opts *o, int rank, int ok);

#endif
