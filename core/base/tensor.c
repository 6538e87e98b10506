/* Tensor descriptors: sizes, names and shape printing. See <ganflow/tensor.h>. */
#include <stdio.h>
#include <string.h>

#include <ganflow/tensor.h>

size_t gf_dtype_size(gf_dtype t)
{
	switch (t) {
	case GF_F32: return 4;
	case GF_F16: return 2;
	case GF_BF16: return 2;
	case GF_U8: return 1;
	case GF_I32: return 4;
	case GF_I64: return 8;
	}
	return 0;
}

const char *gf_dtype_name(gf_dtype t)
{
	switch (t) {
	case GF_F32: return "f32";
	case GF_F16: return "f16";
	case GF_BF16: return "bf16";
	case GF_U8: return "u8";
	case GF_I32: return "i32";
	case GF_I64: return "i64";
	}
	return "?";
}

int64_t gf_tensor_numel(const gf_tensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= t->shape[i];
	return n;
}

size_t gf_tensor_bytes(const gf_tensor *t)
{
	return (size_t)gf_tensor_numel(t) * gf_dtype_size(t->dtype);
}

gf_tensor gf_tensor_make(void *data, gf_dtype dtype, int ndim, const int64_t *shape)
{
	gf_tensor t;
	memset(&t, 0, sizeof(t));
	t.dtype = dtype;
	t.layout = GF_NCHW;
	t.device = GF_CPU;
	t.data = data;
	t.ndim = ndim < 0 ? 0 : ndim > GF_MAX_DIMS ? GF_MAX_DIMS : ndim;
	for (int i = 0; i < t.ndim; i++)
		t.shape[i] = shape[i];
	return t;
}

int gf_tensor_same_shape(const gf_tensor *a, const gf_tensor *b)
{
	if (a->ndim != b->ndim)
		return 0;
	for (int i = 0; i < a->ndim; i++)
		if (a->shape[i] != b->shape[i])
			return 0;
	return 1;
}

char *gf_tensor_shape_str(const gf_tensor *t, char *buf, size_t size)
{
	size_t len = 0;
	if (!size)
		return buf;
	buf[0] = '\0';
	len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "(");
	for (int i = 0; i < t->ndim && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
	if (len < size)
		snprintf(buf + len, size - len, ") %s", gf_dtype_name(t->dtype));
	return buf;
}
