/* attention: SAGAN/BigGAN self-attention on an image (C, H, W), BigGAN's
 * Attention(ch) module (BigGAN-PyTorch layers.py):
 *
 *   theta = conv1x1(x) (C/8)   phi = maxpool2(conv1x1(x)) (C/8)   g = maxpool2(conv1x1(x)) (C/2)
 *   beta = softmax over the H*W/4 pooled positions of theta^T phi   (HW, HW/4) per sample
 *   y = x + gamma * conv1x1(g beta^T) (C/2 -> C),   gamma a learned scalar, 0 at init
 *
 *   {"attention", channels, sn = false, init = ..., gamma = 0}
 *
 * (gamma: gamma's starting value; 0 as SAGAN and BigGAN.)
 *
 * No biases (as BigGAN). Parameters theta.weight (C/8, C, 1, 1),
 * phi.weight, g.weight (C/2, C, 1, 1), o.weight (C, C/2, 1, 1) and gamma
 * (a 1-element tensor; PyTorch's is 0-d); with sn = true each conv is
 * spectral_norm(nn.Conv2d(...)): theta.weight_orig, theta.weight_u,
 * theta.weight_v... (sn.c). H and W must be even, C a multiple of 8.
 *
 * The three input convolutions run as one: their weights are consecutive
 * in the parameter block (declared in that order; with sn their w / sigma
 * are copied next to each other), so one batched GEMM against each
 * sample's x gives theta, phi and g together. That result is kept
 * channel-major, (3C/4, B, HW): phi and g of all samples are then one run
 * of (5C/8)*B planes that a single max-pooling call reduces, and their
 * weight gradients one summed batched GEMM. The per-sample products are
 * the backend's gemm_batched; the softmax and the pooling are the existing
 * ops. gamma scales o's weight (w' = gamma w, a 1x1 times 1xn GEMM keeps
 * gamma on the device), and dgamma = <dw', w>, so no (B, C, H, W)
 * temporary is needed for the output or for gamma's gradient. */
#include <math.h>
#include <string.h>

#include "sn.h"

/* The four convolutions, in parameter order. */
enum { TH = 0, PH, GG, OO, NCONV };

struct attn_cfg {
	int c;              /* channels */
	int save, dsave;    /* save slots: forward state | backward scratch */
	float gamma0;       /* gamma's starting value */
	struct gf_sn sn[NCONV];
};
LAYER_CFG_FITS(struct attn_cfg);

static const char *const wname[2][NCONV] = {
	{ "theta.weight", "phi.weight", "g.weight", "o.weight" },
	{ "theta.weight_orig", "phi.weight_orig", "g.weight_orig", "o.weight_orig" },
};
static const char *const uname[NCONV] = { "theta.weight_u", "phi.weight_u", "g.weight_u", "o.weight_u" };
static const char *const vname[NCONV] = { "theta.weight_v", "phi.weight_v", "g.weight_v", "o.weight_v" };

/* ---- sizes ---- */

struct dims {
	int c, c8, c2, cq;   /* C, C/8, C/2, 3C/4 (theta, phi, g stacked) */
	int h, w, n, p;      /* n = H*W positions, p = n/4 pooled */
};

static struct dims dims_of(const gf_layer_net *net, const struct layer *l)
{
	const struct node *in = layer_in(net, l);
	struct dims d;
	d.c = (int)in->shape[0];
	d.c8 = d.c / 8;
	d.c2 = d.c / 2;
	d.cq = d.c8 * 2 + d.c2;
	d.h = (int)in->shape[1];
	d.w = (int)in->shape[2];
	d.n = d.h * d.w;
	d.p = d.n / 4;
	return d;
}

static size_t align16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

/* Forward state (slot save), for a batch of B (max_batch when sizing). */
struct fwd {
	float *wq;      /* (3C/4, C) the stacked weights with sn (else the parameters are used) */
	float *wo;      /* (C, C/2) gamma * o's weight */
	float *qkv;     /* (3C/4, B, N) theta | phi | g */
	float *pool;    /* (5C/8, B, P) pooled phi | g */
	int32_t *idx;   /* (5C/8, B, P) argmax */
	float *beta;    /* (B, N, P) */
	float *o;       /* (C/2, B, N) g beta^T */
};

