/* st_splice OUT TENSORS_FROM META_FROM: writes OUT with the tensors of one
 * safetensors file and the metadata of another, to make checkpoints whose
 * stored layer table does not match their weights (evaluator bad-input
 * test). */
#include <stdio.h>
#include <stdlib.h>

#include <ganflow/err.h>
#include <ganflow/safetensors.h>

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: st_splice OUT TENSORS_FROM META_FROM\n");
		return 2;
	}
	gf_st_file *t, *m;
	if (gf_st_open(&t, argv[2]) || gf_st_open(&m, argv[3])) {
		fprintf(stderr, "st_splice: %s\n", gf_errmsg());
		return 1;
	}
	size_t n = gf_st_count(t), nm = gf_st_meta_count(m);
	gf_st_entry *e = calloc(n ? n : 1, sizeof(*e));
	const char **meta = calloc(2 * nm + 1, sizeof(*meta));
	int rc = !e || !meta;
	for (size_t i = 0; i < n && !rc; i++) {
		e[i].name = gf_st_name(t, i);
		rc = gf_st_get(t, e[i].name, &e[i].t);
	}
	for (size_t i = 0; i < nm; i++) {
		meta[2 * i] = gf_st_meta_key(m, i);
		meta[2 * i + 1] = gf_st_meta(m, meta[2 * i]);
	}
	if (!rc && (rc = gf_st_write(argv[1], e, n, meta)))
		fprintf(stderr, "st_splice: %s\n", gf_errmsg());
	free(e);
	free(meta);
	gf_st_close(t);
	gf_st_close(m);
	return rc != 0;
}
