/* Loading backend_cuda.so, on any machine where it was built (no GPU
 * needed): libganflow itself has no CUDA in it (nothing of CUDA is mapped
 * until a CUDA backend is asked for); the .so exports one descriptor with
 * the right ABI; gf_backend_open("cuda") either opens a working backend
 * (a GPU is present) or fails with GF_ENOBACKEND and "no CUDA device: ..."
 * (none is), never anything else; "auto" always gives a backend (CUDA or
 * the CPU); the appended ops are present on the CUDA backend and absent
 * from the CPU one; set_option checks its keys. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_nn_util.h"

static int mapped(const char *lib)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[1024];
	int found = 0;
	while (f && fgets(line, sizeof(line), f))
		found |= strstr(line, lib) != NULL;
	if (f)
		fclose(f);
	return found;
}

static void test_no_cuda_in_libganflow(void **state)
{
	(void)state;
	gf_backend *be;
	gf_backend_opts o = { .threads = 1 };
	NN_OK(gf_backend_open("cpu", &o, &be));
	assert_false(mapped("libcudart"));
	assert_false(mapped("libcudnn"));
	assert_false(mapped("libcublas"));
	/* the CPU backend has none of the device ops (graphs, events, stats),
	 * but the results left in its memory that the step stages use on
	 * every backend */
	assert_false(GF_BACKEND_HAS(be, graph_begin));
	assert_false(GF_BACKEND_HAS(be, event_create));
	assert_false(GF_BACKEND_HAS(be, stats));
	assert_true(GF_BACKEND_HAS(be, loss_dev));
	assert_true(GF_BACKEND_HAS(be, reduce_dev));
	assert_true(be->ops->size >= GF_BACKEND_OPS_BASE_SIZE);
	gf_backend_close(be);
}

static void test_descriptor(void **state)
{
	(void)state;
	char path[4096];
	snprintf(path, sizeof(path), "%s/backends/backend_cuda.so", getenv("GF_BINARY_DIR") ? getenv("GF_BINARY_DIR") : ".");
	void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl)
		fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
	assert_non_null(dl);
	const gf_backend_desc *d = dlsym(dl, "ganflow_backend");
	assert_non_null(d);
	assert_int_equal(d->abi, GF_BACKEND_ABI);
	assert_int_equal(d->size, sizeof(gf_backend_desc));
	assert_string_equal(d->name, "cuda");
	assert_non_null(d->create);
	/* only the descriptor is exported */
	assert_null(dlsym(dl, "gf_cu_gemm"));
	assert_null(dlsym(dl, "gf_cu_fill"));
	dlclose(dl);
}

static void test_open(void **state)
{
	(void)state;
	gf_backend *be = NULL;
	gf_backend_opts o = { .threads = 1 };
	int rc = gf_backend_open("cuda", &o, &be);
	if (rc) {
		/* no GPU here: a clear refusal, and "auto" falls back to the CPU */
		assert_int_equal(rc, GF_ENOBACKEND);
		assert_non_null(strstr(gf_errmsg(), "no CUDA device"));
		printf("cuda backend refused as expected: %s\n", gf_errmsg());
		NN_OK(gf_backend_open("auto", &o, &be));
		assert_string_equal(be->ops->name, "cpu");
		gf_backend_close(be);
		o.precision = GF_PREC_BF16;
		assert_int_not_equal(gf_backend_open("auto", &o, &be), 0);   /* the CPU has no bf16 */
		return;
	}
	assert_string_equal(be->ops->name, "cuda");
	assert_int_equal(be->device, GF_CUDA);
	assert_true(be->caps & GF_CAP_CONV_UP2);
	assert_true(GF_BACKEND_HAS(be, graph_begin) && GF_BACKEND_HAS(be, graph_end) &&
	            GF_BACKEND_HAS(be, graph_destroy) && GF_BACKEND_HAS(be, loss_dev) && GF_BACKEND_HAS(be, stats) &&
	            GF_BACKEND_HAS(be, pinned_alloc) && GF_BACKEND_HAS(be, event_wait) && GF_BACKEND_HAS(be, grad_unscale));
	assert_int_equal(be->ops->set_option(be, "determinstic", "1"), GF_EPARAM);
	assert_int_equal(be->ops->set_option(be, "tf32", "maybe"), GF_EPARAM);
	NN_OK(be->ops->set_option(be, "tf32", "1"));
	NN_OK(be->ops->set_option(be, "layout", "nhwc"));
	gf_backend_stats st;
	NN_OK(be->ops->stats(be, &st));
	assert_int_equal(st.layout, GF_LAYOUT_NHWC);
	assert_int_equal(st.tf32, 1);
	assert_int_equal(st.deterministic, 1);
	printf("cuda backend on %s\n", st.device_name);
	gf_backend_close(be);
	NN_OK(gf_backend_open("auto", &o, &be));
	assert_string_equal(be->ops->name, "cuda");
	gf_backend_close(be);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_cuda_in_libganflow),
		cmocka_unit_test(test_descriptor),
		cmocka_unit_test(test_open),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
