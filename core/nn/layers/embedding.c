/* embedding: a learned vector per class label, PyTorch's
 * nn.Embedding(classes, dim) with the weight (classes, dim).
 *
 *   {"embedding", classes, dim, init = ..., init_gain = 1, sn = false}
 *
 * Reads the i32 labels (its input defaults to them: GF_LK_LABELS) and sets
 * the network's class count. Backend embedding_forward /
 * embedding_backward (scatter in index order, deterministic); labels have
 * no gradient. Initialised N(0, 1) as PyTorch; init = "msr": the table is
 * the weight of nn.Linear(classes, dim, bias = False) on the one-hot label
 * (R3GAN's class embeddings), fan_in = classes: N(0, init_gain^2 /
 * classes). sn = true: spectral_norm(nn.Embedding(...)) (sn.c). */
#include <math.h>

#include "sn.h"

struct embedding_cfg {
	int classes, dim;
	struct gf_sn sn;
};
LAYER_CFG_FITS(struct embedding_cfg);

static int embedding_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct embedding_cfg *c = LAYER_CFG(struct embedding_cfg, l);
	int rc;
	if ((rc = gf_layer_arg_int(a, 0, NULL, 0, 1, &c->classes)) || (rc = gf_layer_arg_int(a, 1, NULL, 0, 1, &c->dim)) ||
	    (rc = gf_sn_parse(a, &c->sn)))
		return rc;
	return 0;
}

static int embedding_shapes(gf_layer_net *net, struct layer *l)
{
	struct embedding_cfg *c = LAYER_CFG(struct embedding_cfg, l);
	if (!layer_in(net, l)->is_label)
		return gf_layer_err(GF_ESHAPE, l, "expects the labels as input (input = \"label\")");
	if (net->classes && net->classes != c->classes)
		return gf_layer_err(GF_ESHAPE, l, "has %d classes but the network has %d", c->classes, net->classes);
	net->classes = c->classes;
	gf_layer_set_shape(layer_out(net, l), 1, (int64_t[]){ c->dim });
	gf_layer_param(l, gf_sn_weight_name(&c->sn), 2, (int64_t[]){ c->classes, c->dim });
	return gf_sn_shapes(net, l, &c->sn, 1, c->classes, c->dim);
}

static int embedding_init(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host)
{
	const struct embedding_cfg *c = LAYER_CCFG(struct embedding_cfg, l);
	float std = l->init == INIT_MSR ? (float)(l->init_gain / sqrt((double)c->classes)) : 1.0f;
	gf_rng_normal(rng, host, l->param[0].n, 0.0f, std);
	int rc = gf_layer_upload(net, l, 0, host);
	return rc ? rc : gf_sn_init(net, l, &c->sn, rng, host);
}

static int embedding_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	const struct embedding_cfg *c = LAYER_CCFG(struct embedding_cfg, l);
	const float *w;
	int rc = gf_sn_weight(net, l, &c->sn, mode, &w);
	return rc ? rc
	          : net->be->ops->embedding_forward(net->be, layer_out(net, l)->data, w,
	                                            (const int32_t *)(void *)layer_in(net, l)->data, B, c->dim, c->classes);
}

static int embedding_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *g)
{
	const struct embedding_cfg *c = LAYER_CCFG(struct embedding_cfg, l);
	if (!g->dw)
		return 0;
	int acc, rc;
	float *dw = gf_sn_dweight(net, l, &c->sn, g, &acc);
	if ((rc = net->be->ops->embedding_backward(net->be, dw, layer_out(net, l)->grad,
	                                           (const int32_t *)(void *)layer_in(net, l)->data, B, c->dim, c->classes,
	                                           acc)))
		return rc;
	return gf_sn_backward(net, l, &c->sn, g);
}

const gf_layer_kind gf_layer_embedding = {
	.name = "embedding",
	.aliases = (const char *const[]){ "embed", NULL },
	.min_pos = 2,
	.max_pos = 2,
	.keys = { "init", "init_gain", "sn" },
	.flags = GF_LK_LABELS,
	.parse = embedding_parse,
	.shapes = embedding_shapes,
	.init = embedding_init,
	.forward = embedding_forward,
	.backward = embedding_backward,
};
