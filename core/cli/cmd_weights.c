/* `ganflow weights import FILE.pth OUT.safetensors [net=inception]`: a
 * PyTorch state dict mapped onto a ganflow network, written as a ganflow
 * checkpoint the evaluator loads like its own classifier (docs/eval.md).
 *
 * The only network so far is the FID Inception-v3
 * (luaconf/backbones/inception.lua) and the file pytorch-fid's
 * pt_inception-2015-12-05-6726825d.pth. Python only unpickles
 * (python/ganflow/pth2st.py turns the pickle into a plain safetensors
 * file beside OUT); every check is here: each parameter and batchnorm
 * buffer of the network must be in the file under the same name with the
 * same shape, and the file must hold nothing else (BatchNorm's
 * num_batches_tracked counters aside). The first tensor missing, extra or
 * of another shape is named and nothing is written.
 *
 * OUT holds part "inception" (role classifier):
 *   tensors   inception.net.<layer>.<param>   pytorch-fid's names with "/" for the dots
 *                                             inside a layer name: Mixed_6b.branch7x7_2.conv.weight
 *                                             is inception.net.Mixed_6b/branch7x7_2/conv.weight
 *   metadata  inception.role = classifier, inception.table (the layer table as JSON),
 *             inception.input = fid (the evaluator's input pipeline: [0, 255], bilinear
 *             resize to 299 as F.interpolate(align_corners = False), [-1, 1]),
 *             inception.features = pool3, inception.source (the .pth's base name) and
 *             inception.source_hash (gf_hash64 of its bytes, hex) */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ganflow/err.h>
#include <ganflow/evalstats.h>
#include <ganflow/log.h>
#include <ganflow/lua.h>
#include <ganflow/nn.h>
#include <ganflow/safetensors.h>
#include <ganflow/value.h>

#include "cmd.h"

#define PART "inception"

static int usage(void)
{
	fprintf(stderr, "usage: ganflow weights import FILE.pth OUT.safetensors\n"
	                "  maps pytorch-fid's Inception state dict (pt_inception-2015-12-05-6726825d.pth) onto\n"
	                "  luaconf/backbones/inception.lua and writes it as a ganflow checkpoint for\n"
	                "  `ganflow eval ... features=inception weights=OUT.safetensors` (needs python3-torch)\n");
	return 2;
}

