/* Internal: where libganflow looks for the plugins it dlopens.
 *
 * Stages (<ganflow/loader.h>) and backends (gf_backend_open) are found the
 * same way: a plugin file NAME is the first DIR/NAME that exists along a
 * search path made of
 *   1. every directory of an environment variable (GANFLOW_STAGE_PATH,
 *      GANFLOW_BACKEND_PATH; colon-separated, empty entries skipped), in
 *      order;
 *   2. the caller's fixed directories, in order: the build tree, the
 *      directory beside the libganflow.so in use (an installed tree,
 *      wherever it was installed to; see gf_plugin_dir_beside_lib), the
 *      install prefix configured at build time.
 * A directory appears once, at its first place. Directories that do not
 * exist are kept (they are shown in "searched: ..." messages) and simply
 * hold nothing.
 */
#ifndef GF_PLUGIN_PATH_H
#define GF_PLUGIN_PATH_H

#include <stddef.h>

typedef struct gf_plugin_path {
	char **dirs; /* (n) malloc'ed, owned */
	size_t n;
} gf_plugin_path;

/* Builds the search path from getenv(env) (env may be NULL) and fixed
 * (nfixed entries; NULL entries are skipped). Returns 0 or -ENOMEM; *pp is
 * valid (possibly empty) either way and is freed with gf_plugin_path_free. */
int gf_plugin_path_init(gf_plugin_path *pp, const char *env, const char *const *fixed, size_t nfixed);

void gf_plugin_path_free(gf_plugin_path *pp);

/* Finds `file` (a base name: "lmdb_reader.so", "backend_cuda.so"): writes
 * the first existing DIR/file into out (size bytes). Returns 0, or
 * GF_ENOTFOUND when no directory has it (or its path would not fit). */
int gf_plugin_path_find(const gf_plugin_path *pp, const char *file, char *out, size_t size);

/* Writes the directories joined by sep into buf (always NUL-terminated,
 * cut at size). Returns the length the whole text has (snprintf rule). */
size_t gf_plugin_path_format(const gf_plugin_path *pp, const char *sep, char *buf, size_t size);

/* Writes "<dir of the libganflow.so in use>/<sub>" into buf when that
 * directory exists ("ganflow/stages" beside <prefix>/lib/libganflow.so in
 * an installed tree). Returns 0, or -1 when it does not exist or cannot be
 * found. */
int gf_plugin_dir_beside_lib(const char *sub, char *buf, size_t size);

#endif
