/* g_step's messages: D's weights in (into the replica, in device memory
 * behind an event on one device), G's fakes out to d_step (likewise) and
 * G's weights out to the sample grid and the evaluator; G's checkpoint
 * parts. See g_step.c and
 * docs/cuda.md's protocol for messages in device memory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>

#include "g_step.h"

/* The labels of the fakes (G's and the replica's input, the fakes
 * message's), on the device. */
gf_tensor g_lab_tensor(const gstep *s, int n)
{
	int64_t ls[1] = { n };
	gf_tensor t = gf_tensor_make(s->lab_dev, GF_I32, 1, ls);
	t.device = s->be->device;
	t.device_index = s->be->device_index;
	return t;
}

/* Pushes G's current output as a fakes message: in device memory with an
 * event when d_step takes that (one device), else copied to the host. */
int g_push_fakes(gstep *s, gf_ctx *ctx)
{
	gf_tensor out;
	gf_net_output(s->g, &out);
	if (s->paired)
		out = g_dev_tensor(s, s->fake_dev, s->nreal, s->ca + s->cb);
	gf_msg *m;
	int rc = gf_msg_get(ctx, OUT_FAKES, &m);
	if (rc)
		return rc;
	int64_t ls[1] = { out.shape[0] };
	float *x = gf_msg_tensor(m, 0, GF_F32, out.ndim, out.shape);
	int32_t *lab = gf_msg_tensor(m, 1, GF_I32, 1, ls);
	if (!x || !lab) {
		gf_msg_release(m);
		return gf_fail(ctx, "out of memory");
	}
	gf_backend *be = s->be;
	if (s->dev_fakes) {
		for (int i = 0; i < 2; i++) {
			m->t[i].device = be->device;
			m->t[i].device_index = be->device_index;
		}
		rc = be->ops->copy(be, x, out.data, gf_tensor_bytes(&out), GF_COPY_D2D);
		if (!rc)
			rc = be->ops->copy(be, lab, s->lab_dev, (size_t)ls[0] * sizeof(int32_t), GF_COPY_D2D);
		if (!rc)
			rc = gf_devmsg_ready(s->dm, m);
	} else {
		rc = be->ops->copy(be, x, out.data, gf_tensor_bytes(&out), GF_COPY_D2H);
		if (!rc)
			memcpy(lab, s->paired ? s->real_labels : s->labels, (size_t)ls[0] * sizeof(int32_t));
	}
	if (rc) {
		gf_msg_release(m);
		return gf_fail(ctx, "copying fakes: %s", gf_errmsg());
	}
	m->version = s->dver;
	m->step = s->step;
	m->label = s->cls;
	return gf_push(ctx, OUT_FAKES, m);
}

/* Takes D's weights: in sync mode exactly the version of this step, in
 * async mode the newest available (waiting only for the very first). */
int g_take_weights(gstep *s, gf_ctx *ctx)
{
	gf_msg *m = NULL, *next;
	int rc;
	if (!s->async || s->dver < 0) {
		if ((rc = gf_pop(ctx, IN_DW, &m)))
			return rc;
	}
	if (s->async)
		while (gf_try_pop(ctx, IN_DW, &next) == 0) {
			gf_msg_release(m);
			m = next;
		}
	if (!m)
		return 0;
	if (!s->async && m->version != s->step) {
		long long v = (long long)m->version;
		gf_msg_release(m);
		return gf_fail(ctx, "synchronous mode: G step %lld received D weights of version %lld "
		                    "(are g_step and d_step both in mode \"sync\", resumed from the same checkpoint?)",
		               (long long)s->step, v);
	}
	/* the weights taken a step ago: their copies into the replica ran */
	if ((rc = gf_devmsg_release(s->dm, 0)) || (rc = gf_weights_unpack(s->d, m))) {
		gf_msg_release(m);
		return gf_fail(ctx, "D weights: %s", gf_errmsg());
	}
	s->dver = m->version;
	s->dev_weights += m->event != NULL;
	s->fakes_per_step = (int64_t)gf_msg_scalar(m, "fakes_per_step", 1);
	if ((rc = gf_devmsg_hold(s->dm, m))) /* a device message: until the copies ran */
		return gf_fail(ctx, "D weights: %s", gf_errmsg());
	return 0;
}

int g_push_weights(gstep *s, gf_ctx *ctx)
{
	gf_msg *m;
	if (!gf_port_edges(ctx, 1, OUT_WEIGHTS))
		return 0;
	int rc = gf_trainer_weights(s->tr, OUT_WEIGHTS, s->step, &m);
	return rc ? rc : gf_push(ctx, OUT_WEIGHTS, m);
}

int g_push_state(gstep *s, gf_ctx *ctx)
{
	gf_state *st;
	char k[160];
	/* a checkpoint is a read point: every result in flight is checked first */
	int rc = gf_stepdrv_settle(s->drv, ctx, 0);
	if (rc || (rc = gf_trainer_state_begin(s->tr, s->step, &st)) || !st)
		return rc;
	rc = gf_state_add_rng(st, gf_train_key(ctx, "noise_rng", k, sizeof(k)), &s->noise);
	if (!rc)
		rc = gf_state_add_rng(st, gf_train_key(ctx, "replica_rng", k, sizeof(k)), gf_net_rng(s->d));
	if (!rc && s->pen) { /* the mean's bits, so a resumed run goes on exactly */
		int64_t bits;
		if (!(rc = g_pl_mean(s, ctx, &bits)))
			rc = gf_state_add_i64(st, gf_train_key(ctx, "pl_mean", k, sizeof(k)), &bits, 1);
	}
	return gf_trainer_state_push(s->tr, rc, s->step);
}
