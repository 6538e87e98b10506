/* Opening backends: the built-in CPU backend, or a backend .so (the CUDA
 * backend) found on a search path and checked by its descriptor's abi and
 * size before anything else is touched. See <ganflow/nn.h>. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/nn.h>

#include "../base/plugin_path.h"
#include "net_internal.h"

/* Loads the backend file `path` (backend NAME). Returns 0 with *out set
 * or the failure, with its message. */
static int load_so(const char *name, const char *path, const gf_backend_opts *opts, gf_backend **out)
{
	void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl)
		return gf_seterr(GF_ENOBACKEND, "backend %s: cannot load %s: %s", name, path, dlerror());
	const gf_backend_desc *d = dlsym(dl, "ganflow_backend");
	if (!d || d->abi != GF_BACKEND_ABI || d->size < sizeof(gf_backend_desc) || !d->create) {
		dlclose(dl);
		return gf_seterr(GF_EABI, "backend %s: %s has %s (ganflow expects backend ABI %d)", name, path,
		                 d ? "a foreign or old descriptor" : "no ganflow_backend descriptor", GF_BACKEND_ABI);
	}
	gf_backend *be = NULL;
	int rc = d->create(opts, &be);
	if (rc) {
		dlclose(dl);
		return rc;
	}
	/* ops appended to the table since a backend was built are absent from
	 * it (size smaller than ours): callers test GF_BACKEND_HAS */
	if (!be || !be->ops || be->ops->abi != GF_BACKEND_ABI || be->ops->size < GF_BACKEND_OPS_BASE_SIZE) {
		if (be && be->ops && be->ops->destroy)
			be->ops->destroy(be);
		dlclose(dl);
		return gf_seterr(GF_EABI, "backend %s: %s returned ops of another ABI", name, path);
	}
	be->dl = dl;
	*out = be;
	return 0;
}

/* backend_<name>.so from GANFLOW_BACKEND_PATH, the build tree (backends/,
 * or its top for older builds), beside the library in use (an installed
 * tree, wherever its prefix), then the configured install prefix: the
 * first file found is the one loaded (core/base/plugin_path.h). */
static int open_so(const char *name, const gf_backend_opts *opts, gf_backend **out)
{
	char self[PATH_MAX];
	const char *fixed[] = { GF_BACKEND_BUILD_DIR "/backends", GF_BACKEND_BUILD_DIR,
	                        gf_plugin_dir_beside_lib("ganflow/backends", self, sizeof(self)) == 0 ? self : NULL,
	                        GF_BACKEND_INSTALL_DIR "/backends", GF_BACKEND_INSTALL_DIR };
	gf_plugin_path pp;
	if (gf_plugin_path_init(&pp, "GANFLOW_BACKEND_PATH", fixed, sizeof(fixed) / sizeof(fixed[0]))) {
		gf_plugin_path_free(&pp);
		return gf_seterr(-ENOMEM, "backend %s: out of memory", name);
	}
	char file[PATH_MAX], so[NAME_MAX + 1];
	int n = snprintf(so, sizeof(so), "backend_%s.so", name);
	int rc = n > 0 && (size_t)n < sizeof(so) ? gf_plugin_path_find(&pp, so, file, sizeof(file)) : GF_ENOTFOUND;
	gf_plugin_path_free(&pp);
	if (rc == 0)
		return load_so(name, file, opts, out);
	return gf_seterr(GF_ENOBACKEND, "backend %s: no backend_%s.so in GANFLOW_BACKEND_PATH, %s/backends or %s/backends",
	                 name, name, GF_BACKEND_BUILD_DIR, GF_BACKEND_INSTALL_DIR);
}

int gf_backend_open(const char *name, const gf_backend_opts *opts, gf_backend **out)
{
	*out = NULL;
	if (!name || strcmp(name, "cpu") == 0)
		return gf_backend_cpu_create(opts, out);
	if (strcmp(name, "auto") == 0) {
		if (open_so("cuda", opts, out) == 0)
			return 0;
		return gf_backend_cpu_create(opts, out);
	}
	if (strchr(name, '/') || strchr(name, '.'))
		return gf_seterr(GF_ENOBACKEND, "backend '%s': not a backend name", name);
	return open_so(name, opts, out);
}

void gf_backend_close(gf_backend *be)
{
	if (!be)
		return;
	void *dl = be->dl;
	be->ops->destroy(be);
	if (dl)
		dlclose(dl);
}

gf_backend *gf_net_backend(const gf_net *net)
{
	return net->k.be;
}

/* ---- option names ---- */

int gf_precision_parse(const char *s, gf_precision *out)
{
	if (!strcmp(s, "fp32"))
		*out = GF_PREC_FP32;
	else if (!strcmp(s, "bf16"))
		*out = GF_PREC_BF16;
	else if (!strcmp(s, "fp16"))
		*out = GF_PREC_FP16;
	else if (!strcmp(s, "tf32"))
		*out = GF_PREC_TF32;
	else
		return gf_seterr(GF_EPARAM, "precision must be \"fp32\", \"tf32\", \"bf16\" or \"fp16\", not \"%s\"", s);
	return 0;
}

const char *gf_precision_name(gf_precision p)
{
	switch (p) {
	case GF_PREC_FP32: return "fp32";
	case GF_PREC_TF32: return "tf32";
	case GF_PREC_BF16: return "bf16";
	case GF_PREC_FP16: return "fp16";
	}
	return "?";
}

int gf_layout_parse(const char *s, gf_layout_choice *out)
{
	if (!strcmp(s, "auto"))
		*out = GF_LAYOUT_AUTO;
	else if (!strcmp(s, "nchw"))
		*out = GF_LAYOUT_NCHW;
	else if (!strcmp(s, "nhwc"))
		*out = GF_LAYOUT_NHWC;
	else
		return gf_seterr(GF_EPARAM, "layout must be \"auto\", \"nchw\" or \"nhwc\", not \"%s\"", s);
	return 0;
}
