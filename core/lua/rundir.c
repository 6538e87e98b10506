/* The run directory of a pipeline run and the checkpoint a run resumes
 * from. See rundir.h.
 *
 * A run directory holds what the stages write (checkpoints/, metrics,
 * samples) and, from rank 0, a copy of the script (pipeline.lua) and the
 * effective arguments (args.txt): `ganflow run DIR/pipeline.lua` with the
 * lines of args.txt repeats the run.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ganflow/ckpt.h>
#include <ganflow/dist.h>
#include <ganflow/err.h>
#include <ganflow/log.h>

#include "rundir.h"

const char *const gf_run_keys[GF_NRUN_KEYS] = { "steps",  "seed",  "dir",   "backend",         "threads",
	                                        "resume", "grace", "quiet", "checkpoint_every",
	                                        "stall",  "stall_stop", "force" };

/* ---- resume ---- */

int gf_rundir_resolve_resume(char *path, size_t size, char *err, size_t errsize)
{
	char file[4800];
	if (gf_ckpt_resolve(path, file, sizeof(file)) || gf_ckpt_check_format(file)) {
		snprintf(err, errsize, "resume: %s", gf_errmsg());
		return -1;
	}
	if (strlen(file) >= size) {
		snprintf(err, errsize, "resume: path too long: %s", file);
		return -1;
	}
	memcpy(path, file, strlen(file) + 1);
	return 0;
}

int gf_rundir_resume_in_place(gf_args *args, int rank, char *err, size_t errsize)
{
	gf_run_arg *res = gf_args_find(args, "resume"), *saved;
	char restored[1024] = "";
	int n, rc;
	if (!res || gf_args_find(args, "dir") || (rc = gf_rundir_read_args(res->val, &saved, &n)) == 0)
		return 0;
	const char *run_dir = res->val; /* the string stays put when args->a moves */
	char *dir = rc < 0 ? NULL : strdup("dir"), *val = dir ? strdup(run_dir) : NULL;
	if (!val || gf_args_add(args, dir, val)) { /* the run directory itself */
		if (!val)
			free(dir);
		gf_rundir_args_free(saved, n);
		return snprintf(err, errsize, "resume: out of memory"), -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		gf_run_arg *s = &saved[i];
		if (!strcmp(s->key, "dir") || !strcmp(s->key, "resume") || gf_args_find(args, s->key))
			continue; /* the command line wins */
		size_t len = strlen(restored);
		snprintf(restored + len, sizeof(restored) - len, "%s%s=%s", len ? " " : "", s->key, s->val);
		rc = gf_args_add(args, s->key, s->val); /* ownership moves */
		*s = (gf_run_arg){ 0 };
		if (rc) {
			gf_rundir_args_free(saved, n);
			return snprintf(err, errsize, "resume: out of memory"), -ENOMEM;
		}
	}
	gf_rundir_args_free(saved, n);
	if (rank == 0)
		gf_log(GF_LOG_INFO, "resume: continuing the run in %s; restored from its args.txt: %s", run_dir,
		       restored[0] ? restored : "(nothing: the command line gives every argument)");
	return 0;
}

/* ---- the directory ---- */

int gf_rundir_read_args(const char *dir, gf_run_arg **out, int *n)
{
	char path[4200], line[8192];
	*out = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "%s/args.txt", dir);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	int rc = 1;
	while (rc == 1 && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = '\0';
		char *eq = strchr(line, '=');
		if (line[0] == '#' || !eq || eq == line)
			continue; /* the heading comment */
		*eq = '\0';
		gf_run_arg *a = realloc(*out, (size_t)(*n + 1) * sizeof(*a));
		char *key = strdup(line), *val = strdup(eq + 1);
		if (a)
			*out = a;
		if (!a || !key || !val) {
			free(key);
			free(val);
			rc = -ENOMEM;
			break;
		}
		(*out)[(*n)++] = (gf_run_arg){ key, val, 0, 0 };
	}
	fclose(f);
	if (rc < 0) {
		gf_rundir_args_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

void gf_rundir_args_free(gf_run_arg *a, int n)
{
	for (int i = 0; i < n; i++) {
		free(a[i].key);
		free(a[i].val);
	}
	free(a);
}

void gf_rundir_default(const char *script, char *out, size_t size)
{
	const char *base = strrchr(script, '/');
	base = base ? base + 1 : script;
	char name[256];
	snprintf(name, sizeof(name), "%s", base);
	char *dot = strrchr(name, '.');
	if (dot && !strcmp(dot, ".lua"))
		*dot = '\0';
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	char stamp[32];
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	snprintf(out, size, "runs/%s-%s", name, stamp);
}

/* mkdir -p; returns 0 or -errno with the failing prefix in failed. */
static int mkdirs(const char *path, char *failed, size_t size)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path);
	size_t len = strlen(buf);
	for (size_t i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		char c = buf[i];
		buf[i] = '\0';
		if (mkdir(buf, 0777) && errno != EEXIST) {
			int e = errno;
			snprintf(failed, size, "%s", buf);
			return -e;
		}
		struct stat st;
		if (stat(buf, &st) || !S_ISDIR(st.st_mode)) {
			snprintf(failed, size, "%s", buf);
			return -ENOTDIR;
		}
		buf[i] = c;
	}
	if (access(path, W_OK)) {
		int e = errno;
		snprintf(failed, size, "%s", path);
		return -e;
	}
	return 0;
}

static int copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb");
	if (!in)
		return -errno;
	FILE *out = fopen(to, "wb");
	if (!out) {
		int e = errno;
		fclose(in);
		return -e;
	}
	char buf[65536];
	size_t n;
	int rc = 0;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		if (fwrite(buf, 1, n, out) != n) {
			rc = -EIO;
			break;
		}
	if (ferror(in))
		rc = -EIO;
	fclose(in);
	if (fclose(out) && !rc)
		rc = -errno;
	return rc;
}

