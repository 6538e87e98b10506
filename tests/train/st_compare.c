/* st_compare A B [PREFIX...]: exits 0 when the safetensors files A and B
 * hold bit-identical tensors (all of them, or those whose names start with
 * one of the prefixes), 1 otherwise, naming the first tensor that differs.
 * Used by the resume-exactness test. */
#include <stdio.h>
#include <string.h>

#include <ganflow/err.h>
#include <ganflow/safetensors.h>

static int wanted(const char *name, int argc, char **argv)
{
	if (argc <= 3)
		return 1;
	for (int i = 3; i < argc; i++)
		if (!strncmp(name, argv[i], strlen(argv[i])))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: st_compare A B [PREFIX...]\n");
		return 2;
	}
	gf_st_file *a, *b;
	if (gf_st_open(&a, argv[1]) || gf_st_open(&b, argv[2])) {
		fprintf(stderr, "st_compare: %s\n", gf_errmsg());
		return 2;
	}
	int status = 0;
	size_t n = 0;
	for (size_t i = 0; i < gf_st_count(a) && !status; i++) {
		const char *name = gf_st_name(a, i);
		if (!wanted(name, argc, argv))
			continue;
		gf_tensor ta, tb;
		n++;
		if (gf_st_get(a, name, &ta) || gf_st_get(b, name, &tb)) {
			fprintf(stderr, "st_compare: '%s' missing in %s\n", name, argv[2]);
			status = 1;
		} else if (ta.dtype != tb.dtype || !gf_tensor_same_shape(&ta, &tb) ||
		           memcmp(ta.data, tb.data, gf_tensor_bytes(&ta))) {
			fprintf(stderr, "st_compare: '%s' differs\n", name);
			status = 1;
		}
	}
	if (!status)
		printf("st_compare: %zu tensors identical\n", n);
	gf_st_close(a);
	gf_st_close(b);
	return status;
}
