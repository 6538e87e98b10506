/* Training checkpoints: the one place that knows their layout (file names,
 * `latest`, the parts of the training stages, layer tables, data
 * positions). See <ganflow/ckpt.h>. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ganflow/ckpt.h>
#include <ganflow/err.h>
#include <ganflow/lua.h>
#include <ganflow/safetensors.h>
#include <ganflow/train.h>

/* ---- files of a run ---- */

const char *gf_ckpt_file_name(const char *dir, int64_t step, char *buf, size_t size)
{
	snprintf(buf, size, "%s/ckpt-%08" PRId64 ".safetensors", dir, step);
	return buf;
}

int gf_ckpt_set_latest(const char *dir, const char *file)
{
	char latest[4200], tmp[4300];
	const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
	snprintf(latest, sizeof(latest), "%s/" GF_CKPT_LATEST, dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", latest);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "%s\n", base) < 0 || fflush(f) || fsync(fileno(f)) || fclose(f) || rename(tmp, latest)) {
		int rc = -errno;
		return gf_seterr(rc, "%s: %s", latest, strerror(errno));
	}
	return 0;
}

int gf_ckpt_commit_record(const char *run_dir)
{
	char next[4200], from[4600], to[4600];
	snprintf(next, sizeof(next), "%s/" GF_RUN_NEXT, run_dir);
	DIR *d = opendir(next);
	if (!d)
		return errno == ENOENT ? 0 : gf_seterr(-errno, "%s: %s", next, strerror(errno));
	struct dirent *e;
	int rc = 0;
	while (!rc && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;   /* ".", "..", and the temporary files of a writer */
		snprintf(from, sizeof(from), "%s/%s", next, e->d_name);
		snprintf(to, sizeof(to), "%s/%s", run_dir, e->d_name);
		if (rename(from, to))
			rc = gf_seterr(-errno, "cannot move '%s' to '%s': %s", from, to, strerror(errno));
	}
	closedir(d);
	if (!rc && rmdir(next) && errno != ENOENT)
		rc = gf_seterr(-errno, "%s: %s", next, strerror(errno));
	return rc;
}

const char *gf_ckpt_record_file(const char *run_dir, const char *name, char *buf, size_t size)
{
	snprintf(buf, size, "%s/" GF_RUN_NEXT "/%s", run_dir, name);
	if (access(buf, F_OK))
		snprintf(buf, size, "%s/%s", run_dir, name);
	return buf;
}

int gf_ckpt_resolve(const char *path, char *out, size_t size)
{
	struct stat st;
	if (stat(path, &st))
		return gf_seterr(-errno, "'%s': %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode)) {
		if (strlen(path) >= size)
			return gf_seterr(-ENAMETOOLONG, "path too long: %s", path);
		memmove(out, path, strlen(path) + 1);
		return 0;
	}
	static const char *const where[] = { "%s/" GF_CKPT_DIR "/" GF_CKPT_LATEST, "%s/" GF_CKPT_LATEST };
	for (int i = 0; i < 2; i++) {
		char latest[4200], name[512], file[4800];
		snprintf(latest, sizeof(latest), where[i], path);
		FILE *f = fopen(latest, "r");
		if (!f)
			continue;
		int ok = fgets(name, sizeof(name), f) != NULL;
		fclose(f);
		name[strcspn(name, "\r\n")] = '\0';
		if (!ok || !name[0])
			return gf_seterr(GF_ECORRUPT, "'%s' is empty", latest);
		snprintf(file, sizeof(file), "%.*s/%s", (int)(strrchr(latest, '/') - latest), latest, name);
		if (stat(file, &st))
			return gf_seterr(-errno, "'%s' names '%s': %s", latest, file, strerror(errno));
		if (strlen(file) >= size)
			return gf_seterr(-ENAMETOOLONG, "path too long: %s", file);
		memcpy(out, file, strlen(file) + 1);
		return 0;
	}
	return gf_seterr(GF_ENOTFOUND, "'%s' is a directory without " GF_CKPT_DIR "/" GF_CKPT_LATEST
	                               " (give a checkpoint file)", path);
}

