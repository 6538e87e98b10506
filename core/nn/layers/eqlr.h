/* Equalised learning rate (Karras et al. 2018; StyleGAN2-ADA's
 * FullyConnectedLayer and Conv2dLayer), the `eqlr = true` key of linear
 * and conv: what those kinds call from their parse, shapes, init, forward,
 * backward and double backward (eqlr.c).
 *
 * The parameters are stored at unit scale and scaled at run time: the
 * weight the layer computes with is w * lr_mul / sqrt(fan_in), the bias
 * b * lr_mul. Initialisation as StyleGAN2-ADA: w ~ N(0, 1) / lr_mul (so
 * the weight in use starts at He's scale whatever lr_mul), b = bias_init
 * (not divided). lr_mul < 1 (the mapping network's 0.01) slows the
 * effective learning rate of the layer by that factor under Adam. */
#ifndef GF_NN_LAYERS_EQLR_H
#define GF_NN_LAYERS_EQLR_H

#include "../layer_kind.h"

/* Kept in the kind's configuration. */
struct gf_eqlr {
	int on;            /* eqlr = true */
	float lr_mul;      /* lr_mul = 1 */
	float bias_init;   /* bias_init = 0 */
	float wgain;       /* lr_mul / sqrt(fan_in) */
	int save;          /* save slot: scaled weight | scaled bias | their gradients (scratch) */
	size_t nw, nb;     /* weight and bias sizes */
};

/* Reads eqlr, lr_mul and bias_init (the last two only with eqlr; eqlr
 * excludes sn: sn_on is the layer's sn key). */
int gf_eqlr_parse(const gf_layer_args *a, struct gf_eqlr *e, int sn_on);
/* In shapes, after the parameters (weight 0 of nw floats, bias 1 of nb,
 * 0 when none): the workspace. */
void gf_eqlr_shapes(struct layer *l, struct gf_eqlr *e, size_t nw, size_t nb, double fan_in);
/* In init: N(0, 1) / lr_mul for the weight, bias_init for the bias. */
int gf_eqlr_init(gf_layer_net *net, struct layer *l, const struct gf_eqlr *e, gf_rng *rng, float *host);
/* In forward: the scaled weight and bias into the workspace; *w, *b (b
 * NULL without a bias) point to them. */
int gf_eqlr_weight(gf_layer_net *net, const struct layer *l, const struct gf_eqlr *e, const float **w, const float **b);
/* The scaled weight and bias of the last forward. */
float *gf_eqlr_used(const gf_layer_net *net, const struct layer *l, const struct gf_eqlr *e, int bias);
/* Scratch for the gradient with respect to the scaled weight (bias = 0)
 * or bias (1), which gf_eqlr_fold then scales into the parameter's
 * gradient (overwriting it, or adding when acc). */
float *gf_eqlr_scratch(const gf_layer_net *net, const struct layer *l, const struct gf_eqlr *e, int bias);
int gf_eqlr_fold(gf_layer_net *net, const struct layer *l, const struct gf_eqlr *e, int bias, int acc);

#endif
