/* SIGINT and SIGTERM during a graph run: stop requests to the graph.
 * See signals.h. */
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ganflow/graph.h>

#include "signals.h"

static _Atomic(gf_graph *) sig_graph;
static atomic_int sig_count;
static atomic_int sig_last;

/* Handler of SIGINT and SIGTERM while a graph runs: the first asks for a
 * graceful stop, the second for a hard stop, the third exits at once.
 * Only lock-free atomics, gf_graph_request_stop (async-signal-safe) and
 * write/_exit. Default seq_cst atomics: signals are rare. */
static void on_signal(int sig)
{
	int n = atomic_fetch_add(&sig_count, 1) + 1;
	atomic_store(&sig_last, sig);
	gf_graph *g = atomic_load(&sig_graph);
	if (n >= 3 || !g) {
		static const char msg[] = "\nganflow: interrupted\n";
		ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
		(void)w;
		_exit(128 + sig);
	}
	gf_graph_request_stop(g, n >= 2);
}

/* ---- Open MPI's way of ending a job ----
 *
 * mpirun does not forward Ctrl-C: it ends the job by sending each rank
 * SIGCONT, then SIGTERM odls_base_sigkill_timeout seconds later (1 by
 * default), then SIGKILL as long again. Ranks run in process groups of
 * their own, so the terminal's SIGINT never reaches them. A SIGCONT that
 * does not follow a stop of ours (SIGTSTP, which mpirun forwards for
 * Ctrl-Z) is therefore the first sign of the end, and starts the graceful
 * stop at once: a second more to agree on a step and flush. */

static atomic_int sig_tstp; /* stopped by SIGTSTP: the next SIGCONT resumes */
static struct sigaction sa_tstp;

static void on_tstp(int sig)
{
	(void)sig;
	atomic_store(&sig_tstp, 1);
	/* stop as the default action would; pending until we return */
	signal(SIGTSTP, SIG_DFL);
	raise(SIGTSTP);
}

static void on_cont(int sig)
{
	(void)sig;
	if (atomic_exchange(&sig_tstp, 0)) {
		sigaction(SIGTSTP, &sa_tstp, NULL); /* resumed after Ctrl-Z */
		return;
	}
	gf_graph *g = atomic_load(&sig_graph);
	if (g && atomic_load(&sig_count) == 0) {
		atomic_store(&sig_last, SIGTERM); /* what follows it; the run ends as terminated */
		gf_graph_request_stop(g, 0);
	}
}

/* 1 when this process is a rank of an Open MPI job of several ranks and
 * GANFLOW_SIGCONT_STOP is not 0. */
static int under_open_mpi(void)
{
	const char *w = getenv("OMPI_COMM_WORLD_SIZE"), *off = getenv("GANFLOW_SIGCONT_STOP");
	return w && atoi(w) > 1 && !(off && !strcmp(off, "0"));
}

int gf_signals_run_graph(gf_graph *g, const gf_run_info *info, unsigned flags, int *sig)
{
	struct sigaction sa, sc, old_int, old_term, old_cont, old_tstp;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	atomic_store(&sig_count, 0);
	atomic_store(&sig_last, 0);
	atomic_store(&sig_tstp, 0);
	atomic_store(&sig_graph, g);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	int ompi = under_open_mpi();
	if (ompi) {
		memset(&sc, 0, sizeof(sc));
		sc.sa_handler = on_cont;
		sigemptyset(&sc.sa_mask);
		memset(&sa_tstp, 0, sizeof(sa_tstp));
		sa_tstp.sa_handler = on_tstp;
		sigemptyset(&sa_tstp.sa_mask);
		sigaction(SIGCONT, &sc, &old_cont);
		sigaction(SIGTSTP, &sa_tstp, &old_tstp);
	}
	int rc = gf_graph_run(g, info, flags);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	if (ompi) {
		sigaction(SIGCONT, &old_cont, NULL);
		sigaction(SIGTSTP, &old_tstp, NULL);
	}
	atomic_store(&sig_graph, NULL);
	*sig = atomic_load(&sig_last);
	return rc;
}