/* ---- formats ---- */

static const char *const formats[] = { GF_CKPT_FORMAT, "ganflow-nn-1" };

/* 0 when the header's "format" is one this version reads; else GF_ECORRUPT
 * naming path, what was found and what is read. */
static int check_format(gf_st_file *f, const char *path)
{
	const char *fmt = gf_st_meta(f, "format");
	for (size_t i = 0; fmt && i < sizeof(formats) / sizeof(formats[0]); i++)
		if (!strcmp(fmt, formats[i]))
			return 0;
	if (!fmt)
		return gf_seterr(GF_ECORRUPT, "%s: no checkpoint format in its metadata (\"format\"): not a ganflow "
		                              "checkpoint; this version reads formats " GF_CKPT_FORMATS, path);
	return gf_seterr(GF_ECORRUPT, "%s: checkpoint format '%.64s' is not one this version reads (%s); it reads "
	                              "formats " GF_CKPT_FORMATS, path, fmt,
	                 !strncmp(fmt, "ganflow-", 8) ? "written by another version of ganflow" : "not a ganflow checkpoint");
}

int gf_ckpt_check_format(const char *path)
{
	gf_st_file *f;
	int rc = gf_st_open(&f, path);
	if (rc)
		return rc;
	rc = check_format(f, path);
	gf_st_close(f);
	return rc;
}

/* ---- reading ---- */

typedef struct part {
	char *name;
	const char *role;       /* the file's metadata */
	int cls;
} part;

struct gf_ckpt {
	gf_st_file *f;
	char *path;
	part *parts;
	int n;
};

int gf_ckpt_open(gf_ckpt **out, const char *path)
{
	*out = NULL;
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return gf_seterr(-EISDIR, "'%s' is a directory: give a checkpoint file or a run directory", path);
	gf_ckpt *c = calloc(1, sizeof(*c));
	if (!c || !(c->path = strdup(path))) {
		free(c);
		return -ENOMEM;
	}
	int rc = gf_st_open(&c->f, path);
	if (!rc)
		rc = check_format(c->f, path);
	if (rc) {
		gf_ckpt_close(c);
		return rc;
	}
	size_t nm = gf_st_meta_count(c->f);
	if (!(c->parts = calloc(nm ? nm : 1, sizeof(*c->parts)))) {
		gf_ckpt_close(c);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nm; i++) {
		const char *key = gf_st_meta_key(c->f, i);
		size_t kl = strlen(key);
		if (kl <= 5 || strcmp(key + kl - 5, ".role"))
			continue;
		part *p = &c->parts[c->n];
		if (!(p->name = strndup(key, kl - 5))) {
			gf_ckpt_close(c);
			return -ENOMEM;
		}
		p->role = gf_st_meta(c->f, key);
		c->n++;
		const char *cls = gf_ckpt_part_meta(c, c->n - 1, "class");
		p->cls = cls ? atoi(cls) : -1;
	}
	*out = c;
	return 0;
}

void gf_ckpt_close(gf_ckpt *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n; i++)
		free(c->parts[i].name);
	free(c->parts);
	gf_st_close(c->f);
	free(c->path);
	free(c);
}

const char *gf_ckpt_path(const gf_ckpt *c)
{
	return c->path;
}

int64_t gf_ckpt_step(const gf_ckpt *c)
{
	const char *s = gf_st_meta(c->f, "step");
	char *end;
	long long v = s ? strtoll(s, &end, 10) : -1;
	return s && end != s && !*end && v >= 0 ? (int64_t)v : -1;
}

int gf_ckpt_nparts(const gf_ckpt *c)
{
	return c->n;
}

const char *gf_ckpt_part_name(const gf_ckpt *c, int i)
{
	return i >= 0 && i < c->n ? c->parts[i].name : NULL;
}

