/* The run directory of a pipeline run and the checkpoint a run resumes
 * from. See rundir.h.
 *
 * A run directory holds what the stages write (checkpoints/, metrics,
 * samples) and, from rank 0, a copy of the script (pipeline.lua) and the
 * effective arguments (args.txt): `ganflow run DIR/pipeline.lua` with the
 * lines of args.txt repeats the run. That record is written only once the
 * run is known to start (every stage created, a resumed checkpoint loaded)
 * and, where it would replace the record of the run being continued, it
 * waits in DIR/.next/ until the new run's first checkpoint
 * (<ganflow/ckpt.h>): a resume that fails leaves the run as it was.
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

/* 1 when the texts a and b give the same value (numbers compared as such:
 * lr=2e-4 and lr=0.0002 are one value). */
static int same_text(const char *a, const char *b)
{
	char *ea, *eb;
	double x = strtod(a, &ea), y = strtod(b, &eb);
	if (ea != a && !*ea && eb != b && !*eb)
		return x == y;
	return !strcmp(a, b);
}

/* "k old -> new, ..." for every argument of the command line (but resume
 * and dir) that args.txt gave another value or none. */
static void changed_args(const gf_args *args, const gf_run_arg *saved, int n, char *out, size_t size)
{
	out[0] = '\0';
	for (int i = 0; i < args->n; i++) {
		const gf_run_arg *a = &args->a[i];
		if (!strcmp(a->key, "resume") || !strcmp(a->key, "dir"))
			continue;
		const char *was = NULL;
		for (int j = 0; j < n && !was; j++)
			if (saved[j].key && !strcmp(saved[j].key, a->key))
				was = saved[j].val;
		if (was && same_text(was, a->val))
			continue;
		size_t len = strlen(out);
		snprintf(out + len, size - len, "%s%s %s -> %s", len ? ", " : "", a->key, was ? was : "(not given)", a->val);
	}
}

int gf_rundir_check_steps(const gf_run_opts *o, char *err, size_t errsize)
{
	gf_ckpt *c;
	if (o->steps <= 0 || gf_ckpt_open(&c, o->resume))
		return 0; /* no target; a file that does not open fails in the stages, naming it */
	int64_t at = gf_ckpt_step(c);
	gf_ckpt_close(c);
	if (at < 0 || o->steps > at)
		return 0;
	snprintf(err, errsize,
	         "resume: %s was written at step %lld and steps=%lld: nothing to run (give steps above %lld, or "
	         "steps=0 to run to the end of the data)",
	         o->resume, (long long)at, (long long)o->steps, (long long)at);
	return -1;
}

