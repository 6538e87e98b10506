/* The out-of-line half of atomics.h: the asymmetric fences (membarrier
 * registration when the library loads, the heavy side of every wake-up)
 * and ThreadSanitizer's fence word. Everything that sleeps or wakes (rings,
 * message pools, the graph, the distributed world) builds on these; they
 * depend on nothing else of the runtime.
 */
#include <linux/membarrier.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "atomics.h"

#ifdef GF_TSAN
atomic_uint gf_tsan_fence_word;
#endif

/* ---- asymmetric fences (see atomics.h) ---- */

atomic_int gf_asym_fences;

__attribute__((constructor)) static void asym_fences_init(void)
{
#ifndef GF_TSAN
	const char *e = getenv("GANFLOW_MEMBARRIER");
	if (e && !strcmp(e, "0"))
		return;
	long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
		return;
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0))
		return;
	/* relaxed: runs when the library loads, before any thread uses it */
	gf_store_relaxed_int(&gf_asym_fences, 1);
#endif
}

void gf_fence_heavy(void)
{
	/* seq_cst fence first: orders this thread's own accesses */
	gf_fence_seq_cst();
#ifndef GF_TSAN
	if (gf_load_relaxed_int(&gf_asym_fences) &&
	    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
		abort(); /* registered, so it cannot fail; a silent lost wake-up would be worse */
#endif
}
