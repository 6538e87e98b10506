/* The CUDA backend's peak FLOP/s (its peak_flops op, backend_cuda.c, reads
 * the device's properties and asks here): NVIDIA's datasheet figures by
 * device name, dense (the datasheets print the tensor-core figures with
 * 2:4 structured sparsity, marked *; dense is half of that), per
 * precision. docs/cuda.md "Peak FLOP/s" prints the same table with its
 * sources; tests/test_flops.c checks both agree with this one.
 *
 * Plain C without the CUDA headers (see peak_cuda.h). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include <ganflow/err.h>

#include "peak_cuda.h"

/* One device: how its name reads, and its dense TFLOP/s. tf32 0: no TF32
 * tensor cores (fp32 runs there); bf16 / fp16 0: none (the backend refuses
 * bf16 below compute capability 8.0). */
struct row {
	const char *token;     /* a word of cudaDeviceProp.name ("H100", "A100") */
	const char *qualifier; /* also in the name (case aside), or NULL */
	int sms;               /* or this multiprocessor count tells the variant (0: none) */
	const char *label;
	double fp32, tf32, bf16, fp16;
	const char *source;
};

static const struct row table[] = {
	{ "H100", "NVL", 0, "H100 NVL", 60, 417.5, 835.5, 835.5, "NVIDIA H100 datasheet" },
	{ "H100", "PCIE", 114, "H100 PCIe", 51, 378, 756.5, 756.5, "NVIDIA H100 datasheet" },
	{ "H100", NULL, 0, "H100 SXM", 67, 494.5, 989.5, 989.5, "NVIDIA H100 datasheet" },
	{ "H200", "NVL", 0, "H200 NVL", 60, 417.5, 835.5, 835.5, "NVIDIA H200 datasheet" },
	{ "H200", NULL, 0, "H200 SXM", 67, 494.5, 989.5, 989.5, "NVIDIA H200 datasheet" },
	{ "A100", NULL, 0, "A100", 19.5, 156, 312, 312, "NVIDIA A100 datasheet" },
	{ "A40", NULL, 0, "A40", 37.4, 74.8, 149.7, 149.7, "NVIDIA A40 datasheet" },
	{ "A10", NULL, 0, "A10", 31.2, 62.5, 125, 125, "NVIDIA A10 datasheet" },
	{ "L40S", NULL, 0, "L40S", 91.6, 183, 362.05, 362.05, "NVIDIA L40S datasheet" },
	{ "L40", NULL, 0, "L40", 90.5, 90.5, 181.05, 181.05, "NVIDIA L40 datasheet" },
	{ "L4", NULL, 0, "L4", 30.3, 60, 121, 121, "NVIDIA L4 datasheet" },
	{ "V100S", NULL, 0, "V100S PCIe", 16.4, 0, 0, 130, "NVIDIA V100 datasheet" },
	{ "V100", "PCIE", 0, "V100 PCIe", 14, 0, 0, 112, "NVIDIA V100 datasheet" },
	{ "V100", NULL, 0, "V100 SXM2", 15.7, 0, 0, 125, "NVIDIA V100 datasheet" },
	{ "T4", NULL, 0, "T4", 8.1, 0, 0, 65, "NVIDIA T4 datasheet" },
};

/* `tok` as a whole word of name: no letter or digit on either side
 * ("A100-SXM4-80GB" has A100, "RTX A1000" does not; "GH200" has no
 * H200). */
static int has_token(const char *name, const char *tok)
{
	size_t n = strlen(tok);
	for (const char *p = strstr(name, tok); p; p = strstr(p + 1, tok))
		if ((p == name || !isalnum((unsigned char)p[-1])) && !isalnum((unsigned char)p[n]))
			return 1;
	return 0;
}

static int has_ci(const char *name, const char *q)
{
	size_t n = strlen(q);
	for (const char *p = name; *p; p++) {
		size_t i = 0;
		while (i < n && p[i] && toupper((unsigned char)p[i]) == toupper((unsigned char)q[i]))
			i++;
		if (i == n)
			return 1;
	}
	return 0;
}

/* FP32 lanes per multiprocessor by compute capability, 0 unknown. */
static int fp32_lanes(int major, int minor)
{
	if (major == 7 || (major == 8 && minor == 0))
		return 64;   /* Volta, Turing, A100 */
	if (major == 8 || major == 9 || major == 10 || major == 12)
		return 128;  /* Ampere GA10x, Ada, Hopper, Blackwell */
	return 0;
}

int gf_cu_peak_lookup(const char *name, int sms, int major, int minor, int clock_khz, gf_precision prec, int tf32,
                      double *flop_s, char *what, size_t size)
{
	const char *pn = prec == GF_PREC_BF16 ? "bf16" : prec == GF_PREC_FP16 ? "fp16" : tf32 ? "tf32" : "fp32";
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		const struct row *r = &table[i];
		if (!has_token(name, r->token) ||
		    (r->qualifier && !has_ci(name, r->qualifier) && !(r->sms && sms == r->sms)))
			continue;
		double t = prec == GF_PREC_BF16 ? r->bf16 : prec == GF_PREC_FP16 ? r->fp16 : tf32 ? r->tf32 : r->fp32;
		const char *note = "";
		if (tf32 && prec != GF_PREC_BF16 && prec != GF_PREC_FP16 && t == 0) {
			t = r->fp32;   /* no TF32 tensor cores: the fp32 convolutions run as fp32 */
			note = " (no TF32 tensor cores: fp32)";
		}
		if (t == 0)
			return gf_seterr(GF_EUNSUPPORTED, "%s (%s): no %s peak (no %s tensor cores)", name, r->label, pn, pn);
		*flop_s = t * 1e12;
		snprintf(what, size, "%s (%s), %s dense%s: %g TFLOP/s, %s", name, r->label, pn, note, t, r->source);
		return 0;
	}
	int lanes = fp32_lanes(major, minor);
	if (prec == GF_PREC_BF16 || prec == GF_PREC_FP16 || tf32 || !lanes || sms <= 0 || clock_khz <= 0)
		return gf_seterr(GF_EUNSUPPORTED, "%s (compute capability %d.%d): not in the table of peaks (docs/cuda.md "
		                 "\"Peak FLOP/s\"), and a %s peak cannot be derived from its properties",
		                 name, major, minor, pn);
	*flop_s = 2.0 * sms * lanes * (clock_khz * 1e3);
	snprintf(what, size, "%s, fp32: %g TFLOP/s from its properties (2 x %d SMs x %d FP32 lanes x %.0f MHz), not in "
	         "the datasheet table", name, *flop_s * 1e-12, sms, lanes, clock_khz * 1e-3);
	return 0;
}