static const char *shape_str(int ndim, const int64_t *shape, char *buf, size_t size)
{
	size_t at = 0;
	at += (size_t)snprintf(buf, size, "(");
	for (int i = 0; i < ndim && at < size; i++)
		at += (size_t)snprintf(buf + at, size - at, "%s%" PRId64, i ? ", " : "", shape[i]);
	if (at < size)
		snprintf(buf + at, size - at, ")");
	return buf;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

/* Copies the views of block b from the state dict f into host (the block's
 * host copy), marking the file's entries used. */
static int fill_block(gf_net *net, gf_block b, const gf_st_file *f, const char *src, unsigned char *used, float *host)
{
	size_t nv;
	const gf_view *v = gf_net_views(net, b, &nv);
	for (size_t i = 0; i < nv; i++) {
		gf_tensor t;
		char s1[96], s2[96], name[256];
		snprintf(name, sizeof(name), "%s", v[i].name);
		for (char *p = name; *p; p++)
			*p = *p == '/' ? '.' : *p;   /* layer "Mixed_5b/branch1x1/conv" is module Mixed_5b.branch1x1.conv */
		int rc = gf_st_get(f, name, &t);
		if (rc)
			return gf_seterr(GF_ENOTFOUND, "%s: tensor '%s' is missing (is it pytorch-fid's Inception state dict?)",
			                 src, name);
		int same = t.ndim == v[i].ndim;
		for (int d = 0; same && d < t.ndim; d++)
			same = t.shape[d] == v[i].shape[d];
		if (!same)
			return gf_seterr(GF_ESHAPE, "%s: tensor '%s' has shape %s, the network expects %s", src, name,
			                 shape_str(t.ndim, t.shape, s1, sizeof(s1)), shape_str(v[i].ndim, v[i].shape, s2, sizeof(s2)));
		if (t.dtype != GF_F32)
			return gf_seterr(GF_EPARAM, "%s: tensor '%s' is not floating point", src, name);
		memcpy(host + v[i].offset, t.data, v[i].numel * sizeof(float));
		for (size_t j = 0; j < gf_st_count(f); j++)
			if (!strcmp(gf_st_name(f, j), name))
				used[j] = 1;
	}
	return 0;
}

/* The network from FILE (the unpickled state dict at tmp) into out. */
/* The import's phases on the progress line: unpickling (Python), mapping
 * and checking the tensors, hashing the source, writing OUT. */
enum { PHASES = 4 };

static int import(const char *pth, const char *tmp, const char *out, double start)
{
	gf_value table = { 0 };
	gf_backend *be = NULL;
	gf_net *net = NULL;
	gf_st_file *f = NULL;
	unsigned char *used = NULL;
	float *params = NULL, *buffers = NULL;
	char *json = NULL;
	int rc;
	if ((rc = gf_lua_eval("return require('backbones.inception').fid{}", &table)))
		return gf_seterr(rc, "backbones/inception.lua: %s", gf_errmsg());
	gf_net_opts no = { .max_batch = 1 };
	if ((rc = gf_backend_open("cpu", NULL, &be)) || (rc = gf_net_create(&net, be, &table, &no)))
		goto out;
	if ((rc = gf_st_open(&f, tmp))) {
		rc = gf_seterr(rc, "%s (unpickled): %s", pth, gf_errmsg());
		goto out;
	}
	size_t np, nb, nf = gf_st_count(f);
	gf_net_block(net, GF_PARAMS, &np);
	gf_net_block(net, GF_BUFFERS, &nb);
	used = calloc(nf ? nf : 1, 1);
	params = malloc((np ? np : 1) * sizeof(float));
	buffers = malloc((nb ? nb : 1) * sizeof(float));
	if (!used || !params || !buffers) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = fill_block(net, GF_PARAMS, f, pth, used, params)) ||
	    (rc = fill_block(net, GF_BUFFERS, f, pth, used, buffers)))
		goto out;
	for (size_t j = 0; j < nf; j++) {
		if (!used[j] && !ends_with(gf_st_name(f, j), ".num_batches_tracked")) {
			rc = gf_seterr(GF_EPARAM, "%s: tensor '%s' is not part of the FID Inception network", pth,
			               gf_st_name(f, j));
			goto out;
		}
	}
	if ((rc = gf_net_write(net, GF_PARAMS, params)) || (rc = gf_net_write(net, GF_BUFFERS, buffers)))
		goto out;
	gf_progress_bar("weights import (tensors checked)", 2, PHASES, start);
	uint64_t h = 0;
	if ((rc = gf_hash64_file(pth, GF_HASH64_INIT, &h)) || (rc = gf_value_to_json(&table, &json)))
		goto out;
	char hash[32];
	snprintf(hash, sizeof(hash), "%016" PRIx64, h);
	const char *base = strrchr(pth, '/');
	const char *meta[] = { PART ".role",     "classifier", PART ".table",       json,
		                   PART ".input",    "fid",        PART ".features",    "pool3",
		                   PART ".source",   base ? base + 1 : pth, PART ".source_hash", hash,
		                   NULL };
	gf_progress_bar("weights import (source hashed)", 3, PHASES, start);
	gf_ckpt_part part = { PART ".net", net, NULL };
	rc = gf_ckpt_save(out, &part, 1, 0, NULL, meta);
	if (!rc)
		gf_progress_bar("weights import (written)", PHASES, PHASES, start);
out:
	free(json);
	free(used);
	free(params);
	free(buffers);
	gf_st_close(f);
	gf_net_destroy(net);
	gf_backend_close(be);
	gf_value_free(&table);
	return rc;
}

int gf_cmd_weights(int argc, char **argv)
{
	if (argc != 4 || strcmp(argv[1], "import"))
		return usage();
	const char *pth = argv[2], *out = argv[3];
	if (access(pth, R_OK)) {
		fprintf(stderr, "ganflow weights: cannot read %s: %s\n", pth, strerror(errno));
		return 1;
	}
	size_t len = strlen(out) + 32;
	char *tmp = malloc(len);
	if (!tmp)
		return 1;
	snprintf(tmp, len, "%s.pth2st-%d.tmp", out, (int)getpid());
	char *args[] = { (char *)pth, tmp };
	double start = gf_now();
	gf_progress_bar("weights import (unpickling with python3-torch)", 0, PHASES, start);
	int status = gf_cmd_python("weights", "ganflow.pth2st", "python3-torch", 2, args);
	if (!status)
		gf_progress_bar("weights import (unpickled)", 1, PHASES, start);
	int rc = status ? 1 : import(pth, tmp, out, start);
	gf_progress_done(NULL);
	unlink(tmp);
	free(tmp);
	if (status)
		return 1;
	if (rc) {
		fprintf(stderr, "ganflow weights: %s\n", gf_errmsg());
		return 1;
	}
	printf("%s: FID Inception-v3 from %s\n", out, pth);
	return 0;
}
