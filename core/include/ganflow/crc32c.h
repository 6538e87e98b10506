/* ganflow CRC-32C (Castagnoli): the checksum of dataset records and of
 * TensorBoard's TFRecord framing. The implementation is chosen once, the
 * fastest the CPU has (GB/s a core from memory / from cache on a 2-core
 * AMD EPYC, `tests/bench/run crc32c`; a plain sum of the bytes: 23-26):
 *   "vpclmulqdq"  AVX-512 VPCLMULQDQ folding, 256 bytes a round   23-27 / 56
 *   "pclmulqdq"   SSE PCLMULQDQ folding beside three crc32
 *                 streams, 320 bytes a step (any x86-64 since
 *                 2010: Westmere, Bulldozer and later)          22-24 / 26
 *   "sse4.2"      the crc32 instruction in three streams         10 / 18
 *   "table"       a table lookup a byte (other CPUs)            0.5
 * All give the same values. For tests and comparisons, GF_CRC32C=NAME in
 * the environment picks one (a CPU that cannot run it keeps the default,
 * with a warning), GF_CRC32C_NO_FOLD=1 means "sse4.2", and gf_crc32c_use
 * switches at run time. Thread-safe. */
#ifndef GANFLOW_CRC32C_H
#define GANFLOW_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CRC-32C of n bytes, continuing from crc (0 to start): gf_crc32c(0, "123456789", 9) == 0xe3069283. */
uint32_t gf_crc32c(uint32_t crc, const void *data, size_t n);

/* The implementation in use: "vpclmulqdq", "pclmulqdq", "sse4.2" or "table". */
const char *gf_crc32c_impl(void);

/* Makes implementation `name` (as above) the one every later gf_crc32c
 * call in the process runs; NULL returns to the choice made at start (the
 * fastest the CPU has, or GF_CRC32C's). For tests and benchmarks. Returns 0, GF_EPARAM for an unknown
 * name, GF_EUNSUPPORTED where this CPU cannot run it (message with
 * gf_errmsg). Calls racing with it may run either: same values. */
int gf_crc32c_use(const char *name);

#ifdef __cplusplus
}
#endif
#endif
