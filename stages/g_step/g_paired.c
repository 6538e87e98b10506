/* g_step's pix2pix parts (paired = true): G maps the A half of the (A, B)
 * batches d_step gets to B; the fakes are (A, G(A)); G's loss adds l1 x
 * mean |G(A) - B| (docs/train.md). The batch goes to the device before
 * the step; the rest are ops of the captured steps. See g_step.c. */
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>

#include "g_step.h"

/* pix2pix: G takes A (ca, H, W) and gives B (cb, H, W); D takes (A, B)
 * concatenated (ca + cb, H, W). Allocates the device buffers. */
int g_paired_setup(gstep *s, gf_ctx *ctx, const gf_tensor *gin, const gf_tensor *gout, const gf_tensor *din)
{
	char a[96], b[96], c[96];
	if (!gf_port_edges(ctx, 0, IN_REAL))
		return gf_fail(ctx, "paired = true needs input 'real' connected to the (A, B) batches d_step gets "
		                    "(gf.connect(batch.batch, g.real))");
	if (gin->ndim != 4 || gout->ndim != 4 || din->ndim != 4 || gin->shape[2] != gout->shape[2] ||
	    gin->shape[3] != gout->shape[3] || din->shape[1] != gin->shape[1] + gout->shape[1] ||
	    din->shape[2] != gin->shape[2] || din->shape[3] != gin->shape[3])
		return gf_fail(ctx, "paired = true: G must map an image A (C, H, W) to an image B of the same size and D "
		                    "take (A, B) concatenated; G takes %s and gives %s, D takes %s",
		               gf_tensor_shape_str(gin, a, 96), gf_tensor_shape_str(gout, b, 96),
		               gf_tensor_shape_str(din, c, 96));
	if (gf_net_classes(s->g))
		return gf_fail(ctx, "paired = true: G must not take labels");
	s->ca = (int)gin->shape[1];
	s->cb = (int)gout->shape[1];
	s->plane = gin->shape[2] * gin->shape[3];
	s->gout = *gout;
	size_t n = (size_t)s->batch * (size_t)s->plane * sizeof(float);
	gf_backend *be = s->be;
	if (be->ops->alloc(be, (void **)&s->real_dev, n * (size_t)(s->ca + s->cb)) ||
	    be->ops->alloc(be, (void **)&s->a_dev, n * (size_t)s->ca) ||
	    be->ops->alloc(be, (void **)&s->b_dev, n * (size_t)s->cb) ||
	    be->ops->alloc(be, (void **)&s->fake_dev, n * (size_t)(s->ca + s->cb)) ||
	    be->ops->alloc(be, (void **)&s->dga, n * (size_t)s->cb) ||
	    !(s->real_labels = malloc((size_t)s->batch * sizeof(int32_t))))
		return gf_fail(ctx, "out of memory");
	return 0;
}

/* A device tensor of G's output's device over data. */
gf_tensor g_dev_tensor(const gstep *s, float *data, int n, int c)
{
	gf_tensor t = s->gout;
	t.shape[0] = n;
	t.shape[1] = c;
	t.data = data;
	return t;
}