int gf_rundir_resume_in_place(gf_args *args, int rank, char *err, size_t errsize)
{
	gf_run_arg *res = gf_args_find(args, "resume"), *saved;
	char restored[1024] = "", changed[1024];
	int n, rc;
	if (!res || gf_args_find(args, "dir") || (rc = gf_rundir_read_args(res->val, &saved, &n)) == 0)
		return 0;
	const char *run_dir = res->val; /* the string stays put when args->a moves */
	if (rc > 0)
		changed_args(args, saved, n, changed, sizeof(changed));
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
	if (rank == 0) {
		gf_log(GF_LOG_INFO, "resume: continuing the run in %s; restored from its args.txt: %s", run_dir,
		       restored[0] ? restored : "(nothing: the command line gives every argument)");
		if (changed[0]) /* args.txt records them once the run has written a checkpoint */
			gf_log(GF_LOG_INFO, "resume: changed from %s/args.txt: %s", run_dir, changed);
	}
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

/* data (n bytes) as the file dir/name, written with write(2) under a
 * hidden temporary name and renamed into place: never a half-written
 * file, and a full disk reported as such. Returns 0 or -errno, the
 * temporary file then removed. */
static int write_file(const char *dir, const char *name, const char *data, size_t n)
{
	char path[4400], tmp[4500];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp.%ld", dir, name, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0)
		return -errno;
	int rc = 0;
	while (n > 0) {
		ssize_t k = write(fd, data, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = k < 0 ? -errno : -EIO;
			break;
		}
		data += k;
		n -= (size_t)k;
	}
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

/* The whole file path into *out (malloc'ed, the caller frees), *n bytes. */
static int read_file(const char *path, char **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return -errno;
	size_t cap = 0;
	char buf[65536];
	size_t k;
	int rc = 0;
	while ((k = fread(buf, 1, sizeof(buf), f)) > 0) {
		char *grown = *n + k > cap ? realloc(*out, cap = 2 * (*n + k)) : *out;
		if (!grown) {
			rc = -ENOMEM;
			break;
		}
		*out = grown;
		memcpy(*out + *n, buf, k);
		*n += k;
	}
	if (!rc && ferror(f))
		rc = -EIO;
	fclose(f);
	if (rc) {
		free(*out);
		*out = NULL;
	}
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

/* Removes the record a killed run left waiting in DIR/.next: the lock
 * says no run is alive here, and its record never replaced the last one. */
static void remove_next(const char *dir)
{
	char next[4200], path[4600];
	snprintf(next, sizeof(next), "%s/" GF_RUN_NEXT, dir);
	DIR *d = opendir(next);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(path, sizeof(path), "%s/%s", next, e->d_name);
			unlink(path);
		}
	closedir(d);
	rmdir(next);
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

int gf_rundir_prepare(const gf_run_opts *o, int rank, int *lock_fd, char *err, size_t errsize)
{
	char failed[4096];
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
	remove_next(o->dir);
	return 0;
}

/* args.txt: the effective run options, then the arguments of args that
 * are not run options. Returns the text (malloc'ed) or NULL. */
static char *args_text(const gf_run_opts *o, const char *script, const gf_args *args, size_t *n)
{
	char *text = NULL;
	FILE *f = open_memstream(&text, n);
	if (!f)
		return NULL;
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
		free(text);
		return NULL;
	}
	return text;
}

int gf_rundir_record(const gf_run_opts *o, int rank, const char *script, const gf_args *args, char *err,
                     size_t errsize)
{
	if (rank != 0)
		return 0;
	char where[4200], path[4300];
	struct stat st;
	snprintf(path, sizeof(path), "%s/args.txt", o->dir);
	int replaces = !stat(path, &st);
	snprintf(path, sizeof(path), "%s/pipeline.lua", o->dir);
	replaces |= !stat(path, &st);
	/* the record of the run this one continues stays until this one has
	 * written a checkpoint (gf_ckpt_commit_record) */
	snprintf(where, sizeof(where), replaces ? "%s/" GF_RUN_NEXT : "%s", o->dir);
	if (replaces && mkdir(where, 0777) && errno != EEXIST) {
		snprintf(err, errsize, "cannot create '%s': %s", where, strerror(errno));
		return -1;
	}
	char *data = NULL;
	size_t n = 0;
	int rc = 0;
	const char *name = "pipeline.lua";
	if (script && (rc = read_file(script, &data, &n))) {
		snprintf(err, errsize, "cannot read '%s' to copy it into the run directory: %s", script, strerror(-rc));
		if (replaces)
			remove_next(o->dir);
		return -1;
	}
	if (script)
		rc = write_file(where, name, data, n);
	free(data);
	if (!rc) {
		name = "args.txt";
		data = args_text(o, script, args, &n);
		rc = data ? write_file(where, name, data, n) : -ENOMEM;
		free(data);
	}
	if (rc) {
		snprintf(err, errsize, "cannot write '%s/%s' into the run directory: %s", where, name, strerror(-rc));
		if (replaces)
			remove_next(o->dir);
		else if (!strcmp(name, "args.txt")) /* all of the record or none */
			unlink(path);
		return -1;
	}
	return 0;
}

void gf_rundir_finish(const gf_run_opts *o, int rank, int ok)
{
	if (rank != 0)
		return;
	if (!ok) {
		remove_next(o->dir); /* the record of the run it continued stays */
		return;
	}
	if (gf_ckpt_commit_record(o->dir))
		gf_log(GF_LOG_WARN, "the run's record (pipeline.lua, args.txt) is not in place: %s", gf_errmsg());
}

int gf_rundir_open(gf_run_opts *o, const char *script, int rank, int world, int *lock_fd, char *err,
                   size_t errsize)
{
	if (!o->dir[0]) {
		/* one run directory for all ranks: rank 0's name */
		gf_rundir_default(script ? script : "pipeline", o->dir, sizeof(o->dir));
		if (world > 1 && gf_dist_bcast_str(o->dir, sizeof(o->dir), 0)) {
			snprintf(err, errsize, "%s", gf_errmsg());
			return -1;
		}
	}
	return gf_rundir_prepare(o, rank, lock_fd, err, errsize);
}
