/* Internal: Ctrl-C and SIGTERM while a pipeline's graph runs.
 *
 * The first SIGINT or SIGTERM asks the graph for a graceful stop (sources
 * stop, everything in flight drains, flush hooks run), the second for a
 * hard stop, the third exits the process at once. `ganflow run` then exits
 * 130 or 143 (core/cli/cmd_run.c).
 */
#ifndef GF_SIGNALS_H
#define GF_SIGNALS_H

#include <ganflow/graph.h>

/* gf_graph_run(g, info, flags) with the handlers above installed for
 * SIGINT and SIGTERM (the previous ones are restored afterwards). Returns
 * what gf_graph_run returns; *sig receives the last signal that arrived
 * during the run, or 0. One graph at a time per process. */
int gf_signals_run_graph(gf_graph *g, const gf_run_info *info, unsigned flags, int *sig);

#endif