/* Backward scratch (slot dsave). */
struct bwd {
	float *dwq;     /* (3C/4, C) with sn */
	float *dwo;     /* (C, C/2) gradient of gamma * w_o */
	float *d_o;     /* (C/2, B, N) */
	float *dbeta;   /* (B, N, P); in forward, the logits theta^T phi */
	float *ds;      /* (B, N, P) */
	float *dpool;   /* (5C/8, B, P) */
	float *dqkv;    /* (3C/4, B, N) */
};

static size_t fwd_layout(const struct dims *d, size_t B, float *base, struct fwd *f)
{
	size_t off = 0;
#define TAKE(field, type, count)                                      \
	do {                                                          \
		if (base)                                             \
			f->field = (type *)(void *)(base + off);      \
		off += align16(count);                                \
	} while (0)
	TAKE(wq, float, (size_t)d->cq * d->c);
	TAKE(wo, float, (size_t)d->c * d->c2);
	TAKE(qkv, float, (size_t)d->cq * B * d->n);
	TAKE(pool, float, (size_t)(d->cq - d->c8) * B * d->p);
	TAKE(idx, int32_t, (size_t)(d->cq - d->c8) * B * d->p);
	TAKE(beta, float, B * d->n * d->p);
	TAKE(o, float, (size_t)d->c2 * B * d->n);
#undef TAKE
	return off;
}

static size_t bwd_layout(const struct dims *d, size_t B, float *base, struct bwd *g)
{
	size_t off = 0;
#define TAKE(field, count)                                  \
	do {                                                \
		if (base)                                   \
			g->field = base + off;              \
		off += align16(count);                      \
	} while (0)
	TAKE(dwq, (size_t)d->cq * d->c);
	TAKE(dwo, (size_t)d->c * d->c2);
	TAKE(d_o, (size_t)d->c2 * B * d->n);
	TAKE(dbeta, B * d->n * d->p);
	TAKE(ds, B * d->n * d->p);
	TAKE(dpool, (size_t)(d->cq - d->c8) * B * d->p);
	TAKE(dqkv, (size_t)d->cq * B * d->n);
#undef TAKE
	return off;
}

/* ---- table, shapes, init ---- */

static int attn_parse(gf_layer_net *net, struct layer *l, const gf_layer_args *a)
{
	(void)net;
	struct attn_cfg *c = LAYER_CFG(struct attn_cfg, l);
	int rc;
	if ((rc = gf_layer_arg_int(a, 0, NULL, 0, 1, &c->c)) || (rc = gf_layer_arg_num(a, -1, "gamma", 0.0, &c->gamma0)) ||
	    (rc = gf_sn_parse(a, &c->sn[0])))
		return rc;
	if (c->c % 8)
		return gf_layer_err(GF_EPARAM, l, "channels %d is not a multiple of 8", c->c);
	for (int i = 1; i < NCONV; i++)
		c->sn[i] = c->sn[0];
	return 0;
}

static int attn_shapes(gf_layer_net *net, struct layer *l)
{
	struct attn_cfg *c = LAYER_CFG(struct attn_cfg, l);
	const struct node *in = layer_in(net, l);
	char s[96];
	int rc = gf_layer_expect_image(l, in, c->c);
	if (rc)
		return rc;
	if (in->shape[1] % 2 || in->shape[2] % 2)
		return gf_layer_err(GF_ESHAPE, l, "input %s: height and width must be even (2x2 max-pool)",
		                    gf_layer_shape_str(in, s, sizeof(s)));
	if (!GF_BACKEND_HAS(net->be, gemm_batched))
		return gf_layer_err(GF_EUNSUPPORTED, l, "the %s backend has no gemm_batched op", net->be->ops->name);
	struct dims d = dims_of(net, l);
	gf_layer_set_shape(layer_out(net, l), 3, in->shape);
	const int64_t cout[NCONV] = { d.c8, d.c8, d.c2, d.c }, cin[NCONV] = { d.c, d.c, d.c, d.c2 };
	for (int i = 0; i < NCONV; i++)
		gf_layer_param(l, wname[c->sn[0].on][i], 4, (int64_t[]){ cout[i], cin[i], 1, 1 });
	gf_layer_param(l, "gamma", 1, (int64_t[]){ 1 });
	for (int i = 0; i < NCONV; i++)
		if ((rc = gf_sn_shapes_at(net, l, &c->sn[i], i, uname[i], vname[i], 1, (int)cout[i], (int)cin[i])))
			return rc;
	size_t B = (size_t)net->max_batch;
	c->save = gf_layer_save(l, fwd_layout(&d, B, NULL, NULL));
	c->dsave = gf_layer_save(l, bwd_layout(&d, B, NULL, NULL));
	return 0;
}

