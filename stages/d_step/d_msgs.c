/* d_step's messages: real batches on their way to the device, checked
 * and staged through a copy stream (gf_staging: double-buffered, ordered
 * by events, each message kept until its copy ran), and fakes from g_step
 * (in device memory behind an event on one device, or host memory),
 * copied into the fixed buffers a captured step reads; D's weights out
 * to g_step; D's checkpoint parts. See d_step.c and docs/cuda.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>

#include "d_step.h"

/* ---- real batches ---- */

/* A device tensor over one of the step's input buffers. */
gf_tensor d_dev_tensor(const dstep *s, void *data, int labels, int64_t n)
{
	gf_tensor t;
	if (labels) {
		int64_t sh[1] = { n };
		t = gf_tensor_make(data, GF_I32, 1, sh);
	} else {
		t = s->din;
		t.shape[0] = n;
		t.data = data;
	}
	t.device = s->be->device;
	t.device_index = s->be->device_index;
	return t;
}


/* Takes a real batch into a staging slot (*slot): on an async backend its
 * copy to the device starts at once on the copy stream (the compute stream
 * is busy with the step before). */
int d_stage_real(dstep *s, gf_ctx *ctx, gf_msg *m, int *slot)
{
	int rc = gf_trainer_check_batch(s->tr, m, "real batches", 0);
	if (rc) {
		gf_msg_release(m);
		return rc;
	}
	return gf_staging_put(s->stg, m, slot) ? gf_fail(ctx, "real batch copy: %s", gf_errmsg()) : 0;
}

/* The real batch of staging slot j into the step's input buffers. */
int d_use_real(dstep *s, gf_ctx *ctx, int j)
{
	int rc = gf_staging_use(s->stg, j, s->real_dev, s->rlab_dev);
	return rc ? gf_fail(ctx, "real batch to the device: %s", gf_errmsg()) : 0;
}

/* The slot of the next real batch: the one staged ahead, or a new one. */
int d_next_real(dstep *s, gf_ctx *ctx, int *slot)
{
	if (s->ahead >= 0) {
		*slot = s->ahead;
		s->ahead = -1;
		return 0;
	}
	gf_msg *m;
	int rc = gf_pop(ctx, IN_REAL, &m);
	return rc ? rc : d_stage_real(s, ctx, m, slot);
}

void d_release_staged(dstep *s)
{
	gf_staging_release(s->stg);
	s->ahead = -1;
}

/* ---- fakes ---- */

/* The fakes of this D micro-step. Sync: the next message, of version v.
 * Async: the newest cached fakes whose D weights are at most `staleness`
 * iterations old, waiting for fresher ones only when none is. The returned
 * message is borrowed (async: owned by the cache) or owned (sync). */
int d_get_fakes(dstep *s, gf_ctx *ctx, gf_msg **out, int64_t *stale)
{
	int rc;
	gf_msg *m;
	if (!s->async) {
		if ((rc = gf_pop(ctx, IN_FAKES, &m)))
			return rc;
		/* the iteration begins with its fakes: an agreed stop ends the run before it, or lets it run */
		if ((rc = gf_step_begin(ctx, s->v + 1))) {
			gf_msg_release(m);
			return rc;
		}
		if (m->version != s->v) {
			long long got = (long long)m->version;
			gf_msg_release(m);
			return gf_fail(ctx, "synchronous mode: D iteration %lld received fakes made with D weights of "
			                    "version %lld (are g_step and d_step both in mode \"sync\"?)",
			               (long long)s->v, got);
		}
		*out = m;
		*stale = 0;
		return 0;
	}
	/* the cache may release a batch D's last copy read from: wait for it */
	if ((rc = gf_devmsg_fence_wait(s->dm)))
		return gf_fail(ctx, "fakes: %s", gf_errmsg());
	while ((rc = gf_try_pop(ctx, IN_FAKES, &m)) == 0)
		gf_fake_cache_add(s->cache, m);
	if (rc != -EAGAIN)
		return rc; /* GF_EEOF: G has finished, so does D */
	while (!(m = gf_fake_cache_pick(s->cache, s->v))) {
		if ((rc = gf_pop(ctx, IN_FAKES, &m)))
			return rc;
		gf_fake_cache_add(s->cache, m);
	}
	*out = m;
	*stale = s->v - m->version;
	return 0;
}

