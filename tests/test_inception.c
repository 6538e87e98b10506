/* The FID Inception-v3 against PyTorch 1.13 (issue 16), no real weights
 * needed: tests/ref/fid_inception.py builds the network in torch with
 * random seeded weights, saves its state dict laid out like pytorch-fid's
 * pt_inception-2015-12-05-6726825d.pth and the pool3 features and logits
 * of a few images; `ganflow weights import` turns the .pth into a ganflow
 * checkpoint, and ganflow's network must give the same pool3 and logits
 * within 1e-4 relative (to the largest value, see check). Also: the input pipeline (grey to three channels,
 * bilinear resize to 299 as F.interpolate(align_corners = False), [-1, 1])
 * against torch's, and the import's refusals (truncated file, wrong shape,
 * missing tensor, extra tensor, another network's state dict), each naming
 * the tensor at fault.
 *
 * Also FID, IS and KID at Inception's dimensions against numpy/scipy
 * (test_scores, 1e-6 relative).
 *
 * Needs /usr/bin/python3 with torch (skips with 77 without it). argv[1]:
 * the ganflow command. Takes ~1.5 minutes on 2 cores (torch and ganflow
 * forwards of 3 images at 299x299, six imports, scipy's sqrtm at d = 2048). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <ganflow/ckpt.h>
#include <ganflow/evalstats.h>
#include <ganflow/evaluate.h>
#include <ganflow/image.h>

#include "test_nn_util.h"

static const char *ganflow;
static char dir[] = "/tmp/gf-inception-XXXXXX";
static gf_st_file *ref;
static gf_backend *be;

static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int setup(void **state)
{
	(void)state;
	const char *src = getenv("GF_SOURCE_DIR");
	char path[1024];
	snprintf(path, sizeof(path), "%s/tests/ref/fid_inception.py", src ? src : ".");
	if (!mkdtemp(dir))
		return -1;
	if (sh("%s ref %s 3", path, dir) || sh("%s weights import %s/model.pth %s/inception.safetensors", ganflow, dir, dir))
		return -1;
	snprintf(path, sizeof(path), "%s/ref.safetensors", dir);
	return gf_st_open(&ref, path) || gf_backend_open("cpu", NULL, &be) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	gf_st_close(ref);
	gf_backend_close(be);
	if (!getenv("GF_KEEP"))
		sh("rm -rf %s", dir);
	return 0;
}

/* a against the reference within tol relative to the reference's largest
 * value: max |a - r| / max |r|. (Elementwise relative errors are no
 * measure here: torch's own f32 pool3 differs from its f64 one by 2e-4 on
 * values near 1% of the largest through the 94 random convolutions, while
 * max |a - r| / max |r| is 1.5e-5 for both torch and ganflow.) */
static void check(const char *name, const float *a, size_t n, double tol)
{
	size_t rn = 0, w = 0;
	float *r = nn_ref(ref, name, &rn);
	assert_non_null(r);
	assert_int_equal(rn, n);
	double mx = 0, md = 0;
	for (size_t i = 0; i < n; i++) {
		mx = fabs(r[i]) > mx ? fabs(r[i]) : mx;
		if (!(fabs((double)a[i] - r[i]) <= md)) {
			md = fabs((double)a[i] - r[i]);
			w = i;
		}
	}
	double e = md / (mx + 1e-30);
	fprintf(stderr, "  %-8s max |diff| / max |ref| %.3g (tolerance %g); elementwise (floor 1%%) %.3g\n", name, e, tol,
	        nn_relerr(a, r, n, 1e-2, &w));
	if (e > tol) {
		nn_relerr(a, r, n, 1.0, &w);
		fprintf(stderr, "%s: worst at %zu: got %.9g, want %.9g\n", name, w, (double)a[w], (double)r[w]);
		fail();
	}
	free(r);
}

/* pool3 and logits of the imported network on torch's 299x299 input. */
static void test_features(void **state)
{
	(void)state;
	char path[1024];
	snprintf(path, sizeof(path), "%s/inception.safetensors", dir);
	gf_ckpt *c;
	gf_net *net;
	NN_OK(gf_ckpt_open(&c, path));
	int i = gf_ckpt_find(c, "classifier");
	assert_true(i >= 0);
	assert_string_equal(gf_ckpt_part_meta(c, i, "input"), "fid");
	NN_OK(gf_ckpt_net(c, i, be, 3, &net));
	gf_ckpt_close(c);
	size_t nx;
	float *x = nn_ref(ref, "x299", &nx);
	assert_int_equal(nx, (size_t)3 * 3 * 299 * 299);
	gf_tensor in = gf_tensor_make(x, GF_F32, 4, (int64_t[]){ 3, 3, 299, 299 }), f, o;
	NN_OK(gf_net_forward(net, &in, NULL, GF_EVAL));
	NN_OK(gf_net_node(net, "features", &f));
	NN_OK(gf_net_output(net, &o));
	check("pool3", f.data, (size_t)gf_tensor_numel(&f), 1e-4);
	check("logits", o.data, (size_t)gf_tensor_numel(&o), 1e-4);
	free(x);
	gf_net_destroy(net);
}

