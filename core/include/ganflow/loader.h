/* ganflow stage loader: finding stage .so files and reading their descriptors.
 *
 * A stage named NAME is the file NAME.so in the first directory of the
 * search path that has one:
 *   1. every directory of GANFLOW_STAGE_PATH (colon-separated), in order;
 *   2. the build tree's stages/ directory (when running from a build);
 *   3. <libdir>/ganflow/stages next to the libganflow.so in use (an installed
 *      tree, wherever it was installed to);
 *   4. the install prefix configured at build time.
 * A name containing '/' is a path to a .so and is loaded as is.
 *
 * Before reading anything else, the loader checks that the descriptor
 * starts with this runtime's GF_STAGE_ABI and a size at least
 * sizeof(gf_stage_desc), then that it is well formed (name, run, ports,
 * parameters and their defaults). Loaded stages stay loaded for the life of
 * the process: descriptors returned here never dangle.
 * All functions are thread-safe.
 */
#ifndef GANFLOW_LOADER_H
#define GANFLOW_LOADER_H

#include <stddef.h>

#include <ganflow/stage.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Loads stage `name` (see above). On success *desc points at the stage's
 * descriptor and *path (may be NULL) at the file it came from, both valid
 * for the life of the process. Returns 0, or with a message in err:
 *   GF_ENOTFOUND  "unknown stage 'x' (searched: dir1, dir2, ...)"
 *   GF_EABI       wrong ABI version or size, no `ganflow_stage` symbol,
 *                 or a malformed descriptor (the message names the file)
 *   -ENOEXEC      dlopen failed (the message has dlerror()). */
int gf_stage_load(const char *name, const gf_stage_desc **desc, const char **path, char *err, size_t errsize);

/* As gf_stage_load for one given file. */
int gf_stage_load_file(const char *file, const gf_stage_desc **desc, char *err, size_t errsize);

/* Checks a descriptor's shape (non-NULL name/create/run, ports with names
 * and kinds, parameters with valid types and parseable defaults,
 * GF_STAGE_WORKERS stages with exactly one input and one output).
 * `what` names it in messages (a file). Returns 0 or GF_EABI. */
int gf_stage_check_desc(const gf_stage_desc *desc, const char *what, char *err, size_t errsize);

/* Writes the search path as "dir1:dir2:..." (directories that do not exist
 * included) into buf. Returns the number of directories. */
int gf_stage_search_path(char *buf, size_t size);

/* Calls fn for every NAME.so found on the search path, first occurrence of
 * each name only, sorted by name within each directory. desc is NULL when
 * the file failed to load, with the reason in err. Stops early and returns
 * fn's value when it returns non-zero; returns 0 otherwise. */
int gf_stage_foreach(int (*fn)(void *ud, const char *name, const char *path, const gf_stage_desc *desc,
                               const char *err),
                     void *ud);

#ifdef __cplusplus
}
#endif
#endif
