/* Losses: names and the checked entry point over the backend's loss op.
 * See <ganflow/nn.h> for the formulas. */
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/nn.h>

static const char *const names[GF_LOSS_COUNT] = {
	[GF_LOSS_BCE] = "bce",
	[GF_LOSS_BCE_LOGITS] = "bce_logits",
	[GF_LOSS_NONSAT] = "nonsat",
	[GF_LOSS_NONSAT_LOGITS] = "nonsat_logits",
	[GF_LOSS_HINGE_D] = "hinge_d",
	[GF_LOSS_HINGE_G] = "hinge_g",
	[GF_LOSS_LS] = "ls",
	[GF_LOSS_L1] = "l1",
	[GF_LOSS_CE] = "ce",
	[GF_LOSS_WGAN] = "wgan",
	[GF_LOSS_RELATIVISTIC] = "relativistic",
};

int gf_loss_parse(const char *name, gf_loss_kind *kind)
{
	for (int i = 0; i < GF_LOSS_COUNT; i++) {
		if (name && strcmp(name, names[i]) == 0) {
			*kind = (gf_loss_kind)i;
			return 0;
		}
	}
	return gf_seterr(GF_EPARAM, "unknown loss '%s' (bce, bce_logits, nonsat, nonsat_logits, hinge_d, hinge_g, "
	                 "ls, l1, ce, wgan, relativistic)", name ? name : "(null)");
}

const char *gf_loss_name(gf_loss_kind kind)
{
	return (int)kind >= 0 && kind < GF_LOSS_COUNT ? names[kind] : "?";
}

static int loss_call(gf_backend *be, gf_loss_kind kind, float *loss, int dev, float *dx, const gf_tensor *pred,
                     const gf_tensor *target, float target_value, float scale)
{
	char a[96], b[96];
	if ((int)kind < 0 || kind >= GF_LOSS_COUNT)
		return gf_seterr(GF_EPARAM, "loss: unknown kind %d", (int)kind);
	if (!pred || !pred->data || pred->dtype != GF_F32 || pred->ndim < 1 || pred->shape[0] < 1)
		return gf_seterr(GF_EPARAM, "loss %s: prediction must be a non-empty f32 tensor", names[kind]);
	if (pred->device != be->device)
		return gf_seterr(GF_EPARAM, "loss %s: prediction is not on the backend's device", names[kind]);
	gf_loss_desc d = { kind, (int)pred->shape[0], (int)(gf_tensor_numel(pred) / pred->shape[0]), target_value, scale };
	if (kind == GF_LOSS_RELATIVISTIC && (pred->shape[0] % 2 || target))
		return gf_seterr(GF_ESHAPE, "loss relativistic: pairs of rows i and i + n/2 need an even batch and no "
		                 "target tensor, got %s", gf_tensor_shape_str(pred, a, sizeof(a)));
	const float *t = NULL;
	const int32_t *labels = NULL;
	if (kind == GF_LOSS_CE) {
		if (pred->ndim != 2)
			return gf_seterr(GF_ESHAPE, "loss ce: logits must be (n, classes), got %s",
			                 gf_tensor_shape_str(pred, a, sizeof(a)));
		if (!target || target->dtype != GF_I32 || target->ndim != 1 || target->shape[0] != pred->shape[0])
			return gf_seterr(GF_ESHAPE, "loss ce: needs (%lld) i32 labels", (long long)pred->shape[0]);
		labels = target->data;
	} else if (target) {
		if (target->dtype != GF_F32 || gf_tensor_numel(target) != gf_tensor_numel(pred))
			return gf_seterr(GF_ESHAPE, "loss %s: target %s does not match prediction %s", names[kind],
			                 gf_tensor_shape_str(target, a, sizeof(a)), gf_tensor_shape_str(pred, b, sizeof(b)));
		t = target->data;
	}
	if (dev) {
		if (!GF_BACKEND_HAS(be, loss_dev))
			return gf_seterr(GF_EUNSUPPORTED, "loss %s: backend %s has no loss_dev", names[kind], be->ops->name);
		return be->ops->loss_dev(be, loss, dx, pred->data, t, labels, &d);
	}
	return be->ops->loss(be, loss, dx, pred->data, t, labels, &d);
}

int gf_loss(gf_backend *be, gf_loss_kind kind, float *loss, float *dx, const gf_tensor *pred,
            const gf_tensor *target, float target_value, float scale)
{
	return loss_call(be, kind, loss, 0, dx, pred, target, target_value, scale);
}

int gf_loss_dev(gf_backend *be, gf_loss_kind kind, float *loss_dev, float *dx, const gf_tensor *pred,
                const gf_tensor *target, float target_value, float scale)
{
	return loss_call(be, kind, loss_dev, 1, dx, pred, target, target_value, scale);
}
