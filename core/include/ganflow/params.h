/* ganflow stage parameters: checking a pipeline's values against a stage's
 * declared parameters.
 *
 * The runtime calls gf_params_check for every stage instance before anything
 * runs, so a typo in a key, a value of the wrong type or a missing required
 * parameter is an error that names the stage instance and the key, not a
 * surprise halfway through training. Stages receive the checked map in
 * create() and read it with the gf_value_as_* helpers.
 */
#ifndef GANFLOW_PARAMS_H
#define GANFLOW_PARAMS_H

#include <stddef.h>

#include <ganflow/stage.h>
#include <ganflow/value.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Name of a parameter type for messages and `ganflow stages`
 * ("integer", "number", "boolean", "string", "list", "table", "any"). */
const char *gf_param_type_name(gf_param_type t);

/* Parses the default of p (see gf_param_desc.def) into *out: an integer,
 * number, boolean or string value, or nil for "nil". Returns 0,
 * GF_ENOTFOUND when p is required (def == NULL; *out is nil), or GF_EPARAM
 * when the text does not parse as p's type (a stage bug), with a message
 * naming the parameter in err. */
int gf_param_default(const gf_param_desc *p, gf_value *out, char *err, size_t errsize);

/* Checks the values a pipeline gave (`given`: a GF_VMAP, an empty list, nil
 * or NULL) against desc's declared parameters and builds *out, a GF_VMAP
 * with one entry per declared parameter in declaration order: the given
 * value (integers given for GF_PARAM_NUM become numbers; integral numbers
 * given for GF_PARAM_INT become integers) or the default (nil for "nil").
 * `instance` names the stage instance in messages.
 * Returns 0 (*out owned by the caller: gf_value_free), or GF_EPARAM with a
 * message in err:
 *   unknown key   "stage 'src' (count_source): unknown parameter 'nn';
 *                  did you mean 'n'? (parameters: n, rate, ...)"
 *   wrong type    "stage 'src' (count_source): parameter 'n' must be an
 *                  integer, got string \"ten\""
 *   missing       "stage 'r' (reader): missing required parameter 'path'"
 *   out of range  "stage 'b' (batch): parameter 'size' is 0, outside
 *                  its range 1..1048576"
 *   not a choice  "stage 'd' (d_step): parameter 'mode' is \"syn\", not
 *                  one of sync|async; did you mean 'sync'?"
 * Defaults are not re-checked here: gf_param_check_desc checked them when
 * the stage was loaded. *out is nil on error. */
int gf_params_check(const gf_stage_desc *desc, const char *instance, const gf_value *given,
                    gf_value *out, char *err, size_t errsize);

/* Checks p's own declaration: its default parses as its type (as
 * gf_param_default), its `allowed` text parses for its type (a range for
 * integers and numbers, choices for strings, nothing for other types) and
 * the default lies inside it. The loader calls it for every parameter of a
 * stage it loads. Returns 0 or GF_EPARAM with a message naming the
 * parameter in err. */
int gf_param_check_desc(const gf_param_desc *p, char *err, size_t errsize);

/* ---- reading checked parameters (a stage's create()) ----
 *
 * params is the map create() receives: every declared parameter is present,
 * given or defaulted, converted to its type and inside its allowed range or
 * choices. So these take no default and a stage never re-checks what its
 * descriptor declares. Reading a key the stage did not declare is a stage
 * bug: it is logged and reads as 0, false or NULL. */

/* The value of key, or NULL for an optional parameter left out ("nil"
 * default) and for undeclared keys. Valid as long as params. */
const gf_value *gf_param(const gf_value *params, const char *key);

int64_t gf_param_int(const gf_value *params, const char *key);
double gf_param_num(const gf_value *params, const char *key);
int gf_param_bool(const gf_value *params, const char *key);

/* The string, or NULL when left out; valid as long as params. */
const char *gf_param_str(const gf_value *params, const char *key);

/* 1 when an optional ("nil" default) parameter was given, else 0. */
int gf_param_given(const gf_value *params, const char *key);

/* Edit distance (Damerau–Levenshtein, optimal string alignment) between two
 * strings, for "did you mean" suggestions. */
size_t gf_edit_distance(const char *a, const char *b);

/* The candidate closest to word by gf_edit_distance (first on ties), or
 * NULL when n == 0. */
const char *gf_closest(const char *word, const char *const *cands, size_t n);

#ifdef __cplusplus
}
#endif
#endif