const char *gf_ckpt_part_role(const gf_ckpt *c, int i)
{
	return i >= 0 && i < c->n ? c->parts[i].role : NULL;
}

int gf_ckpt_part_class(const gf_ckpt *c, int i)
{
	return i >= 0 && i < c->n ? c->parts[i].cls : -1;
}

int gf_ckpt_find(const gf_ckpt *c, const char *role)
{
	for (int i = 0; i < c->n; i++)
		if (!strcmp(c->parts[i].role, role))
			return i;
	return -1;
}

const char *gf_ckpt_part_meta(const gf_ckpt *c, int i, const char *key)
{
	char k[512];
	if (i < 0 || i >= c->n)
		return NULL;
	snprintf(k, sizeof(k), "%s.%s", c->parts[i].name, key);
	return gf_st_meta(c->f, k);
}

/* Checkpoints written before the noise layer took StyleGAN2's one strength
 * per layer hold one per channel ((C) tensors) under tables that name no
 * strength: such a layer is read as it was trained, strength = "channel"
 * (docs/nn.md; python/ganflow/torch.py does the same). */
static int old_noise_strengths(const gf_ckpt *c, int i, gf_value *table)
{
	size_t n = gf_value_nargs(table);
	for (size_t k = 0; k < n; k++) {
		gf_value *l = (gf_value *)gf_value_arg(table, k);
		const gf_value *t = gf_value_arg(l, 0), *name = gf_value_get(l, "name");
		if (!t || t->type != GF_VSTR || strcmp(t->u.s, "noise") || gf_value_get(l, "strength"))
			continue;
		char tname[600];
		gf_tensor ts;
		if (name && name->type == GF_VSTR)
			snprintf(tname, sizeof(tname), "%s.net.%s.noise_strength", gf_ckpt_part_name(c, i), name->u.s);
		else
			snprintf(tname, sizeof(tname), "%s.net.%zu.noise_strength", gf_ckpt_part_name(c, i), k);
		if (gf_st_get(c->f, tname, &ts) || gf_tensor_numel(&ts) <= 1)
			continue;
		if (l->type == GF_VLIST) { /* {"noise", C} alone: a map of its positions, to take the key */
			gf_value m = gf_value_map();
			char pos[24];
			int rc = 0;
			for (size_t j = 0; j < gf_value_len(l) && !rc; j++) {
				gf_value v;
				snprintf(pos, sizeof(pos), "%zu", j + 1);
				rc = gf_value_copy(&v, gf_value_at(l, j));
				if (!rc)
					rc = gf_value_set(&m, pos, v);
			}
			gf_value_free(l);
			*l = m;
			if (rc)
				return rc;
		}
		int rc = gf_value_set(l, "strength", gf_value_str("channel"));
		if (rc)
			return rc;
	}
	return 0;
}

int gf_ckpt_table(const gf_ckpt *c, int i, gf_value *table)
{
	*table = gf_value_nil();
	const char *text = gf_ckpt_part_meta(c, i, "table");
	if (!text)
		return gf_seterr(GF_ECORRUPT, "%s: part '%s' (%s) has no layer table (metadata '%s.table')", c->path,
		                 gf_ckpt_part_name(c, i), gf_ckpt_part_role(c, i), gf_ckpt_part_name(c, i));
	int rc = gf_value_from_json(text, table);
	if (rc == 0 && (rc = old_noise_strengths(c, i, table))) {
		gf_value_free(table);
		return gf_seterr(rc, "%s: out of memory", c->path);
	}
	if (rc == 0)
		return 0;
	char why[256];
	snprintf(why, sizeof(why), "%s", gf_errmsg());
	/* checkpoints written before layer tables were JSON hold Lua text: the
	 * one place left where reading a checkpoint needs Lua */
	size_t len = strlen(text) + 16;
	char *code = malloc(len);
	if (!code)
		return -ENOMEM;
	snprintf(code, len, "return %s", text);
	rc = gf_lua_eval(code, table);
	free(code);
	if (rc)
		return gf_seterr(GF_ECORRUPT, "%s: the layer table of '%s' is neither JSON (%s) nor the Lua text of older "
		                              "checkpoints",
		                 c->path, gf_ckpt_part_name(c, i), why);
	if ((rc = old_noise_strengths(c, i, table))) {
		gf_value_free(table);
		return gf_seterr(rc, "%s: out of memory", c->path);
	}
	return 0;
}