/* [0, 255] images (colour and grey, odd sizes) to torch's 299x299 input. */
static void test_input(void **state)
{
	(void)state;
	static const struct {
		const char *src, *want;
		int n, c, h, w;
	} cases[] = { { "images", "x299", 3, 3, 40, 56 }, { "grey", "grey299", 1, 1, 33, 45 } };
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		size_t ns;
		float *s = nn_ref(ref, cases[k].src, &ns);
		assert_int_equal(ns, (size_t)cases[k].n * cases[k].c * cases[k].h * cases[k].w);
		size_t nd = (size_t)cases[k].n * 3 * 299 * 299;
		float *d = malloc(nd * sizeof(float));
		NN_OK(gf_fid_resize(d, s, cases[k].n, cases[k].c, cases[k].h, cases[k].w, 299, 299, 2.0f / 255.0f, -1.0f));
		check(cases[k].want, d, nd, 1e-5);
		free(s);
		free(d);
	}
	float one = 0, out[3 * 4];
	assert_int_equal(gf_fid_resize(out, &one, 1, 2, 1, 1, 2, 2, 1, 0), GF_EPARAM);
}

/* The evaluator's two ways in with features = inception: images in
 * [-1, 1] at their own size (gf_evaluator_add, a generator's side) and a
 * folder of PNGs (read as pytorch-fid reads files), against torch's pool3
 * of the same pixels; then `ganflow eval DIR DIR` on that folder, which
 * must refuse FID on 3 images naming the 2049 it needs. */
