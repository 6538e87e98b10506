/* The CPU backend's peak FLOP/s (the peak_flops op): the rate of its own
 * SGEMM (gf_cpu_gemm: single-threaded OpenBLAS calls split over the
 * instance's team, what every convolution and linear layer here runs on),
 * the denominator of a CPU run's MFU.
 *
 * Measured once per CPU model and thread count, in well under a second: a
 * 512 x N x 512 product (N = 64 per thread, at least 512) repeated for
 * 0.15 s after a warm-up, 0.5 s when other work has the cores; the fastest
 * call counts, so a moment of load from elsewhere does not lower it. Cached
 * in the file sgemm-peak-<threads>t of the cache folder ($GANFLOW_CACHE,
 * else $XDG_CACHE_HOME/ganflow, else $HOME/.cache/ganflow), which says what
 * it measured, how much of its cores' time the process had meanwhile
 * (share: its CPU time over threads x the wall time) and its CRC-32C:
 *
 *   ganflow sgemm peak 1
 *   cpu Intel(R) Xeon(R) ...
 *   threads 2
 *   flop_s 9.512345e+10
 *   share 0.994
 *   crc32c 1a2b3c4d
 *
 * It is believed only when all of it holds: the CRC, this CPU's model, this
 * thread count, a finite rate between 1 MFLOP/s and 10 PFLOP/s, and a share
 * of at least 3/4. Otherwise the run measures again and rewrites it (a
 * temporary file renamed over it, so a concurrent reader never sees half a
 * file): a damaged file, another machine's (a shared home folder), one
 * measured on busy cores (whose low figure serves its own run, and the
 * runs after it until one measures on idle cores, each keeping the highest
 * figure so far). A process measures a thread count once (later calls and
 * other instances take its figure). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <ganflow/crc32c.h>
#include <ganflow/err.h>

#include "cpu.h"

#define MEMO 8
#define BUSY 0.75   /* a measurement whose process had less of its cores' time is not reused */

/* What this process found so far, per (threads, cache file). */
static struct {
	int threads;
	char path[512];
	double flop_s;
	char what[256];
} memo[MEMO];
static int nmemo;
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the CPU's model ---- */

/* "model name" of /proc/cpuinfo (x86), or its ARM / POWER equivalents,
 * else the machine name; printable characters only. */
static void cpu_model(char *out, size_t size)
{
	static const char *const keys[] = { "model name", "Hardware", "cpu model", "cpu", NULL };
	char line[512];
	out[0] = '\0';
	FILE *f = fopen("/proc/cpuinfo", "r");
	for (int k = 0; f && keys[k] && !out[0]; k++) {
		rewind(f);
		size_t kl = strlen(keys[k]);
		while (fgets(line, sizeof(line), f)) {
			char *colon = strchr(line, ':');
			if (strncmp(line, keys[k], kl) || !colon || strspn(line + kl, " \t") != (size_t)(colon - line - (long)kl))
				continue;
			const char *v = colon + 1 + strspn(colon + 1, " \t");
			snprintf(out, size, "%s", v);
			break;
		}
	}
	if (f)
		fclose(f);
	if (!out[0]) {
		struct utsname u;
		snprintf(out, size, "%s", uname(&u) == 0 ? u.machine : "unknown");
	}
	size_t n = strlen(out);
	while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
		out[--n] = '\0';
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 32 || (unsigned char)*p > 126)
			*p = '?';
}

/* ---- the cache file ---- */

/* The cache folder (created), or 0 when there is none to use. */
static int cache_dir(char *out, size_t size)
{
	const char *d = getenv("GANFLOW_CACHE"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	char parent[512] = "";
	if (d && *d)
		snprintf(out, size, "%s", d);
	else if (x && *x && x[0] == '/')
		snprintf(parent, sizeof(parent), "%s", x);
	else if (h && *h)
		snprintf(parent, sizeof(parent), "%s/.cache", h);
	else
		return 0;
	if (parent[0]) {
		mkdir(parent, 0755);
		if ((size_t)snprintf(out, size, "%s/ganflow", parent) >= size)
			return 0;
	}
	return mkdir(out, 0755) == 0 || errno == EEXIST;
}

/* The file's text for a measurement (the CRC line last). */
static int cache_text(char *buf, size_t size, const char *model, int threads, double flop_s, double share)
{
	int n = snprintf(buf, size, "ganflow sgemm peak 1\ncpu %s\nthreads %d\nflop_s %.6e\nshare %.3f\n", model,
	                 threads, flop_s, share);
	if (n < 0 || (size_t)n >= size)
		return -1;
	uint32_t crc = gf_crc32c(0, buf, (size_t)n);
	int m = snprintf(buf + n, size - (size_t)n, "crc32c %08x\n", (unsigned)crc);
	return m < 0 || (size_t)(n + m) >= size ? -1 : n + m;
}

/* The figure in file `path`, when it is whole, about this CPU and thread
 * count, and measured on idle cores; else 0 (why: its reason), with
 * *busy the figure of a whole file measured on busy cores (else 0). */
static int cache_read(const char *path, const char *model, int threads, double *flop_s, double *busy,
                      const char **why)
{
	*busy = 0;
	char buf[1024], want[1024];
	FILE *f = fopen(path, "r");
	if (!f) {
		*why = "none yet";
		return 0;
	}
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* the figures are read back from the text, then the whole text
	 * rebuilt from them must be the file, byte for byte: CRC, model,
	 * thread count */
	const char *p = strstr(buf, "\nflop_s "), *q = strstr(buf, "\nshare ");
	double v = p ? strtod(p + 8, NULL) : NAN, share = q ? strtod(q + 7, NULL) : NAN;
	if (!(isfinite(v) && v >= 1e6 && v <= 1e16 && isfinite(share))) {
		*why = "unreadable";
		return 0;
	}
	int len = cache_text(want, sizeof(want), model, threads, v, share);
	if (len < 0 || (size_t)len != n || memcmp(want, buf, n)) {
		/* tell a foreign file (another CPU's) from a damaged one */
		const char *c = strstr(buf, "\ncpu "), *e = c ? strchr(c + 5, '\n') : NULL;
		int same_cpu = e && (size_t)(e - c - 5) == strlen(model) && !strncmp(c + 5, model, strlen(model));
		*why = same_cpu ? "damaged" : "made on another CPU";
		return 0;
	}
	if (share < BUSY) {
		*why = "measured while the cores were busy";
		*busy = v;
		return 0;
	}
	*flop_s = v;
	return 1;
}

static void cache_write(const char *path, const char *model, int threads, double flop_s, double share)
{
	char buf[1024], tmp[600];
	int n = cache_text(buf, sizeof(buf), model, threads, flop_s, share);
	if (n < 0 || (size_t)snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid()) >= sizeof(tmp))
		return;
	FILE *f = fopen(tmp, "w");
	if (!f)
		return;
	int ok = fwrite(buf, 1, (size_t)n, f) == (size_t)n;
	ok &= fclose(f) == 0;
	if (!ok || rename(tmp, path) != 0)
		unlink(tmp);
}

