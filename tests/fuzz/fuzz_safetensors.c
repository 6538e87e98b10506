/* libFuzzer target: the safetensors reader (core/nn/safetensors.c), which
 * loads checkpoints, references and resumed runs from files a user hands
 * over. The input is a whole file image: gf_st_open_mem must refuse
 * anything malformed with GF_ECORRUPT (never read outside the image), and
 * what it accepts must be usable: every tensor's descriptor lies inside
 * the image and has as many bytes as its shape says, gf_st_read copies it
 * with its own shape, metadata keys and values are NUL-terminated, and an
 * image re-encoded from the tensors ganflow can express opens again.
 *
 * Built with clang -fsanitize=fuzzer,address,undefined straight from the
 * sources (tests/data.cmake), run briefly by ctest over the seed corpus
 * in tests/fuzz/corpus_safetensors/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/safetensors.h>

#define MAX_TENSORS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	gf_st_file *f;
	if (gf_st_open_mem(&f, data, size, "fuzz.safetensors")) {
		gf_clearerr();
		return 0;
	}
	size_t n = gf_st_count(f);
	gf_st_entry entries[MAX_TENSORS];
	size_t ne = 0;
	for (size_t i = 0; i < n; i++) {
		const char *name = gf_st_name(f, i);
		if (!name)
			abort();
		gf_tensor t;
		if (gf_st_get(f, name, &t))
			continue; /* a dtype ganflow has no type for */
		size_t bytes = gf_tensor_bytes(&t);
		if (bytes > size)
			abort(); /* the data lies inside the image */
		void *dst = malloc(bytes ? bytes : 1);
		if (!dst)
			abort();
		if (gf_st_read(f, name, t.dtype, t.ndim, t.shape, dst))
			abort(); /* its own dtype and shape must read */
		if (bytes && memcmp(dst, t.data, bytes))
			abort();
		free(dst);
		if (ne < MAX_TENSORS && name[0] && strcmp(name, "__metadata__"))
			entries[ne++] = (gf_st_entry){ .name = name, .t = t };
	}
	for (size_t i = 0; i < gf_st_meta_count(f); i++) {
		const char *k = gf_st_meta_key(f, i);
		if (!k)
			abort();
		const char *v = gf_st_meta(f, k);
		if (!v)
			abort();
		(void)strlen(v);
	}
	(void)gf_st_meta_key(f, gf_st_meta_count(f)); /* out of range: NULL, no read */
	/* what was read writes back and opens again */
	void *img;
	size_t len;
	if (gf_st_encode(entries, ne, NULL, &img, &len) == 0) {
		gf_st_file *g;
		if (gf_st_open_mem(&g, img, len, "re-encoded"))
			abort();
		if (gf_st_count(g) != ne)
			abort();
		gf_st_close(g);
		free(img);
	}
	gf_st_close(f);
	gf_clearerr();
	return 0;
}
