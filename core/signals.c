/* SIGINT and SIGTERM during a graph run: stop requests to the graph.
 * See signals.h. */
#include <signal.h>
#include <stdatomic.h>
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

int gf_signals_run_graph(gf_graph *g, const gf_run_info *info, unsigned flags, int *sig)
{
	struct sigaction sa, old_int, old_term;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	atomic_store(&sig_count, 0);
	atomic_store(&sig_last, 0);
	atomic_store(&sig_graph, g);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	int rc = gf_graph_run(g, info, flags);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	atomic_store(&sig_graph, NULL);
	*sig = atomic_load(&sig_last);
	return rc;
}
