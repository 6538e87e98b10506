/* The CUDA backend's peak FLOP/s table (peak_cuda.c): plain C, without
 * the CUDA headers, so that tests/test_flops.c checks the table on a
 * machine without a GPU. */
#ifndef GF_NN_CUDA_PEAK_H
#define GF_NN_CUDA_PEAK_H

#include <stddef.h>

#include <ganflow/backend.h>

/* The dense peak FLOP/s of a device at the precision its convolutions and
 * GEMMs run in: prec GF_PREC_BF16 or GF_PREC_FP16, else fp32, on TF32
 * tensor cores when tf32 (GF_PREC_TF32, or fp32 convolutions allowed
 * TF32). From the table of NVIDIA's datasheet figures by device name
 * (cudaDeviceProp.name; sms, the multiprocessor count, tells an H100 PCIe
 * from an SXM whose name says neither); a device not in the table gets
 * fp32 only, from its properties: 2 x sms x FP32 lanes per SM (by compute
 * capability major.minor) x its clock (kHz). *flop_s and what (snprintf
 * rule: the device, the precision and where the figure comes from) are
 * set on success. Returns 0, or GF_EUNSUPPORTED with the reason set. */
int gf_cu_peak_lookup(const char *name, int sms, int major, int minor, int clock_khz, gf_precision prec, int tf32,
                      double *flop_s, char *what, size_t size);

#endif