/* The fakes into the step's input buffers (device messages: after their
 * event, device to device), then the message is let go: sync, held until
 * the copy ran; async, a fence for the cache. */
int d_use_fakes(dstep *s, gf_ctx *ctx, gf_msg *m)
{
	const gf_tensor *x = &m->t[0];
	int ok = m->ntensors >= 1 && x->dtype == GF_F32 && x->ndim == s->din.ndim && x->shape[0] >= 1;
	for (int i = 1; ok && i < x->ndim; i++)
		ok = x->shape[i] == s->din.shape[i];
	if (!ok || x->shape[0] > s->max_batch || (s->classes && (m->ntensors < 2 || m->t[1].dtype != GF_I32))) {
		char a[96], b[96];
		if (ok)
			return gf_fail(ctx, "fake batch of %lld exceeds max_batch = %d", (long long)x->shape[0], s->max_batch);
		return gf_fail(ctx, "the fakes are %s but D takes %s%s", gf_tensor_shape_str(x, a, 96),
		               gf_tensor_shape_str(&s->din, b, 96), s->classes ? " with labels" : "");
	}
	gf_backend *be = s->be;
	size_t n = (size_t)x->shape[0];
	gf_copy_kind kx = m->event || x->device == be->device ? GF_COPY_D2D : GF_COPY_H2D;
	gf_copy_kind kl = m->event || m->t[1].device == be->device ? GF_COPY_D2D : GF_COPY_H2D;
	if (m->event)
		s->dev_fakes++;
	int rc = gf_devmsg_wait(s->dm, m);
	if (!rc)
		rc = be->ops->copy(be, s->fake_dev, x->data, n * s->in_numel * sizeof(float), kx);
	if (!rc && s->classes)
		rc = be->ops->copy(be, s->flab_dev, m->t[1].data, n * sizeof(int32_t), kl);
	if (rc)
		return gf_fail(ctx, "fakes to the device: %s", gf_errmsg());
	if (s->async)
		rc = gf_devmsg_fence(s->dm);
	else if (!(rc = gf_devmsg_release(s->dm, 1)))
		rc = gf_devmsg_hold(s->dm, m);
	return rc ? gf_fail(ctx, "fakes: %s", gf_errmsg()) : 0;
}

/* Sync: D takes the next iteration's first real batch before it pushes
 * the weights G waits for. G runs one iteration ahead of D (its step k + 1
 * overlaps D's), so when the real data stops (a stall, the end of a
 * graceful stop) after G had been let into a step D cannot finish, the
 * final checkpoint would hold G at k + 1 and D at k, which no resume can
 * continue exactly. Holding the weights until D has its batch keeps them
 * at the same step; when the batch is already queued, as it is while data
 * flows, this costs nothing, and on a GPU its copy to the device starts
 * here, while the step just queued runs. 0, or GF_EEOF / GF_ESTOP (end of
 * the run) or an error from gf_pop. */
int d_take_next_real(dstep *s, gf_ctx *ctx)
{
	if (s->async || s->ahead >= 0)
		return 0;
	gf_msg *m;
	int rc = gf_pop(ctx, IN_REAL, &m);
	return rc ? rc : d_stage_real(s, ctx, m, &s->ahead);
}

/* ---- D's weights ---- */

int d_push_weights(dstep *s, gf_ctx *ctx)
{
	gf_msg *m;
	int rc;
	if (!s->dev_weights) {
		if ((rc = gf_trainer_weights(s->tr, OUT_WEIGHTS, s->v, &m)))
			return rc;
	} else {
		/* on one device: a copy of D's blocks behind an event, no host */
		if ((rc = gf_msg_get(ctx, OUT_WEIGHTS, &m)))
			return rc;
		if ((rc = gf_weights_pack_dev(m, s->d, s->v)) || (rc = gf_devmsg_ready(s->dm, m))) {
			gf_msg_release(m);
			return gf_fail(ctx, "D weights: %s", gf_errmsg());
		}
		m->step = s->v;
		m->label = s->cls;
	}
	gf_msg_set_scalar(m, "fakes_per_step", (double)s->d_steps * s->acc);
	return gf_push(ctx, OUT_WEIGHTS, m);
}

