/* ganflow error codes.
 *
 * Every library and stage function returns int: 0 on success, -errno for a
 * system failure (liburing's rule), or one of the GF_E* codes below, which
 * live in a reserved negative range away from errno values and from LMDB's
 * MDB_* codes (-30799 .. -30780) so either can pass through unchanged.
 * gf_strerror() names any of them. A richer message (the file, key, stage or
 * parameter at fault) travels separately: gf_fail() on a stage context, or
 * gf_errmsg() for library calls made outside a graph.
 */
#ifndef GANFLOW_ERR_H
#define GANFLOW_ERR_H

#ifdef __cplusplus
extern "C" {
#endif

enum {
	GF_OK = 0,
	GF_ERR_BASE = -32000,
	GF_ESTOP = GF_ERR_BASE,   /* the graph is stopping; leave run() */
	GF_EEOF = -32001,         /* no more messages: every producer of the port finished */
	GF_EFAIL = -32002,        /* a stage failed; the message is on its context */
	GF_EPARAM = -32003,       /* bad parameter: unknown key, wrong type, out of range */
	GF_EABI = -32004,         /* stage .so with a foreign or old ABI, or no descriptor */
	GF_ENOTFOUND = -32005,    /* stage, file, key or tensor not found */
	GF_EKIND = -32006,        /* ports of different message kinds connected */
	GF_ESHAPE = -32007,       /* tensor shapes do not agree */
	GF_ECORRUPT = -32008,     /* corrupt record, header or file */
	GF_ENONFINITE = -32009,   /* NaN or Inf in a loss or gradient */
	GF_ELUA = -32010,         /* error in the Lua pipeline script */
	GF_EGRAPH = -32011,       /* invalid graph: unconnected input, cycle of depth 0, ... */
	GF_ENOBACKEND = -32012,   /* requested backend not available (no GPU, no CUDA libs) */
	GF_EDIST = -32013,        /* distributed failure: lost rank, mismatched pipelines */
	GF_EUNSUPPORTED = -32014, /* operation not supported by this backend or build */
	GF_ERR_LAST = -32014
};

/* Name of an error code: a GF_E* code, a -errno, or an LMDB code.
 * Returns a static string; never NULL. */
const char *gf_strerror(int rc);

/* Per-thread detail message of the last library error, set with gf_seterr().
 * Library calls made outside a graph (nn engine, shard readers, converters)
 * use it to say which file, key, layer or tensor was at fault.
 * The returned pointer is owned by the thread and valid until the next
 * gf_seterr() on the same thread. Empty string when nothing was set. */
const char *gf_errmsg(void);

/* Sets the per-thread detail message (printf-style) and returns rc, so a
 * caller can write `return gf_seterr(GF_ESHAPE, "layer %d (%s): ...", i, name);`.
 * The arguments may include gf_errmsg() itself (to add context to an
 * error from below). */
int gf_seterr(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears the per-thread detail message. */
void gf_clearerr(void);

#ifdef __cplusplus
}
#endif
#endif