/* ---- the measurement ---- */

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The fastest call's rate, and *share: the process's CPU time over the
 * wall time of `threads` threads while it measured (near 1 on an idle
 * machine; well under it when other work had the cores). */
static int measure(gf_backend *be, double *flop_s, double *share)
{
	const int m = 512, k = 512;
	int n = 64 * be->threads;
	if (n < 512)
		n = 512;
	if (n > 8192)
		n = 8192;
	float *a = malloc((size_t)m * k * sizeof(float)), *b = malloc((size_t)k * n * sizeof(float)),
	      *c = malloc((size_t)m * n * sizeof(float));
	int rc = 0;
	if (!a || !b || !c) {
		rc = gf_seterr(-ENOMEM, "cpu backend: out of memory measuring its SGEMM");
		goto out;
	}
	for (size_t i = 0; i < (size_t)m * k; i++)
		a[i] = (float)(i % 7) * 0.125f - 0.375f;
	for (size_t i = 0; i < (size_t)k * n; i++)
		b[i] = (float)(i % 5) * 0.25f - 0.5f;
	double best = 0, t0 = now_s(), work = 2.0 * m * n * k, c0 = 0, w0 = 0;
	*share = 0;
	/* a warm-up (the team wakes, pages are touched), then timed calls for
	 * 0.15 s; on busy cores for up to 0.5 s, more chances of a call that
	 * had them all */
	for (int it = 0; it < 1000 && !rc; it++) {
		if (it == 1) {
			c0 = cpu_s();
			w0 = now_s();
		}
		double s = now_s();
		rc = gf_cpu_gemm(be, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
		double e = now_s();
		if (it > 0 && e > s && work / (e - s) > best)
			best = work / (e - s);
		if (it > 0 && e > w0)
			*share = (cpu_s() - c0) / ((e - w0) * be->threads);
		if (it >= 3 && e - t0 >= (*share < BUSY ? 0.5 : 0.15))
			break;
	}
	*flop_s = best;
	if (!rc && !(best > 0))
		rc = gf_seterr(GF_EUNSUPPORTED, "cpu backend: its SGEMM could not be timed");
out:
	free(a);
	free(b);
	free(c);
	return rc;
}

int gf_cpu_peak_flops(gf_backend *be, double *flop_s, char *what, size_t size)
{
	char dir[400], path[512] = "", model[256];
	int threads = be->threads;
	if (cache_dir(dir, sizeof(dir)))
		snprintf(path, sizeof(path), "%s/sgemm-peak-%dt", dir, threads);
	pthread_mutex_lock(&memo_lock);
	for (int i = 0; i < nmemo; i++)
		if (memo[i].threads == threads && !strcmp(memo[i].path, path)) {
			*flop_s = memo[i].flop_s;
			snprintf(what, size, "%s", memo[i].what);
			pthread_mutex_unlock(&memo_lock);
			return 0;
		}
	/* under the lock: two stages opening at once measure once, and never
	 * against each other */
	cpu_model(model, sizeof(model));
	const char *why = "no cache folder";
	double v = 0;
	char w[256];
	int rc = 0;
	double share = 0, busy = 0;
	if (path[0] && cache_read(path, model, threads, &v, &busy, &why)) {
		snprintf(w, sizeof(w), "SGEMM, %d threads, measured before (%s)", threads, path);
	} else if (!(rc = measure(be, &v, &share))) {
		/* cores busy with other work give a low figure: this run uses it
		 * (or a busy run's before, when higher: the fastest call is the
		 * closest to the peak), the file says so and the next run
		 * measures again */
		if (busy > v)
			v = busy;
		if (path[0])
			cache_write(path, model, threads, v, share);
		snprintf(w, sizeof(w), "SGEMM, %d threads, measured now (cache %s: %s)%s", threads, path[0] ? path : "none",
		         why, share < BUSY ? "; the cores were busy with other work, to be measured again" : "");
	}
	if (!rc) {
		*flop_s = v;
		snprintf(what, size, "%s", w);
		if (nmemo < MEMO) {
			memo[nmemo].threads = threads;
			snprintf(memo[nmemo].path, sizeof(memo[nmemo].path), "%s", path);
			memo[nmemo].flop_s = v;
			snprintf(memo[nmemo].what, sizeof(memo[nmemo].what), "%s", w);
			nmemo++;
		}
	}
	pthread_mutex_unlock(&memo_lock);
	return rc;
}
