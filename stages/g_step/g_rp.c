/* g_step's R3GAN parts (loss = "rpgan", Huang et al. 2024): G's loss is
 * the relativistic one, mean softplus(-(D(G(z_i)) - D(x_i))) over pairs of
 * a fake and a real image, so every fake batch G makes pairs with a real
 * batch: the one d_step pairs it with (the batch stage's output joined to
 * both stages' `real`), whose labels a conditional G takes as its own, as
 * R3GAN's loop conditions G and D on the real batch's classes. The
 * replica of D sees [G(z); x] as one batch (R3GAN's D has no batch
 * statistics), and G's output gradient is the first half of its input
 * gradient. The real batch goes to the device before the step; the rest
 * are ops of the captured steps. See g_step.c. */
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>

#include "g_step.h"

int g_rp_setup(gstep *s, gf_ctx *ctx, const gf_tensor *gout)
{
	if (!gf_port_edges(ctx, 0, IN_REAL))
		return gf_fail(ctx, "loss = \"rpgan\" pairs each fake with a real image: connect g_step's input 'real' to the "
		                    "batches d_step gets (gf.connect(batch.batch, g.real)), as pipelines/r3gan_fashion.lua "
		                    "does");
	s->rp_numel = (size_t)(gf_tensor_numel(gout) / gout->shape[0]);
	s->rp_shape = *gout;
	size_t n = 2 * (size_t)s->batch;
	gf_backend *be = s->be;
	if (be->ops->alloc(be, (void **)&s->rp_pair, n * s->rp_numel * sizeof(float)) ||
	    be->ops->alloc(be, (void **)&s->rp_lab, n * sizeof(int32_t)))
		return gf_fail(ctx, "out of memory for the pair batch");
	return 0;
}

int g_rp_take(gstep *s, gf_ctx *ctx)
{
	gf_msg *m;
	int rc = gf_pop(ctx, IN_REAL, &m);
	if (rc)
		return rc;
	const gf_tensor *x = &m->t[0];
	int ok = m->ntensors >= 1 && x->dtype == GF_F32 && x->ndim == s->rp_shape.ndim &&
	         (size_t)(gf_tensor_numel(x) / (x->shape[0] ? x->shape[0] : 1)) == s->rp_numel;
	if (!ok || x->shape[0] != s->batch) {
		char a[96], b[96];
		gf_tensor_shape_str(x, a, sizeof(a));
		gf_tensor_shape_str(&s->rp_shape, b, sizeof(b));
		gf_msg_release(m);
		return gf_fail(ctx, "step %lld: loss = \"rpgan\" pairs each of G's %d fakes %s with a real image, but the real "
		                    "batch is %s (a short batch at the end of an epoch: batch stage drop_last = true)",
		               (long long)s->step, s->batch, b, a);
	}
	if (s->classes && (m->ntensors < 2 || m->t[1].dtype != GF_I32)) {
		gf_msg_release(m);
		return gf_fail(ctx, "step %lld: a conditional G takes the real batch's labels, and it carries none",
		               (long long)s->step);
	}
	if (s->classes)
		memcpy(s->labels, m->t[1].data, (size_t)s->batch * sizeof(int32_t));
	gf_backend *be = s->be;
	rc = be->ops->copy(be, s->rp_pair + (size_t)s->batch * s->rp_numel, x->data,
	                   (size_t)s->batch * s->rp_numel * sizeof(float), GF_COPY_H2D);
	gf_msg_release(m);
	return rc ? gf_fail(ctx, "step %lld: the real batch to the device: %s", (long long)s->step, gf_errmsg()) : 0;
}

int g_rp_pair(gstep *s, gf_ctx *ctx, gf_tensor *x, gf_tensor *lab)
{
	gf_tensor fake;
	gf_net_output(s->g, &fake);
	gf_backend *be = s->be;
	size_t lb = (size_t)s->batch * sizeof(int32_t);
	int rc = be->ops->copy(be, s->rp_pair, fake.data, gf_tensor_bytes(&fake), GF_COPY_D2D);
	if (!rc && s->classes && !(rc = be->ops->copy(be, s->rp_lab, s->lab_dev, lb, GF_COPY_D2D)))
		rc = be->ops->copy(be, s->rp_lab + s->batch, s->lab_dev, lb, GF_COPY_D2D);
	if (rc)
		return gf_fail(ctx, "step %lld: the pair batch: %s", (long long)s->step, gf_errmsg());
	*x = fake;
	x->data = s->rp_pair;
	x->shape[0] = 2 * s->batch;
	*lab = g_lab_tensor(s, 2 * s->batch);
	lab->data = s->rp_lab;
	return 0;
}
