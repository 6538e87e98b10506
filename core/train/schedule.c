/* Schedules of training options: see gf_schedule in <ganflow/train.h>.
 *
 * A schedule is a value that follows the images a network has seen. The
 * one kind there is, "cosine", is R3GAN's cosine_decay_with_warmup (Huang
 * et al. 2024, training/training_loop.py): from `from` to `to` along half a
 * cosine over `kimg` thousand images, after an optional linear warm-up from
 * `warmup_from` over `warmup_kimg` and an optional hold of `from` over
 * `hold_kimg`; past `kimg`, `to`. The stages evaluate it at every update
 * from their update counter (restored on resume, so a resumed run follows
 * the same curve) and feed the value to the op that uses it as a per-step
 * scalar (a captured step replays with each step's value). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/train.h>

static int num(const gf_value *t, const char *key, double def, double *out, const char *what)
{
	const gf_value *v = gf_value_get(t, key);
	if (!v || v->type == GF_VNIL) {
		*out = def;
		return 0;
	}
	int ok = 0;
	*out = gf_value_as_num(v, 0, &ok);
	if (!ok || !isfinite(*out))
		return gf_seterr(GF_EPARAM, "schedule of '%s': %s must be a number", what, key);
	return 0;
}

int gf_schedule_parse(const gf_value *v, const char *what, gf_schedule *out)
{
	memset(out, 0, sizeof(*out));
	if (!v || v->type != GF_VMAP)
		return gf_seterr(GF_EPARAM, "schedule of '%s': expected a table such as gf.cosine{ from = 2e-4, to = 5e-5, "
		                 "kimg = 20000 }", what);
	static const char *const keys[] = { "kind", "from", "to", "kimg", "warmup_from", "warmup_kimg", "hold_kimg",
		                                NULL };
	for (size_t i = 0; i < v->u.c.len; i++) {
		const char *k = v->u.c.keys[i];
		int known = 0;
		for (int j = 0; k && keys[j] && !known; j++)
			known = !strcmp(k, keys[j]);
		if (!known)
			return gf_seterr(GF_EPARAM, "schedule of '%s': unknown key '%s' (kind, from, to, kimg, warmup_from, "
			                 "warmup_kimg, hold_kimg)", what, k ? k : "(positional)");
	}
	const char *kind = gf_value_as_str(gf_value_get(v, "kind"), "cosine", NULL);
	if (strcmp(kind, "cosine"))
		return gf_seterr(GF_EPARAM, "schedule of '%s': unknown kind '%s' (cosine)", what, kind);
	int rc;
	double kimg, wk, hk;
	if ((rc = num(v, "from", NAN, &out->from, what)) || (rc = num(v, "to", NAN, &out->to, what)) ||
	    (rc = num(v, "kimg", NAN, &kimg, what)) || (rc = num(v, "warmup_from", 0, &out->warmup_from, what)) ||
	    (rc = num(v, "warmup_kimg", 0, &wk, what)) || (rc = num(v, "hold_kimg", 0, &hk, what)))
		return rc;
	if (isnan(out->from) || isnan(out->to) || isnan(kimg))
		return gf_seterr(GF_EPARAM, "schedule of '%s': from, to and kimg are required", what);
	if (!(kimg > 0) || wk < 0 || hk < 0 || !(wk + hk < kimg))
		return gf_seterr(GF_EPARAM, "schedule of '%s': needs kimg > 0 and warmup_kimg + hold_kimg < kimg (got %g, "
		                 "%g, %g)", what, kimg, wk, hk);
	out->total = kimg * 1000.0;
	out->warmup = wk * 1000.0;
	out->hold = hk * 1000.0;
	out->on = 1;
	return 0;
}

double gf_schedule_at(const gf_schedule *s, double nimg)
{
	if (nimg > s->total)
		return s->to;
	double decay = 0.5 * (1 + cos(M_PI * (nimg - s->warmup - s->hold) / (s->total - s->warmup - s->hold)));
	double v = s->from + (1 - decay) * (s->to - s->from);
	if (s->hold > 0 && !(nimg > s->warmup + s->hold))
		v = s->from;
	if (s->warmup > 0 && nimg < s->warmup)
		v = (s->from - s->warmup_from) / s->warmup * nimg + s->warmup_from;
	return v;
}
