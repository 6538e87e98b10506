/* Finding and loading stage .so files. See <ganflow/loader.h>. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <ganflow/err.h>
#include <ganflow/loader.h>
#include <ganflow/params.h>

#include "../base/plugin_path.h"

/* ---- loaded libraries (never unloaded) ---- */

struct lib {
	char *path;
	const gf_stage_desc *desc;
	struct lib *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct lib *libs;

/* ---- search path ---- */

/* GANFLOW_STAGE_PATH, the build tree, beside the library in use (only
 * where that is an installed tree), the configured prefix. */
static int search_path(gf_plugin_path *pp)
{
	char self[PATH_MAX];
	const char *fixed[3] = { GF_STAGE_BUILD_DIR, NULL, GF_STAGE_INSTALL_DIR };
	if (gf_plugin_dir_beside_lib("ganflow/stages", self, sizeof(self)) == 0)
		fixed[1] = self;
	return gf_plugin_path_init(pp, "GANFLOW_STAGE_PATH", fixed, 3);
}

int gf_stage_search_path(char *buf, size_t size)
{
	gf_plugin_path pp;
	search_path(&pp);
	gf_plugin_path_format(&pp, ":", buf, size);
	int n = (int)pp.n;
	gf_plugin_path_free(&pp);
	return n;
}

/* ---- descriptor checks ---- */

static int check_ports(const gf_port_desc *ports, uint32_t n, const char *dir, const char *what, char *err,
                       size_t errsize)
{
	if (n && !ports) {
		snprintf(err, errsize, "%s: descriptor declares %u %s but no %s array", what, n, dir, dir);
		return GF_EABI;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (!ports[i].name || !ports[i].name[0] || !ports[i].kind || !ports[i].kind[0]) {
			snprintf(err, errsize, "%s: %s port %u has no name or no kind", what, dir, i);
			return GF_EABI;
		}
		for (uint32_t j = 0; j < i; j++) {
			if (strcmp(ports[i].name, ports[j].name) == 0) {
				snprintf(err, errsize, "%s: two %s ports named '%s'", what, dir, ports[i].name);
				return GF_EABI;
			}
		}
	}
	return 0;
}

int gf_stage_check_desc(const gf_stage_desc *d, const char *what, char *err, size_t errsize)
{
	if (d->abi != GF_STAGE_ABI) {
		snprintf(err, errsize, "%s: stage ABI version %u, but this runtime speaks version %u (rebuild the stage against this ganflow)",
		         what, d->abi, GF_STAGE_ABI);
		return GF_EABI;
	}
	if (d->size < sizeof(gf_stage_desc)) {
		snprintf(err, errsize, "%s: stage descriptor is %u bytes, this runtime expects at least %zu (rebuild the stage)",
		         what, d->size, sizeof(gf_stage_desc));
		return GF_EABI;
	}
	if (!d->name || !d->name[0] || !d->create || !d->run) {
		snprintf(err, errsize, "%s: stage descriptor lacks a name, create() or run()", what);
		return GF_EABI;
	}
	int rc = check_ports(d->inputs, d->ninputs, "input", what, err, errsize);
	if (!rc)
		rc = check_ports(d->outputs, d->noutputs, "output", what, err, errsize);
	if (rc)
		return rc;
	if ((d->flags & GF_STAGE_WORKERS) && (d->ninputs != 1 || d->noutputs != 1)) {
		snprintf(err, errsize, "%s: stage '%s' declares GF_STAGE_WORKERS but has %u inputs and %u outputs (needs exactly 1 and 1)",
		         what, d->name, d->ninputs, d->noutputs);
		return GF_EABI;
	}
	if (d->nparams && !d->params) {
		snprintf(err, errsize, "%s: descriptor declares %u parameters but no array", what, d->nparams);
		return GF_EABI;
	}
	for (uint32_t i = 0; i < d->nparams; i++) {
		const gf_param_desc *p = &d->params[i];
		if (!p->name || !p->name[0] || p->type < GF_PARAM_INT || p->type > GF_PARAM_ANY) {
			snprintf(err, errsize, "%s: parameter %u has no name or an unknown type", what, i);
			return GF_EABI;
		}
		if (!strcmp(p->name, "name") || !strcmp(p->name, "workers") || !strcmp(p->name, "rank")) {
			snprintf(err, errsize, "%s: parameter '%s' is reserved for the runtime", what, p->name);
			return GF_EABI;
		}
		char perr[512];
		if (gf_param_check_desc(p, perr, sizeof(perr))) {
			snprintf(err, errsize, "%s: %s", what, perr);
			return GF_EABI;
		}
	}
	return 0;
}

/* ---- loading ---- */

/* Loads file; lock held. */
static int load_locked(const char *file, const gf_stage_desc **desc, char *err, size_t errsize)
{
	char real[PATH_MAX];
	if (!realpath(file, real)) {
		int e = errno;
		snprintf(err, errsize, "%s: %s", file, strerror(e));
		return e == ENOENT ? GF_ENOTFOUND : -e;
	}
	for (struct lib *l = libs; l; l = l->next) {
		if (strcmp(l->path, real) == 0) {
			*desc = l->desc;
			return 0;
		}
	}
	void *h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errsize, "cannot load %s: %s", real, dlerror());
		return -ENOEXEC;
	}
	const gf_stage_desc *d = dlsym(h, GF_STAGE_SYMBOL);
	if (!d) {
		snprintf(err, errsize, "%s: no '%s' descriptor (not a ganflow stage, or built without GF_STAGE_EXPORT)",
		         real, GF_STAGE_SYMBOL);
		dlclose(h);
		return GF_EABI;
	}
	int rc = gf_stage_check_desc(d, real, err, errsize);
	if (rc) {
		dlclose(h);
		return rc;
	}
	struct lib *l = malloc(sizeof(*l));
	char *p = strdup(real);
	if (!l || !p) {
		free(l);
		free(p);
		snprintf(err, errsize, "out of memory");
		return -ENOMEM;
	}
	l->path = p;
	l->desc = d;
	l->next = libs;
	libs = l;
	*desc = d;
	return 0;
}

