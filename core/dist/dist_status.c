/* A failed distributed run must fail the job: under Open MPI with
 * --enable-recovery (which lets the surviving ranks report a dead one,
 * docs/dist.md) mpirun returns 0 whatever its ranks' exit statuses, even
 * after MPI_Abort. A rank about to exit with a failure there asks mpirun
 * itself to end the job: mpirun, or the orted daemon that started the rank
 * on another node, is found among the process's ancestors (/proc) and
 * sent SIGTERM, on which mpirun ends the job with status 1. See
 * gf_dist_fail_job in <ganflow/dist.h>.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <ganflow/dist.h>
#include <ganflow/log.h>

/* Parent pid and command name of pid from /proc: 0, or -1. */
static int proc_info(pid_t pid, pid_t *ppid, char *comm, size_t size)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* pid (comm) state ppid ...: comm may hold spaces and parentheses */
	char *open = strchr(buf, '('), *close = strrchr(buf, ')');
	if (!open || !close || close < open)
		return -1;
	size_t len = (size_t)(close - open - 1);
	snprintf(comm, size, "%.*s", (int)(len < size ? len : size - 1), open + 1);
	int pp;
	char state;
	if (sscanf(close + 1, " %c %d", &state, &pp) != 2)
		return -1;
	*ppid = (pid_t)pp;
	return 0;
}

static int is_launcher(const char *comm)
{
	static const char *const names[] = { "mpirun", "mpiexec", "orterun", "orted", "prterun", "prted" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(comm, names[i]))
			return 1;
	return 0;
}

int gf_dist_fail_job(double wait_s)
{
	const char *rec = getenv("OMPI_MCA_orte_enable_recovery");
	const char *off = getenv("GANFLOW_FAIL_JOB");
	if (!rec || strcmp(rec, "1") || gf_dist_world() < 2 || (off && !strcmp(off, "0")))
		return 0;
	pid_t pid = getppid(), ppid;
	char comm[64];
	for (int depth = 0; pid > 1 && depth < 8; depth++) {
		if (proc_info(pid, &ppid, comm, sizeof(comm)))
			break;
		if (is_launcher(comm)) {
			gf_log(GF_LOG_ERROR,
			       "rank %d: Open MPI ignores exit statuses under --enable-recovery: ending the job through %s "
			       "(pid %d) in %.0f s so that its status is non-zero",
			       gf_dist_rank(), comm, (int)pid, wait_s);
			/* ranks stuck in the same collective report the same loss meanwhile */
			struct timespec ts = { (time_t)wait_s, (long)((wait_s - (double)(time_t)wait_s) * 1e9) };
			nanosleep(&ts, NULL);
			return kill(pid, SIGTERM) == 0;
		}
		pid = ppid;
	}
	gf_log(GF_LOG_WARN, "rank %d: --enable-recovery is on but mpirun was not found among this process's parents: "
	                    "the job's exit status may be 0 although this rank failed",
	       gf_dist_rank());
	return 0;
}