int gf_ckpt_has_ema(const gf_ckpt *c, int i)
{
	/* any tensor of the average: one that lacks some of its tensors is a
	 * damaged average, refused naming the tensor (gf_ckpt_net_weights), not
	 * silently replaced by the trained weights (the bridge's rule too) */
	char prefix[512];
	int n = snprintf(prefix, sizeof(prefix), "%s.ema.", gf_ckpt_part_name(c, i));
	for (size_t k = 0; k < gf_st_count(c->f); k++)
		if (!strncmp(gf_st_name(c->f, k), prefix, (size_t)n))
			return 1;
	return 0;
}

int gf_ckpt_net(const gf_ckpt *c, int i, gf_backend *be, int max_batch, gf_net **out)
{
	return gf_ckpt_net_weights(c, i, "net", be, max_batch, out);
}

int gf_ckpt_net_weights(const gf_ckpt *c, int i, const char *which, gf_backend *be, int max_batch, gf_net **out)
{
	gf_value table;
	*out = NULL;
	int rc = gf_ckpt_table(c, i, &table);
	if (rc)
		return rc;
	rc = gf_ckpt_net_weights_table(c, i, which, &table, be, max_batch, out);
	gf_value_free(&table);
	return rc;
}

int gf_ckpt_net_weights_table(const gf_ckpt *c, int i, const char *which, const gf_value *table, gf_backend *be,
                              int max_batch, gf_net **out)
{
	*out = NULL;
	gf_net_opts o = { .max_batch = max_batch };
	int rc = gf_net_create(out, be, table, &o);
	if (rc)
		return gf_seterr(rc, "%s: network of '%s': %s", c->path, gf_ckpt_part_name(c, i), gf_errmsg());
	char prefix[512];
	snprintf(prefix, sizeof(prefix), "%s.%s", gf_ckpt_part_name(c, i), which);
	if ((rc = gf_state_load_net(c->path, prefix, *out, NULL)) == 0 &&
	    (rc = gf_train_check_net(*out, prefix)) == GF_ENONFINITE)
		gf_seterr(rc, "%s: %s: the network '%s' is not finite (a diverged run's checkpoint?)", c->path,
		          gf_errmsg(), gf_ckpt_part_name(c, i));
	if (rc) {
		gf_net_destroy(*out);
		*out = NULL;
		if (rc == GF_ENOTFOUND && !strcmp(which, "ema")) {
			const char *part = gf_ckpt_part_name(c, i);
			return gf_seterr(rc, "%s: the moving average of '%s' (%s.ema.*) is incomplete; ema=0 takes the trained "
			                     "weights (%s.net.*)", gf_errmsg(), part, part, part);
		}
		return gf_seterr(rc, "%s", gf_errmsg());
	}
	return 0;
}

int gf_ckpt_data_pos(const gf_ckpt *c, const char *reader, int64_t pos[2], int *found)
{
	*found = 0;
	for (int i = 0; i < c->n; i++) {
		const char *r = gf_ckpt_part_meta(c, i, "reader");
		if (!r || strcmp(r, reader))
			continue;
		char name[512];
		int64_t v[2], shape[1] = { 2 };
		snprintf(name, sizeof(name), "%s.data_pos", c->parts[i].name);
		int rc = gf_st_read(c->f, name, GF_I64, 1, shape, v);
		if (rc)
			return gf_seterr(rc, "%s: %s", c->path, gf_errmsg());
		pos[0] = v[0];
		pos[1] = v[1];
		*found = 1;
		return 0;
	}
	return 0;
}