int gf_stage_load_file(const char *file, const gf_stage_desc **desc, char *err, size_t errsize)
{
	pthread_mutex_lock(&lock);
	int rc = load_locked(file, desc, err, errsize);
	pthread_mutex_unlock(&lock);
	return rc;
}

static const char *lib_path(const gf_stage_desc *d)
{
	for (struct lib *l = libs; l; l = l->next)
		if (l->desc == d)
			return l->path;
	return NULL;
}

int gf_stage_load(const char *name, const gf_stage_desc **desc, const char **path, char *err, size_t errsize)
{
	*desc = NULL;
	if (path)
		*path = NULL;
	if (!name || !name[0]) {
		snprintf(err, errsize, "empty stage name");
		return GF_ENOTFOUND;
	}
	int rc = GF_ENOTFOUND;
	pthread_mutex_lock(&lock);
	if (strchr(name, '/')) {
		rc = load_locked(name, desc, err, errsize);
		goto out;
	}
	gf_plugin_path pp;
	if (search_path(&pp)) {
		gf_plugin_path_free(&pp);
		snprintf(err, errsize, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	char file[PATH_MAX], so[NAME_MAX + 1];
	int n = snprintf(so, sizeof(so), "%s.so", name);
	if (n > 0 && (size_t)n < sizeof(so) && gf_plugin_path_find(&pp, so, file, sizeof(file)) == 0)
		rc = load_locked(file, desc, err, errsize);
	if (rc == GF_ENOTFOUND) {
		char dirs[4096];
		gf_plugin_path_format(&pp, ", ", dirs, sizeof(dirs));
		snprintf(err, errsize, "unknown stage '%s' (searched: %s; set GANFLOW_STAGE_PATH to add directories)",
		         name, dirs);
	}
	gf_plugin_path_free(&pp);
out:
	if (rc == 0 && path)
		*path = lib_path(*desc);
	pthread_mutex_unlock(&lock);
	return rc;
}

/* ---- listing ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int gf_stage_foreach(int (*fn)(void *ud, const char *name, const char *path, const gf_stage_desc *desc,
                               const char *err),
                     void *ud)
{
	gf_plugin_path pp;
	if (search_path(&pp)) {
		gf_plugin_path_free(&pp);
		return -ENOMEM;
	}
	char **seen = NULL;
	size_t nseen = 0, capseen = 0;
	int rc = 0;
	for (size_t i = 0; i < pp.n && !rc; i++) {
		DIR *dir = opendir(pp.dirs[i]);
		if (!dir)
			continue;
		char **names = NULL;
		size_t nn = 0, cap = 0;
		struct dirent *e;
		while ((e = readdir(dir))) {
			size_t len = strlen(e->d_name);
			if (len < 4 || strcmp(e->d_name + len - 3, ".so") != 0)
				continue;
			if (nn == cap) {
				cap = cap ? cap * 2 : 16;
				char **nnames = realloc(names, cap * sizeof(*names));
				if (!nnames)
					break;
				names = nnames;
			}
			names[nn++] = strndup(e->d_name, len - 3);
		}
		closedir(dir);
		if (nn)
			qsort(names, nn, sizeof(*names), cmp_str);
		for (size_t k = 0; k < nn; k++) {
			int dup = 0;
			for (size_t s = 0; s < nseen; s++)
				if (strcmp(seen[s], names[k]) == 0)
					dup = 1;
			if (!dup && !rc) {
				char file[PATH_MAX], err[1024];
				const gf_stage_desc *d = NULL;
				snprintf(file, sizeof(file), "%s/%s.so", pp.dirs[i], names[k]);
				err[0] = '\0';
				if (gf_stage_load_file(file, &d, err, sizeof(err)))
					d = NULL;
				rc = fn(ud, names[k], file, d, err);
				if (nseen == capseen) {
					capseen = capseen ? capseen * 2 : 32;
					char **ns = realloc(seen, capseen * sizeof(*seen));
					if (ns)
						seen = ns;
				}
				if (nseen < capseen)
					seen[nseen++] = names[k];
				else
					free(names[k]);
			} else {
				free(names[k]);
			}
		}
		free(names);
	}
	for (size_t s = 0; s < nseen; s++)
		free(seen[s]);
	free(seen);
	gf_plugin_path_free(&pp);
	return rc;
}
