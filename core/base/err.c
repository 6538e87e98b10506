/* core/base, the floor of libganflow: error codes and messages (err.c),
 * logging, time and progress bars (log.c), values and their JSON and Lua
 * text forms (value.c, value_json.c, lua_value.c), tensor descriptors
 * (tensor.c), CRC-32C (crc32c.c), fences and futex events (atomics.c) and
 * the plugin search path (plugin_path.c). It uses nothing else in core/
 * (only libc, LMDB's error names, Lua for lua_value.c); every other folder
 * may use it.
 *
 * Error names and the per-thread detail message. See <ganflow/err.h>. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <lmdb.h>

#include <ganflow/err.h>

static _Thread_local char errmsg[1024];

const char *gf_strerror(int rc)
{
	switch (rc) {
	case GF_OK: return "success";
	case GF_ESTOP: return "graph stopping";
	case GF_EEOF: return "end of data";
	case GF_EFAIL: return "stage failed";
	case GF_EPARAM: return "bad parameter";
	case GF_EABI: return "stage ABI mismatch";
	case GF_ENOTFOUND: return "not found";
	case GF_EKIND: return "message kinds differ";
	case GF_ESHAPE: return "shape mismatch";
	case GF_ECORRUPT: return "corrupt data";
	case GF_ENONFINITE: return "non-finite value";
	case GF_ELUA: return "error in pipeline script";
	case GF_EGRAPH: return "invalid graph";
	case GF_ENOBACKEND: return "backend not available";
	case GF_EDIST: return "distributed run failed";
	case GF_EUNSUPPORTED: return "not supported";
	}
	if (rc <= MDB_KEYEXIST && rc >= MDB_LAST_ERRCODE)
		return mdb_strerror(rc);
	if (rc < 0 && rc > -4096)
		return strerror(-rc);
	return "unknown error";
}

const char *gf_errmsg(void)
{
	return errmsg;
}

int gf_seterr(int rc, const char *fmt, ...)
{
	/* Formatted aside first: callers may pass gf_errmsg() itself as an
	 * argument to add context to the message below them. */
	char tmp[sizeof(errmsg)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	memcpy(errmsg, tmp, sizeof(errmsg));
	return rc;
}

void gf_clearerr(void)
{
	errmsg[0] = '\0';
}
