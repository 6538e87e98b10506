/* ganflow tensors: a shape, a dtype, a layout, a device and a data pointer.
 *
 * A gf_tensor is a plain descriptor (a view): it never owns its data. The
 * memory belongs to whoever set `data`: a message buffer (valid until
 * gf_msg_release), a network's flat parameter block (valid for the life of
 * the network), an LMDB map (valid while the reader stage lives), a backend
 * allocation. Tensors are contiguous in the order their layout names.
 */
#ifndef GANFLOW_TENSOR_H
#define GANFLOW_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GF_MAX_DIMS 6

typedef enum {
	GF_F32 = 0,
	GF_F16,
	GF_BF16,
	GF_U8,
	GF_I32,
	GF_I64
} gf_dtype;

/* Layout of 4-d image tensors; other ranks use GF_NCHW to mean "row-major
 * in the order of shape[]". */
typedef enum {
	GF_NCHW = 0,
	GF_NHWC
} gf_layout;

typedef enum {
	GF_CPU = 0,
	GF_CUDA
} gf_device;

typedef struct gf_tensor {
	int ndim;
	int64_t shape[GF_MAX_DIMS];
	gf_dtype dtype;
	gf_layout layout;
	gf_device device;
	int device_index;   /* GPU ordinal for GF_CUDA, 0 otherwise */
	void *data;         /* not owned; see above */
} gf_tensor;

/* Bytes of one element of a dtype (4, 2, 2, 1, 4, 8). */
size_t gf_dtype_size(gf_dtype t);

/* Name of a dtype ("f32", "f16", "bf16", "u8", "i32", "i64"); the names are
 * also the ones used in safetensors headers after upper-casing ("F32"...). */
const char *gf_dtype_name(gf_dtype t);

/* Number of elements (product of shape; 1 for ndim 0). */
int64_t gf_tensor_numel(const gf_tensor *t);

/* Bytes of data: numel * element size. */
size_t gf_tensor_bytes(const gf_tensor *t);

/* Fills a CPU f32 descriptor over data with the given shape (ndim <= 6).
 * Returns the descriptor; data is not touched. */
gf_tensor gf_tensor_make(void *data, gf_dtype dtype, int ndim, const int64_t *shape);

/* 1 when a and b have the same ndim and shape, 0 otherwise. */
int gf_tensor_same_shape(const gf_tensor *a, const gf_tensor *b);

/* Writes "(64, 1, 32, 32) f32" into buf; returns buf. For error messages. */
char *gf_tensor_shape_str(const gf_tensor *t, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
