/* ganflow values: the checked, Lua-free form of configuration.
 *
 * The Lua layer (core/lua/lua.c) turns the tables of a pipeline script into
 * trees of gf_value: stage parameters, backbone layer tables, optimiser
 * settings. Stages and the nn engine read these trees and never see Lua.
 *
 * A value is nil, a boolean, an integer, a number, a string, a list (array
 * part of a Lua table, 1-based in Lua, 0-based here) or a map (string keys,
 * kept in insertion order as given by the Lua layer; lookups are by name).
 * A value tree owns all its strings and children; gf_value_free() releases
 * the whole tree.
 */
#ifndef GANFLOW_VALUE_H
#define GANFLOW_VALUE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
	GF_VNIL = 0,
	GF_VBOOL,
	GF_VINT,
	GF_VNUM,
	GF_VSTR,
	GF_VLIST,
	GF_VMAP
} gf_vtype;

typedef struct gf_value gf_value;
struct gf_value {
	gf_vtype type;
	union {
		int b;          /* GF_VBOOL */
		int64_t i;      /* GF_VINT */
		double n;       /* GF_VNUM */
		char *s;        /* GF_VSTR, NUL-terminated, owned */
		struct {        /* GF_VLIST and GF_VMAP */
			size_t len;
			size_t cap;
			gf_value *items; /* (len) children, owned */
			char **keys;     /* (len) names for GF_VMAP, NULL for GF_VLIST */
		} c;
	} u;
};

/* Name of a type ("nil", "boolean", "integer", "number", "string", "list",
 * "table"), for error messages. */
const char *gf_vtype_name(gf_vtype t);

/* ---- construction ---- */

/* Scalar constructors: return the value by copy; gf_value_str copies s
 * (NULL gives nil). A value returned by gf_value_str owns its string and
 * must be released with gf_value_free() unless it is moved into a container. */
gf_value gf_value_nil(void);
gf_value gf_value_bool(int b);
gf_value gf_value_int(int64_t i);
gf_value gf_value_num(double n);
gf_value gf_value_str(const char *s);
gf_value gf_value_list(void);
gf_value gf_value_map(void);

/* Appends v to a list, taking ownership of v. Returns 0 or -ENOMEM
 * (v is freed on failure). */
int gf_value_append(gf_value *list, gf_value v);

/* Sets key to v in a map, replacing an existing entry, taking ownership of
 * v. Returns 0 or -ENOMEM (v is freed on failure). */
int gf_value_set(gf_value *map, const char *key, gf_value v);

/* Deep copy of src into *dst. Returns 0 or -ENOMEM. */
int gf_value_copy(gf_value *dst, const gf_value *src);

/* Releases everything v owns and leaves it nil. Safe on nil and on NULL. */
void gf_value_free(gf_value *v);

/* ---- access ---- */

/* Entry of a map by key, or NULL when v is not a map or has no such key.
 * The pointer is owned by the tree and valid until it is modified or freed. */
const gf_value *gf_value_get(const gf_value *v, const char *key);

/* Item i of a list (0-based), or NULL when out of range or not a list. */
const gf_value *gf_value_at(const gf_value *v, size_t i);

/* Number of items of a list or map; 0 for anything else. */
size_t gf_value_len(const gf_value *v);

/* Positional argument i (0-based) of a Lua-style table: item i of a list,
 * or the entry with key "<i+1>" of a map (a Lua table that mixes an array
 * part with named keys, such as {"bn", 128, eps = 0.8}, arrives as a map
 * whose array items have the keys "1", "2", ...). NULL when absent. */
const gf_value *gf_value_arg(const gf_value *v, size_t i);

/* Number of positional arguments (see gf_value_arg). */
size_t gf_value_nargs(const gf_value *v);

/* Typed reads with a fallback: each returns def when v is NULL or nil.
 * gf_value_as_num accepts integers too; gf_value_as_int accepts numbers
 * with an integral value. *ok (may be NULL) is set to 0 on a type mismatch
 * (and def returned), 1 otherwise. */
int64_t gf_value_as_int(const gf_value *v, int64_t def, int *ok);
double gf_value_as_num(const gf_value *v, double def, int *ok);
int gf_value_as_bool(const gf_value *v, int def, int *ok);
const char *gf_value_as_str(const gf_value *v, const char *def, int *ok);

/* Writes v as a Lua expression into buf, always NUL-terminated (valid Lua:
 * `return <text>` gives the same tree back through gf_lua_eval). Used for
 * error messages and for tables stored as text (a checkpoint's layer
 * table, the config copy in a run directory).
 * Returns 0 when the whole text fit in size bytes, or -ENOSPC when it did
 * not: buf then holds what fits, ending in "..." (when size >= 4), which is
 * enough for a message but is not the value: a caller that stores the text
 * must treat -ENOSPC as an error (a bigger buffer, or a failure naming the
 * value), never keep the cut text. */
int gf_value_format(const gf_value *v, char *buf, size_t size);

/* ---- JSON (core/base/value_json.c) ---- */

/* Writes v as JSON into *out (malloc'd, NUL-terminated; free() it): nil as
 * null, integers without a fraction, numbers always with one ("1.0"), so
 * gf_value_from_json gives the same types back; map keys sorted (numeric
 * keys in numeric order first), so one tree always gives the same text.
 * Returns 0, -ENOMEM, or GF_EPARAM for a non-finite number. */
int gf_value_to_json(const gf_value *v, char **out);

/* Parses JSON text into *out (the caller frees it with gf_value_free):
 * objects become maps (keys in text order), arrays lists, numbers without
 * '.', 'e' or 'E' that fit int64 integers, other numbers numbers. Returns
 * 0, -ENOMEM, or GF_EPARAM with the offset of the fault in gf_errmsg()
 * ("JSON: expected ',' or '}' at offset 17"); *out is nil on error. */
int gf_value_from_json(const char *text, gf_value *out);

#ifdef __cplusplus
}
#endif
#endif