/* pix2pix: the next (A, B) batch to the device (before the step). */
int g_take_paired(gstep *s, gf_ctx *ctx)
{
	gf_msg *m;
	int rc = gf_pop(ctx, IN_REAL, &m);
	if (rc)
		return rc;
	const gf_tensor *x = &m->t[0];
	if (m->ntensors < 1 || x->dtype != GF_F32 || x->ndim != 4 || x->shape[0] < 1 || x->shape[0] > s->batch ||
	    x->shape[1] != s->ca + s->cb || x->shape[2] * x->shape[3] != s->plane) {
		char a[96];
		gf_tensor_shape_str(x, a, 96);
		gf_msg_release(m);
		return gf_fail(ctx, "paired = true: real batch %s is not (N <= %d, %d + %d, H, W) as G and D need (is "
		                    "jpeg_decode paired = true?)",
		               a, s->batch, s->ca, s->cb);
	}
	int n = (int)x->shape[0];
	size_t cab = (size_t)(s->ca + s->cb) * (size_t)s->plane;
	gf_backend *be = s->be;
	rc = be->ops->copy(be, s->real_dev, x->data, (size_t)n * cab * sizeof(float), GF_COPY_H2D);
	for (int i = 0; i < n; i++)
		s->real_labels[i] = m->ntensors > 1 && m->t[1].dtype == GF_I32 ? ((const int32_t *)m->t[1].data)[i] : -1;
	gf_msg_release(m);
	if (!rc && s->dev_fakes)
		rc = be->ops->copy(be, s->lab_dev, s->real_labels, (size_t)n * sizeof(int32_t), GF_COPY_H2D);
	if (rc)
		return gf_fail(ctx, "step %lld: (A, B) batch to the device: %s", (long long)s->step, gf_errmsg());
	s->nreal = n;
	return 0;
}

/* pix2pix, the ops: A and B out of the batch, G forward on A (training
 * mode: dropout is G's noise), (A, G(A)) into fake_dev. */
int g_generate_paired_ops(gstep *s, gf_ctx *ctx)
{
	int n = s->nreal;
	size_t cab = (size_t)(s->ca + s->cb) * (size_t)s->plane, ca = (size_t)s->ca * (size_t)s->plane,
	       cb = (size_t)s->cb * (size_t)s->plane;
	gf_backend *be = s->be;
	int rc = be->ops->copy2d(be, s->a_dev, ca, s->real_dev, cab, (size_t)n, ca, 0);
	if (!rc)
		rc = be->ops->copy2d(be, s->b_dev, cb, s->real_dev + ca, cab, (size_t)n, cb, 0);
	if (rc)
		return gf_fail(ctx, "step %lld: (A, B) batch to the device: %s", (long long)s->step, gf_errmsg());
	gf_tensor a = g_dev_tensor(s, s->a_dev, n, s->ca), out;
	if ((rc = gf_net_forward(s->g, &a, NULL, GF_TRAIN)))
		return gf_fail(ctx, "step %lld: G forward: %s", (long long)s->step, gf_errmsg());
	gf_net_output(s->g, &out);
	rc = be->ops->copy2d(be, s->fake_dev, cab, s->a_dev, ca, (size_t)n, ca, 0);
	if (!rc)
		rc = be->ops->copy2d(be, s->fake_dev + ca, cab, out.data, cb, (size_t)n, cb, 0);
	return rc ? gf_fail(ctx, "step %lld: (A, G(A)): %s", (long long)s->step, gf_errmsg()) : 0;
}

/* pix2pix: G's output gradient into dga: l1 x d mean|G(A) - B| plus the
 * G(A) channels of the replica's input gradient dfake (N, ca + cb, H, W). */
int g_paired_grad(gstep *s, gf_ctx *ctx, const gf_tensor *dfake, float *l1_slot)
{
	int n = s->nreal, rc = 0;
	size_t cab = (size_t)(s->ca + s->cb) * (size_t)s->plane, ca = (size_t)s->ca * (size_t)s->plane,
	       cb = (size_t)s->cb * (size_t)s->plane;
	if (s->l1 > 0) {
		gf_tensor out, b = g_dev_tensor(s, s->b_dev, n, s->cb);
		gf_net_output(s->g, &out);
		if ((rc = gf_trainer_loss_dev(s->tr, s->step, GF_LOSS_L1, &out, &b, 0.0f, s->l1 / (float)s->acc, s->dga,
		                              l1_slot)))
			return rc;
	}
	rc = s->be->ops->copy2d(s->be, s->dga, cb, (const float *)dfake->data + ca, cab, (size_t)n, cb, s->l1 > 0);
	return rc ? gf_fail(ctx, "step %lld: G's gradient: %s", (long long)s->step, gf_errmsg()) : 0;
}
