/* ganflow safetensors files: checkpoints, reference tensors, weights.
 *
 * The format (https://github.com/huggingface/safetensors): an 8-byte
 * little-endian header length N, N bytes of JSON
 *   {"__metadata__": {"key": "value", ...},
 *    "name": {"dtype": "F32", "shape": [64, 1, 3, 3], "data_offsets": [begin, end]}, ...}
 * then the raw little-endian tensor bytes; offsets are relative to the end
 * of the header. Files written here pad the header with spaces so the data
 * starts 8-byte aligned, store tensors in the order given, and are read by
 * Python's `safetensors` and by `safetensors.torch.load_file`.
 *
 * Writes are atomic: the file is written to "<path>.tmp.<pid>" in the same
 * directory, fsync'ed, renamed over path and the directory fsync'ed; on any
 * error (a full disk...) the temporary file is removed and the previous
 * file at path is left as it was. Errors name the path (gf_errmsg()).
 *
 * Reading checks the whole header before returning: JSON syntax, known
 * dtypes, shapes that match the byte ranges, ranges inside the file and not
 * overlapping. A corrupt or truncated file is GF_ECORRUPT naming the path
 * and what is wrong.
 */
#ifndef GANFLOW_SAFETENSORS_H
#define GANFLOW_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include <ganflow/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One tensor to write: a name (unique in the file, not "__metadata__")
 * and a host tensor descriptor (dtype, shape, data; layout and device are
 * ignored; data must be host memory). */
typedef struct gf_st_entry {
	const char *name;
	gf_tensor t;
} gf_st_entry;

/* Writes n tensors and the string metadata meta (a NULL-terminated array of
 * key, value, key, value, ..., NULL; may be NULL) to path atomically.
 * Nothing is retained. Returns 0; -errno on a system failure (the previous
 * file at path intact); GF_EPARAM for a duplicate or empty name, a device
 * tensor, or a dtype safetensors cannot express. */
int gf_st_write(const char *path, const gf_st_entry *entries, size_t n, const char *const *meta);

/* The same bytes gf_st_write would write, as an image in memory (to send a
 * checkpoint part in a message). *out is allocated with malloc and owned by
 * the caller (free()); *len is its size. Returns 0, GF_EPARAM (as
 * gf_st_write) or -ENOMEM. */
int gf_st_encode(const gf_st_entry *entries, size_t n, const char *const *meta, void **out, size_t *len);

/* ---- reading ---- */

typedef struct gf_st_file gf_st_file;

/* Opens and validates path; the file's data is read into memory owned by
 * *out. Returns 0, -errno (open/read failure, with the path in
 * gf_errmsg()) or GF_ECORRUPT. Release with gf_st_close. */
int gf_st_open(gf_st_file **out, const char *path);
void gf_st_close(gf_st_file *f);

/* Opens an image in memory (size bytes at data, e.g. from gf_st_encode),
 * with the checks of gf_st_open; the bytes are copied, so data may be
 * released at once. name stands for the path in error messages. */
int gf_st_open_mem(gf_st_file **out, const void *data, size_t size, const char *name);

/* Number of tensors (metadata not counted), and the name of tensor i in
 * file order (owned by f, valid until gf_st_close). */
size_t gf_st_count(const gf_st_file *f);
const char *gf_st_name(const gf_st_file *f, size_t i);

/* Metadata value for key, or NULL. Owned by f. */
const char *gf_st_meta(const gf_st_file *f, const char *key);

/* Number of metadata entries, and the key of entry i in file order (owned
 * by f, NULL when i is out of range). */
size_t gf_st_meta_count(const gf_st_file *f);
const char *gf_st_meta_key(const gf_st_file *f, size_t i);

/* Descriptor of tensor `name`: dtype, shape and data pointing into f's
 * memory (valid until gf_st_close; possibly unaligned for odd offsets, so
 * copy before using it as a typed array). Returns 0, GF_ENOTFOUND, or
 * GF_EUNSUPPORTED for a valid safetensors dtype ganflow has no gf_dtype for
 * (F64, BOOL, ...). */
int gf_st_get(const gf_st_file *f, const char *name, gf_tensor *out);

/* Copies tensor `name` into dst (host memory of the tensor's size) after
 * checking that its dtype and shape are exactly dtype and (ndim, shape).
 * Returns 0, GF_ENOTFOUND or GF_ESHAPE, the message naming the tensor, the
 * file and both shapes. */
int gf_st_read(const gf_st_file *f, const char *name, gf_dtype dtype, int ndim,
               const int64_t *shape, void *dst);

#ifdef __cplusplus
}
#endif
#endif
