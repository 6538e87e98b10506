/* ganflow CRC-32C (Castagnoli): the checksum of dataset records and of
 * TensorBoard's TFRecord framing. Where the CPU has AVX-512 VPCLMULQDQ,
 * blocks of 1 KiB and more are folded with carry-less multiplications
 * (about 25 GB/s a core, as fast as memory streams); otherwise the SSE 4.2
 * crc32 instruction in three interleaved streams (about 10 GB/s from
 * memory, 20 from cache); a table where neither exists (about 0.5 GB/s).
 * All give the same values. GF_CRC32C_NO_FOLD=1 in the environment turns
 * the folding off (for tests and comparisons). Thread-safe. */
#ifndef GANFLOW_CRC32C_H
#define GANFLOW_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CRC-32C of n bytes, continuing from crc (0 to start): gf_crc32c(0, "123456789", 9) == 0xe3069283. */
uint32_t gf_crc32c(uint32_t crc, const void *data, size_t n);

/* The implementation in use: "vpclmulqdq", "sse4.2" or "table". */
const char *gf_crc32c_impl(void);

#ifdef __cplusplus
}
#endif
#endif