/* ---- input buffers ---- */

int d_dev_buffers(dstep *s, gf_ctx *ctx, gf_backend *cbe)
{
	gf_backend *be = s->be;
	if (gf_staging_create(&s->stg, be, cbe, s->in_numel * sizeof(float), s->classes, s->max_batch))
		return gf_fail(ctx, "real batch staging: %s", gf_errmsg());
	size_t xb = (size_t)s->max_batch * s->in_numel * sizeof(float), lb = (size_t)s->max_batch * sizeof(int32_t);
	if (be->ops->alloc(be, (void **)&s->real_dev, xb) || be->ops->alloc(be, (void **)&s->fake_dev, xb) ||
	    be->ops->alloc(be, (void **)&s->rlab_dev, lb) || be->ops->alloc(be, (void **)&s->flab_dev, lb))
		return gf_fail(ctx, "out of memory for D's input buffers: %s", gf_errmsg());
	return 0;
}

/* ---- checkpoint parts ---- */

int d_push_state(dstep *s, gf_ctx *ctx)
{
	gf_state *st;
	char k[160];
	/* a checkpoint is a read point: every result in flight is checked first */
	int rc = gf_stepdrv_settle(s->drv, ctx, 0);
	if (rc || (rc = gf_trainer_state_begin(s->tr, s->v, &st)) || !st)
		return rc;
	/* LeCam's and ADA's state from the device (nothing is in flight) */
	rc = s->lecam_on || s->ada_p ? d_reg_state(s, ctx, 0) : 0;
	if (!rc)
		rc = gf_state_add_i64(st, gf_train_key(ctx, "data_pos", k, sizeof(k)), s->data_pos, 2);
	if (!rc && s->lecam_on) { /* the averages' bits, so a resumed run goes on exactly */
		int64_t lc[3] = { s->lecam.set };
		memcpy(lc + 1, s->lecam.ema, sizeof(s->lecam.ema));
		rc = gf_state_add_i64(st, gf_train_key(ctx, "lecam", k, sizeof(k)), lc, 3);
	}
	if (!rc && s->gp_on)
		rc = gf_state_add_rng(st, gf_train_key(ctx, "gp_rng", k, sizeof(k)), &s->gp_rng);
	if (!rc && s->ada_p) { /* the partial interval; p itself is D's buffer */
		int64_t a[5];
		gf_ada_save(&s->ada, a);
		rc = gf_state_add_i64(st, gf_train_key(ctx, "ada", k, sizeof(k)), a, 5);
	}
	if (!rc && s->reader) /* no reader upstream (test sources): no position to resume */
		rc = gf_state_meta(st, gf_train_key(ctx, "reader", k, sizeof(k)), s->reader);
	if (!rc && s->data_classes[0]) /* what `ganflow sample` and `ganflow eval` generate */
		rc = gf_state_meta(st, gf_train_key(ctx, "data_classes", k, sizeof(k)), s->data_classes);
	/* async: filed under G's step, so it joins G's part of the checkpoint */
	return gf_trainer_state_push(s->tr, rc, s->async ? s->gseen : s->v);
}

/* After iteration v: the checkpoint part when one is due (sync: every
 * checkpoint_every iterations; async: when G crossed a multiple of it). */
int d_maybe_state(dstep *s, gf_ctx *ctx)
{
	if (s->ckpt_every <= 0)
		return 0;
	if (!s->async)
		return s->v % s->ckpt_every == 0 ? d_push_state(s, ctx) : 0;
	if (s->gseen / s->ckpt_every <= s->ckpt_basis / s->ckpt_every)
		return 0;
	int64_t gseen = s->gseen;
	s->gseen = gseen / s->ckpt_every * s->ckpt_every; /* the multiple G just crossed */
	int rc = d_push_state(s, ctx);
	s->gseen = gseen;
	s->ckpt_basis = gseen;
	return rc;
}