static int attn_init(gf_layer_net *net, struct layer *l, gf_rng *rng, float *host)
{
	const struct attn_cfg *c = LAYER_CCFG(struct attn_cfg, l);
	int rc;
	/* each conv as PyTorch's default (or DC-GAN's N(0, 0.02)), in
	 * parameter order, then each conv's u and v; gamma its start (0) */
	for (int i = 0; i < NCONV; i++) {
		size_t n = l->param[i].n;
		double fan_in = (double)l->param[i].shape[1];
		if (l->init == INIT_DCGAN)
			gf_rng_normal(rng, host, n, 0.0f, 0.02f);
		else
			gf_rng_uniform(rng, host, n, (float)(-1.0 / sqrt(fan_in)), (float)(1.0 / sqrt(fan_in)));
		if ((rc = gf_layer_upload(net, l, i, host)))
			return rc;
	}
	if ((rc = net->be->ops->fill(net->be, layer_param(net, l, NCONV), 1, c->gamma0)))
		return rc;
	for (int i = 0; i < NCONV; i++)
		if ((rc = gf_sn_init(net, l, &c->sn[i], rng, host)))
			return rc;
	return 0;
}

/* ---- forward ---- */

#define BGEMM(...) net->be->ops->gemm_batched(net->be, __VA_ARGS__)

static int attn_forward(gf_layer_net *net, struct layer *l, int B, unsigned mode)
{
	const struct attn_cfg *c = LAYER_CCFG(struct attn_cfg, l);
	struct dims d = dims_of(net, l);
	struct fwd f;
	struct bwd b;
	fwd_layout(&d, (size_t)B, l->save[c->save], &f);
	bwd_layout(&d, (size_t)B, l->save[c->dsave], &b);
	const float *x = layer_in(net, l)->data;
	float *y = layer_out(net, l)->data;
	const int64_t bn = (int64_t)B * d.n, bp = (int64_t)B * d.p, np = (int64_t)d.n * d.p, cn = (int64_t)d.c * d.n;
	int rc;

	/* the weights: with sn one power iteration each (training), then
	 * theta | phi | g side by side */
	const float *w[NCONV];
	for (int i = 0; i < NCONV; i++)
		if ((rc = gf_sn_weight(net, l, &c->sn[i], mode, &w[i])))
			return rc;
	const float *wq = w[TH];
	if (c->sn[0].on) {
		size_t off = 0;
		for (int i = TH; i <= GG; i++) {
			size_t n = l->param[i].n;
			if ((rc = net->be->ops->copy(net->be, f.wq + off, w[i], n * sizeof(float), GF_COPY_D2D)))
				return rc;
			off += n;
		}
		wq = f.wq;
	}
	/* w' = gamma * w_o: (1 x 1) times (1 x C*C/2) */
	if ((rc = net->be->ops->gemm(net->be, 0, 0, 1, d.c * d.c2, 1, 1.0f, layer_param(net, l, NCONV), 1, w[OO],
	                             d.c * d.c2, 0.0f, f.wo, d.c * d.c2)))
		return rc;

	/* qkv (3C/4, B, N): qkv_b = wq x_b */
	if ((rc = BGEMM(0, 0, d.cq, d.n, d.c, 1.0f, wq, d.c, 0, x, d.n, cn, 0.0f, f.qkv, (int)bn, d.n, B)))
		return rc;
	/* phi and g: (5C/8)*B planes of (H, W), 2x2 max-pooled */
	gf_pooling_desc pd = { (d.cq - d.c8) * B, 1, d.h, d.w, d.h / 2, d.w / 2, 2, 2, 2, 2, 0, 0, 1, 0 };
	if ((rc = net->be->ops->pooling_forward(net->be, f.pool, f.idx, f.qkv + (size_t)d.c8 * bn, &pd)))
		return rc;
	const float *phi = f.pool, *g = f.pool + (size_t)d.c8 * bp;
	/* beta_b = softmax(theta_b^T phi_b) (N, P); the logits in the backward's scratch */
	float *logits = b.dbeta;
	if ((rc = BGEMM(1, 0, d.n, d.p, d.c8, 1.0f, f.qkv, (int)bn, d.n, phi, (int)bp, d.p, 0.0f, logits, d.p, np, B)) ||
	    (rc = net->be->ops->softmax_forward(net->be, f.beta, logits, B * d.n, d.p)))
		return rc;
	/* o_b = g_b beta_b^T (C/2, N) */
	if ((rc = BGEMM(0, 1, d.c2, d.n, d.p, 1.0f, g, (int)bp, d.p, f.beta, d.p, np, 0.0f, f.o, (int)bn, d.n, B)))
		return rc;
	/* y_b = x_b + w' o_b */
	if ((rc = net->be->ops->copy(net->be, y, x, (size_t)B * cn * sizeof(float), GF_COPY_D2D)))
		return rc;
	return BGEMM(0, 0, d.c, d.n, d.c2, 1.0f, f.wo, d.c2, 0, f.o, (int)bn, d.n, 1.0f, y, d.n, cn, B);
}

