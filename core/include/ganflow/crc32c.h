/* ganflow CRC-32C (Castagnoli): the checksum of dataset records and of
 * TensorBoard's TFRecord framing. Uses the SSE 4.2 crc32 instruction where
 * the CPU has it (several GB/s a core), a table otherwise (about 0.5
 * GB/s); both give the same values. Thread-safe. */
#ifndef GANFLOW_CRC32C_H
#define GANFLOW_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CRC-32C of n bytes, continuing from crc (0 to start): gf_crc32c(0, "123456789", 9) == 0xe3069283. */
uint32_t gf_crc32c(uint32_t crc, const void *data, size_t n);

#ifdef __cplusplus
}
#endif
#endif
