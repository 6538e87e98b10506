/* Search paths for the plugins libganflow dlopens: stage .so files
 * (loader.c) and backend .so files (nn/backend.c). See plugin_path.h. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <ganflow/err.h>

#include "plugin_path.h"

/* Appends a copy of the first len bytes of dir unless it is there already. */
static int add_dir(gf_plugin_path *pp, const char *dir, size_t len)
{
	for (size_t i = 0; i < pp->n; i++)
		if (strlen(pp->dirs[i]) == len && memcmp(pp->dirs[i], dir, len) == 0)
			return 0;
	char **dirs = realloc(pp->dirs, (pp->n + 1) * sizeof(*dirs));
	if (!dirs)
		return -ENOMEM;
	pp->dirs = dirs;
	if (!(dirs[pp->n] = strndup(dir, len)))
		return -ENOMEM;
	pp->n++;
	return 0;
}

int gf_plugin_path_init(gf_plugin_path *pp, const char *env, const char *const *fixed, size_t nfixed)
{
	pp->dirs = NULL;
	pp->n = 0;
	const char *p = env ? getenv(env) : NULL;
	while (p && *p) {
		size_t len = strcspn(p, ":");
		if (len && add_dir(pp, p, len))
			return -ENOMEM;
		p += len;
		if (*p == ':')
			p++;
	}
	for (size_t i = 0; i < nfixed; i++)
		if (fixed[i] && add_dir(pp, fixed[i], strlen(fixed[i])))
			return -ENOMEM;
	return 0;
}

void gf_plugin_path_free(gf_plugin_path *pp)
{
	for (size_t i = 0; i < pp->n; i++)
		free(pp->dirs[i]);
	free(pp->dirs);
	pp->dirs = NULL;
	pp->n = 0;
}

int gf_plugin_path_find(const gf_plugin_path *pp, const char *file, char *out, size_t size)
{
	for (size_t i = 0; i < pp->n; i++) {
		struct stat st;
		int n = snprintf(out, size, "%s/%s", pp->dirs[i], file);
		if (n > 0 && (size_t)n < size && stat(out, &st) == 0)
			return 0;
	}
	if (size)
		out[0] = '\0';
	return GF_ENOTFOUND;
}

size_t gf_plugin_path_format(const gf_plugin_path *pp, const char *sep, char *buf, size_t size)
{
	size_t len = 0;
	if (size)
		buf[0] = '\0';
	for (size_t i = 0; i < pp->n; i++) {
		size_t room = len < size ? size - len : 0;
		int n = snprintf(room ? buf + len : NULL, room, "%s%s", i ? sep : "", pp->dirs[i]);
		if (n > 0)
			len += (size_t)n;
	}
	return len;
}

int gf_plugin_dir_beside_lib(const char *sub, char *buf, size_t size)
{
	Dl_info info;
	/* any function of libganflow names the library file */
	if (!dladdr((void *)&gf_plugin_dir_beside_lib, &info) || !info.dli_fname)
		return -1;
	char real[PATH_MAX];
	if (!realpath(info.dli_fname, real))
		return -1;
	char *slash = strrchr(real, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	int n = snprintf(buf, size, "%s/%s", real, sub);
	struct stat st;
	if (n <= 0 || (size_t)n >= size || stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
		return -1;
	return 0;
}