/* ---- backward ---- */

static int attn_backward(gf_layer_net *net, struct layer *l, int B, gf_layer_grad *gr)
{
	const struct attn_cfg *c = LAYER_CCFG(struct attn_cfg, l);
	if (!gr->dx && !gr->dw)
		return 0;
	struct dims d = dims_of(net, l);
	struct fwd f;
	struct bwd b;
	fwd_layout(&d, (size_t)B, l->save[c->save], &f);
	bwd_layout(&d, (size_t)B, l->save[c->dsave], &b);
	const float *x = layer_in(net, l)->data, *dy = layer_out(net, l)->grad;
	const int64_t bn = (int64_t)B * d.n, bp = (int64_t)B * d.p, np = (int64_t)d.n * d.p, cn = (int64_t)d.c * d.n;
	const int sn = c->sn[0].on;
	const float *gamma = layer_param(net, l, NCONV);
	const float *wo = gf_sn_used(net, l, &c->sn[OO]);
	const float *wq = sn ? f.wq : layer_param(net, l, TH);
	int rc;

	/* o: do_b = w'^T dy_b; dw' = sum_b dy_b o_b^T, dgamma = <dw', w_o>, dw_o = gamma dw' */
	if ((rc = BGEMM(1, 0, d.c2, d.n, d.c, 1.0f, f.wo, d.c2, 0, dy, d.n, cn, 0.0f, b.d_o, (int)bn, d.n, B)))
		return rc;
	if (gr->dw) {
		int k = d.c * d.c2, acc;
		float *dwo = gf_sn_dweight(net, l, &c->sn[OO], gr, &acc);
		if ((rc = BGEMM(0, 1, d.c, d.c2, d.n, 1.0f, dy, d.n, cn, f.o, (int)bn, d.n, 0.0f, b.dwo, d.c2, 0, B)) ||
		    (rc = net->be->ops->gemm(net->be, 0, 1, 1, 1, k, 1.0f, b.dwo, k, wo, k, gr->acc ? 1.0f : 0.0f,
		                             layer_grad(net, l, NCONV), 1)) ||
		    (rc = net->be->ops->gemm(net->be, 0, 0, 1, k, 1, 1.0f, gamma, 1, b.dwo, k, acc ? 1.0f : 0.0f, dwo, k)) ||
		    (rc = gf_sn_backward(net, l, &c->sn[OO], gr)))
			return rc;
	}
	const float *phi = f.pool, *g = f.pool + (size_t)d.c8 * bp;
	float *dphi = b.dpool, *dg = b.dpool + (size_t)d.c8 * bp;
	/* o_b = g_b beta_b^T: dg_b = do_b beta_b, dbeta_b = do_b^T g_b */
	if ((rc = BGEMM(0, 0, d.c2, d.p, d.n, 1.0f, b.d_o, (int)bn, d.n, f.beta, d.p, np, 0.0f, dg, (int)bp, d.p, B)) ||
	    (rc = BGEMM(1, 0, d.n, d.p, d.c2, 1.0f, b.d_o, (int)bn, d.n, g, (int)bp, d.p, 0.0f, b.dbeta, d.p, np, B)) ||
	    (rc = net->be->ops->softmax_backward(net->be, b.ds, b.dbeta, f.beta, B * d.n, d.p)))
		return rc;
	/* s_b = theta_b^T phi_b: dphi_b = theta_b ds_b, dtheta_b = phi_b ds_b^T */
	if ((rc = BGEMM(0, 0, d.c8, d.p, d.n, 1.0f, f.qkv, (int)bn, d.n, b.ds, d.p, np, 0.0f, dphi, (int)bp, d.p, B)) ||
	    (rc = BGEMM(0, 1, d.c8, d.n, d.p, 1.0f, phi, (int)bp, d.p, b.ds, d.p, np, 0.0f, b.dqkv, (int)bn, d.n, B)))
		return rc;
	gf_pooling_desc pd = { (d.cq - d.c8) * B, 1, d.h, d.w, d.h / 2, d.w / 2, 2, 2, 2, 2, 0, 0, 1, 0 };
	if ((rc = net->be->ops->pooling_backward(net->be, b.dqkv + (size_t)d.c8 * bn, b.dpool, f.idx, &pd)))
		return rc;
	/* the input convs: dx_b = dy_b + wq^T dqkv_b; dwq = sum_b dqkv_b x_b^T */
	if (gr->dx &&
	    ((rc = net->be->ops->copy(net->be, gr->dx, dy, (size_t)B * cn * sizeof(float), GF_COPY_D2D)) ||
	     (rc = BGEMM(1, 0, d.c, d.n, d.cq, 1.0f, wq, d.c, 0, b.dqkv, (int)bn, d.n, 1.0f, gr->dx, d.n, cn, B))))
		return rc;
	if (!gr->dw)
		return 0;
	if (!sn)
		return BGEMM(0, 1, d.cq, d.c, d.n, 1.0f, b.dqkv, (int)bn, d.n, x, d.n, cn, gr->acc ? 1.0f : 0.0f,
		             layer_grad(net, l, TH), d.c, 0, B);
	if ((rc = BGEMM(0, 1, d.cq, d.c, d.n, 1.0f, b.dqkv, (int)bn, d.n, x, d.n, cn, 0.0f, b.dwq, d.c, 0, B)))
		return rc;
	size_t off = 0;
	for (int i = TH; i <= GG; i++) {
		int acc;
		size_t n = l->param[i].n;
		float *dw = gf_sn_dweight(net, l, &c->sn[i], gr, &acc);   /* sn: scratch, overwritten */
		if ((rc = net->be->ops->copy(net->be, dw, b.dwq + off, n * sizeof(float), GF_COPY_D2D)) ||
		    (rc = gf_sn_backward(net, l, &c->sn[i], gr)))
			return rc;
		off += n;
	}
	return 0;
}

static double attn_flops(const gf_layer_net *net, const struct layer *l, int B, int exec)
{
	(void)exec;
	struct dims d = dims_of(net, l);
	double per = (double)d.n * d.c * d.cq + (double)d.n * d.p * d.c8 + (double)d.c2 * d.n * d.p +
	             (double)d.c * d.c2 * d.n;
	return 2.0 * B * per;
}

const gf_layer_kind gf_layer_attention = {
	.name = "attention",
	.aliases = (const char *const[]){ "attn", "self_attention", NULL },
	.min_pos = 1,
	.max_pos = 1,
	.keys = { "sn", "init", "gamma" },
	.parse = attn_parse,
	.shapes = attn_shapes,
	.init = attn_init,
	.forward = attn_forward,
	.backward = attn_backward,
	.flops = attn_flops,
};