static void test_evaluator(void **state)
{
	(void)state;
	size_t ni = 0;
	float *img = nn_ref(ref, "images", &ni);   /* (3, 3, 40, 56) in [0, 255] */
	assert_int_equal(ni, (size_t)3 * 3 * 40 * 56);
	char path[1100], w[1100];
	snprintf(w, sizeof(w), "%s/inception.safetensors", dir);
	snprintf(path, sizeof(path), "%s/png", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	uint8_t pix[40 * 56 * 3];
	for (int i = 0; i < 3; i++) {
		for (int y = 0; y < 40; y++)
			for (int x = 0; x < 56; x++)
				for (int c = 0; c < 3; c++)
					pix[(y * 56 + x) * 3 + c] = (uint8_t)img[((size_t)(i * 3 + c) * 40 + y) * 56 + x];
		snprintf(path, sizeof(path), "%s/png/img%d.png", dir, i);
		NN_OK(gf_png_write(path, pix, 56, 40, 3, 0));
	}
	gf_evaluator_opts o = gf_evaluator_defaults();
	o.classifier = w;
	o.real = NULL;
	gf_evaluator *e;
	NN_OK(gf_evaluator_open(&e, &o));
	assert_true(gf_evaluator_fid(e));
	assert_int_equal(gf_evaluator_dim(e), 2048);
	for (size_t i = 0; i < ni; i++)
		img[i] = img[i] / 127.5f - 1.0f;
	NN_OK(gf_evaluator_add(e, img, NULL, 3, 3, 40, 56));
	int64_t n;
	const float *f = gf_evaluator_features(e, &n);
	assert_int_equal(n, 3);
	check("pool3", f, (size_t)3 * 2048, 1e-4);
	gf_evaluator_reset(e);
	int64_t added;
	uint64_t bad;
	snprintf(path, sizeof(path), "%s/png", dir);
	NN_OK(gf_evaluator_add_dataset(e, path, 0, &added, &bad));
	assert_int_equal(added, 3);
	f = gf_evaluator_features(e, &n);
	check("pool3", f, (size_t)3 * 2048, 1e-4);

	/* clean-fid's resize: the same features as pytorch-fid's pipeline
	 * given images gf_fid_resize_clean already took to 299x299 (where
	 * the bilinear resize is the identity) */
	float *pre = malloc((size_t)3 * 3 * 299 * 299 * sizeof(float)), *want = malloc((size_t)3 * 2048 * sizeof(float));
	assert_non_null(pre && want);
	NN_OK(gf_fid_resize_clean(pre, img, 3, 3, 40, 56, 299, 299, 1.0f, 0.0f));
	gf_evaluator_reset(e);
	NN_OK(gf_evaluator_add(e, pre, NULL, 3, 3, 299, 299));
	memcpy(want, gf_evaluator_features(e, &n), (size_t)3 * 2048 * sizeof(float));
	gf_evaluator_close(e);
	o.clean_resize = 1;
	NN_OK(gf_evaluator_open(&e, &o));
	NN_OK(gf_evaluator_add(e, img, NULL, 3, 3, 40, 56));
	f = gf_evaluator_features(e, &n);
	assert_int_equal(n, 3);
	assert_memory_equal(f, want, (size_t)3 * 2048 * sizeof(float));
	gf_evaluator_close(e);
	free(pre);
	free(want);
	free(img);
	assert_int_equal(sh("%s eval %s %s features=inception weights=%s cache=false > %s/eval.txt 2>&1", ganflow, path,
	                    path, w, dir),
	                 1);
	assert_int_equal(sh("grep -q 'n >= 2049' %s/eval.txt", dir), 0);
	/* resize=clean is the Inception's: refused with the classifier, by name */
	assert_int_equal(sh("%s eval %s %s resize=clean > %s/eval.txt 2>&1", ganflow, path, path, dir), 2);
	assert_int_equal(sh("grep -q 'resize=clean goes with features=inception' %s/eval.txt", dir), 0);
	assert_int_equal(sh("%s eval %s %s resize=bicubic > %s/eval.txt 2>&1", ganflow, path, path, dir), 2);
	assert_int_equal(sh("grep -q 'bad value resize=bicubic' %s/eval.txt", dir), 0);
}

/* FID, IS and KID at Inception's dimensions (2048 features, 1008 classes)
 * against numpy/scipy (pytorch-fid's FID, torch-fidelity's KID), within
 * 1e-6 relative. */
static void test_scores(void **state)
{
	(void)state;
	const char *src = getenv("GF_SOURCE_DIR");
	assert_int_equal(sh("%s/tests/ref/fid_inception.py scores %s", src ? src : ".", dir), 0);
	char path[1100];
	snprintf(path, sizeof(path), "%s/scores.safetensors", dir);
	gf_st_file *f;
	NN_OK(gf_st_open(&f, path));
	gf_tensor real, fake, probs;
	NN_OK(gf_st_get(f, "real", &real));
	NN_OK(gf_st_get(f, "fake", &fake));
	NN_OK(gf_st_get(f, "probs", &probs));
	int d = (int)real.shape[1];
	assert_int_equal(d, 2048);
	assert_int_equal(probs.shape[1], 1008);
	double want[5], got[5];
	snprintf(path, sizeof(path), "%s/scores.txt", dir);
	FILE *fp = fopen(path, "r");
	assert_non_null(fp);
	for (int i = 0; i < 5; i++) {
		char name[32];
		assert_int_equal(fscanf(fp, "%31s %lf", name, &want[i]), 2);
	}
	fclose(fp);
	gf_feat_stats a = { 0 }, b = { 0 };
	NN_OK(gf_feat_stats_compute(real.data, real.shape[0], d, &a));
	NN_OK(gf_feat_stats_compute(fake.data, fake.shape[0], d, &b));
	NN_OK(gf_fid(&a, &b, &got[0]));
	NN_OK(gf_inception_score(probs.data, probs.shape[0], 1008, 10, &got[1], &got[2]));
	NN_OK(gf_kid(real.data, real.shape[0], fake.data, fake.shape[0], d, 10, 1000, 777, &got[3], &got[4]));
	static const char *names[] = { "FID", "IS", "IS std", "KID", "KID std" };
	for (int i = 0; i < 5; i++) {
		double rel = fabs(got[i] - want[i]) / fabs(want[i]);
		fprintf(stderr, "  %-8s ganflow %.12g numpy/scipy %.12g relative %.2g\n", names[i], got[i], want[i], rel);
		assert_true(rel <= 1e-6);
	}
	gf_feat_stats_free(&a);
	gf_feat_stats_free(&b);
	gf_st_close(f);
}

/* Import errors name the file and the first tensor at fault; nothing is written. */
static void test_import_errors(void **state)
{
	(void)state;
	static const struct {
		const char *file, *msg;
	} bad[] = {
		{ "truncated.pth", "truncated.pth: not a readable PyTorch file" },
		{ "shape.pth", "tensor 'Mixed_6b.branch7x7_2.conv.weight' has shape (128, 128, 7, 1), the network expects "
		               "(128, 128, 1, 7)" },
		{ "missing.pth", "tensor 'Mixed_5b.branch5x5_1.conv.weight' is missing" },
		{ "extra.pth", "tensor 'AuxLogits.fc.weight' is not part of the FID Inception network" },
		{ "other.pth", "tensor 'Conv2d_1a_3x3.conv.weight' is missing" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(sh("%s weights import %s/%s %s/bad.safetensors > %s/err.txt 2>&1", ganflow, dir, bad[i].file,
		                    dir, dir),
		                 1);
		char path[1100], msg[4096] = "";
		snprintf(path, sizeof(path), "%s/err.txt", dir);
		FILE *f = fopen(path, "r");
		assert_non_null(f);
		size_t n = fread(msg, 1, sizeof(msg) - 1, f);
		msg[n] = '\0';
		fclose(f);
		if (!strstr(msg, bad[i].msg)) {
			fprintf(stderr, "%s: got\n%s\nwanted '%s'\n", bad[i].file, msg, bad[i].msg);
			fail();
		}
		snprintf(path, sizeof(path), "%s/bad.safetensors", dir);
		assert_int_not_equal(access(path, F_OK), 0);
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_inception GANFLOW\n");
		return 2;
	}
	ganflow = argv[1];
	if (system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) {
		fprintf(stderr, "skipped: no /usr/bin/python3 with torch\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_input),
		cmocka_unit_test(test_features),
		cmocka_unit_test(test_evaluator),
		cmocka_unit_test(test_scores),
		cmocka_unit_test(test_import_errors),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