static int is_run_key(const char *key)
{
	for (size_t k = 0; k < GF_NRUN_KEYS; k++)
		if (!strcmp(key, gf_run_keys[k]))
			return 1;
	return 0;
}

/* ---- one run per directory ---- */

/* Takes DIR/.lock (flock, held until *fd is closed: the kernel drops it
 * when the process dies, so a killed run never leaves it behind) and
 * writes our pid into it. */
static int lock_dir(const char *dir, int *fd, char *err, size_t errsize)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/.lock", dir);
	int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (f < 0) {
		snprintf(err, errsize, "cannot create '%s': %s", path, strerror(errno));
		return -1;
	}
	if (flock(f, LOCK_EX | LOCK_NB)) {
		char pid[32] = "";
		ssize_t n = pread(f, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		snprintf(err, errsize, "run directory '%s' is in use by another run (process %s): give another dir=",
		         dir, pid[0] ? pid : "?");
		close(f);
		return -1;
	}
	char pid[32];
	int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(f, 0) || pwrite(f, pid, (size_t)len, 0) != len) {
		snprintf(err, errsize, "cannot write '%s': %s", path, strerror(errno));
		close(f);
		return -1;
	}
	*fd = f;
	return 0;
}

/* 1 when path lies inside dir (both resolved). */
static int inside(const char *path, const char *dir)
{
	char a[PATH_MAX], b[PATH_MAX];
	if (!realpath(path, a) || !realpath(dir, b))
		return 0;
	size_t n = strlen(b);
	return !strncmp(a, b, n) && a[n] == '/';
}

/* The first entry of dir other than our lock, or "" when it is empty. */
static void first_entry(const char *dir, char *out, size_t size)
{
	out[0] = '\0';
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, ".lock")) {
			snprintf(out, size, "%s", e->d_name);
			break;
		}
	closedir(d);
}

/* Removes checkpoints/ *.tmp.PID: the lock says no writer is alive here. */
static void remove_partial(const char *dir)
{
	char cdir[4200], path[4600];
	snprintf(cdir, sizeof(cdir), "%s/checkpoints", dir);
	DIR *d = opendir(cdir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strstr(e->d_name, ".tmp."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", cdir, e->d_name);
		if (unlink(path) == 0)
			gf_log(GF_LOG_INFO, "removed '%s': a partial checkpoint left by a writer that was killed", path);
	}
	closedir(d);
}

int gf_rundir_prepare(const gf_run_opts *o, int rank, const char *script, const gf_args *args, int *lock_fd,
                      char *err, size_t errsize)
{
	char failed[4096], path[4200];
	*lock_fd = -1;
	int rc = mkdirs(o->dir, failed, sizeof(failed));
	if (rc) {
		snprintf(err, errsize, "cannot create run directory '%s': %s (at '%s')", o->dir, strerror(-rc), failed);
		return -1;
	}
	if (rank != 0)
		return 0; /* rank 0 guards the directory, records the script and the arguments */
	if (lock_dir(o->dir, lock_fd, err, errsize))
		return -1;
	char entry[256];
	first_entry(o->dir, entry, sizeof(entry));
	if (entry[0] && !o->force && !(o->resume[0] && inside(o->resume, o->dir))) {
		snprintf(err, errsize,
		         "run directory '%s' already holds a run ('%s'...): give another dir=, resume=%s to continue "
		         "that run, or force=1 to run into it anyway",
		         o->dir, entry, o->dir);
		close(*lock_fd);
		*lock_fd = -1;
		return -1;
	}
	remove_partial(o->dir);
	if (script) {
		snprintf(path, sizeof(path), "%s/pipeline.lua", o->dir);
		if ((rc = copy_file(script, path))) {
			snprintf(err, errsize, "cannot write '%s' into the run directory: %s", path, strerror(-rc));
			return -1;
		}
	}
	snprintf(path, sizeof(path), "%s/args.txt", o->dir);
	FILE *f = fopen(path, "w");
	if (!f) {
		snprintf(err, errsize, "cannot write '%s' into the run directory: %s", path, strerror(errno));
		return -1;
	}
	fprintf(f, "# effective arguments of this run: ganflow run %s followed by these lines\n", script ? script : "-");
	fprintf(f, "steps=%lld\nseed=%lld\ndir=%s\nbackend=%s\nthreads=%lld\ncheckpoint_every=%lld\n",
	        (long long)o->steps, (long long)o->seed, o->dir, o->backend, (long long)o->threads,
	        (long long)o->checkpoint_every);
	if (o->resume[0])
		fprintf(f, "resume=%s\n", o->resume);
	for (int i = 0; i < args->n; i++)
		if (!is_run_key(args->a[i].key))
			fprintf(f, "%s=%s\n", args->a[i].key, args->a[i].val);
	if (fclose(f)) {
		snprintf(err, errsize, "cannot write '%s': %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int gf_rundir_open(gf_run_opts *o, const char *script, int rank, int world, const gf_args *args, int *lock_fd,
                   char *err, size_t errsize)
{
	if (!o->dir[0]) {
		/* one run directory for all ranks: rank 0's name */
		gf_rundir_default(script ? script : "pipeline", o->dir, sizeof(o->dir));
		if (world > 1 && gf_dist_bcast_str(o->dir, sizeof(o->dir), 0)) {
			snprintf(err, errsize, "%s", gf_errmsg());
			return -1;
		}
	}
	return gf_rundir_prepare(o, rank, script, args, lock_fd, err, errsize);
}
