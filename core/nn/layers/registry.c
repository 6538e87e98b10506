/* The layer kinds the engine knows, by Lua key. Each kind's descriptor is
 * defined in its own file in this folder; adding a kind is that file, one
 * line here, one in core/nn/nn.cmake, its backend ops and its tests
 * (docs/nn.md "Adding a layer"). */
#include <string.h>

#include "../layer_kind.h"

extern const gf_layer_kind gf_layer_linear, gf_layer_conv, gf_layer_tconv, gf_layer_upsample, gf_layer_bn,
	gf_layer_relu, gf_layer_lrelu, gf_layer_tanh, gf_layer_sigmoid, gf_layer_dropout, gf_layer_dropout2d,
	gf_layer_reshape, gf_layer_flatten, gf_layer_embedding, gf_layer_concat, gf_layer_maxpool, gf_layer_avgpool,
	gf_layer_softmax, gf_layer_add, gf_layer_gsp, gf_layer_split,
	gf_layer_instancenorm, gf_layer_cbn, gf_layer_proj, gf_layer_diffaugment, gf_layer_attention, gf_layer_mbstd,
	gf_layer_fir, gf_layer_bias_act, gf_layer_noise, gf_layer_const, gf_layer_modconv,
	gf_layer_norm2, gf_layer_dot, gf_layer_w_avg,
	gf_layer_ada, gf_layer_style_mix, gf_layer_style_w;

static const gf_layer_kind *const kinds[] = {
	&gf_layer_linear,                                       /* linear.c */
	&gf_layer_conv,                                         /* conv.c */
	&gf_layer_tconv,                                        /* tconv.c */
	&gf_layer_upsample,                                     /* upsample.c */
	&gf_layer_bn,                                           /* bn.c */
	&gf_layer_relu, &gf_layer_lrelu, &gf_layer_tanh, &gf_layer_sigmoid,   /* activations.c */
	&gf_layer_dropout, &gf_layer_dropout2d,                 /* dropout.c */
	&gf_layer_reshape, &gf_layer_flatten,                   /* reshape.c */
	&gf_layer_embedding,                                    /* embedding.c */
	&gf_layer_concat,                                       /* concat.c */
	&gf_layer_maxpool, &gf_layer_avgpool,                   /* pool.c */
	&gf_layer_softmax,                                      /* softmax.c */
	&gf_layer_add,                                          /* add.c */
	&gf_layer_gsp,                                          /* gsp.c */
	&gf_layer_split,                                        /* split.c */
	&gf_layer_instancenorm,                                 /* instancenorm.c */
	&gf_layer_cbn,                                          /* cbn.c */
	&gf_layer_proj,                                         /* proj.c */
	&gf_layer_diffaugment,                                  /* diffaugment.c */
	&gf_layer_attention,                                    /* attention.c */
	&gf_layer_mbstd,                                        /* mbstd.c */
	&gf_layer_fir,                                          /* fir.c */
	&gf_layer_bias_act,                                     /* bias_act.c */
	&gf_layer_noise,                                        /* noise.c */
	&gf_layer_const,                                        /* const.c */
	&gf_layer_modconv,                                      /* modconv.c */
	&gf_layer_norm2,                                        /* norm2.c */
	&gf_layer_dot,                                          /* dot.c */
	&gf_layer_w_avg,                                        /* w_avg.c */
	&gf_layer_ada,                                          /* ada.c */
	&gf_layer_style_mix, &gf_layer_style_w,                 /* style_mix.c */
};

const gf_layer_kind *gf_layer_kind_find(const char *type)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const gf_layer_kind *k = kinds[i];
		if (strcmp(type, k->name) == 0)
			return k;
		for (const char *const *a = k->aliases; a && *a; a++)
			if (strcmp(type, *a) == 0)
				return k;
	}
	return NULL;
}
