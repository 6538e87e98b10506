/* st_close: compares the f32 tensors of two safetensors files (the
 * distributed tests compare checkpoints of runs that must agree).
 *
 *   st_close A B TOL [PREFIX...]     (PREFIX default: every tensor)
 *
 * For every f32 tensor of A whose name starts with one of the prefixes:
 * B must hold it with the same shape, and max |a - b| / (1 + max |a|) must
 * be <= TOL. Prints the worst tensor; exit 0 when all agree, 1 when not,
 * 2 on usage or I/O errors. `--differ` inverts the verdict: exit 0 when
 * some tensor differs by more than TOL (ranks that must NOT agree).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/safetensors.h>

int main(int argc, char **argv)
{
	int differ = 0;
	if (argc > 1 && !strcmp(argv[1], "--differ")) {
		differ = 1;
		argv++;
		argc--;
	}
	if (argc < 4) {
		fprintf(stderr, "usage: st_close [--differ] A B TOL [PREFIX...]\n");
		return 2;
	}
	gf_st_file *a, *b;
	if (gf_st_open(&a, argv[1]) || gf_st_open(&b, argv[2])) {
		fprintf(stderr, "st_close: %s\n", gf_errmsg());
		return 2;
	}
	double tol = atof(argv[3]), worst = 0;
	const char *worst_name = "(none)";
	size_t compared = 0, missing = 0;
	for (size_t i = 0; i < gf_st_count(a); i++) {
		const char *name = gf_st_name(a, i);
		int match = argc == 4;
		for (int p = 4; p < argc && !match; p++)
			match = !strncmp(name, argv[p], strlen(argv[p]));
		gf_tensor ta, tb;
		if (!match || gf_st_get(a, name, &ta) || ta.dtype != GF_F32)
			continue;
		if (gf_st_get(b, name, &tb) || !gf_tensor_same_shape(&ta, &tb)) {
			fprintf(stderr, "st_close: %s: missing from %s or of another shape\n", name, argv[2]);
			missing++;
			continue;
		}
		const float *x = ta.data, *y = tb.data;
		int64_t n = gf_tensor_numel(&ta);
		double dmax = 0, amax = 0;
		for (int64_t k = 0; k < n; k++) {
			double d = fabs((double)x[k] - (double)y[k]);
			if (!(d <= dmax))
				dmax = d; /* NaN counts as the worst */
			if (fabs(x[k]) > amax)
				amax = fabs(x[k]);
		}
		double rel = dmax / (1.0 + amax);
		if (!(rel <= worst) || compared == 0) {
			worst = rel;
			worst_name = name;
		}
		compared++;
	}
	printf("st_close: %zu tensors compared, worst %s: %.3g (tolerance %.3g)%s\n", compared, worst_name, worst, tol,
	       missing ? ", some missing" : "");
	gf_st_close(a);
	gf_st_close(b);
	if (!compared || missing)
		return 2;
	int agree = worst <= tol;
	if (differ)
		return agree ? 1 : 0;
	return agree ? 0 : 1;
}
