/*
 * JSON input checks: one validator per kind of member (whole number, number,
 * boolean, string, name, choice) and the unknown-member check, shared by the
 * REST API (api.c wraps each one into a 400 invalid_field reply) and the RDMA
 * inventory parser (rdma.c).
 *
 * Every check reads member key of object obj. A member that is absent or
 * JSON null is missing. Each returns 0 with *out set; 1 when the member is
 * missing and not required (*out untouched); or -EINVAL with the error
 * context filled in: the member to blame ("prefix.key", or "key" when prefix
 * is NULL or "") and a message that names it, e.g.
 * "ports must be from 1 to 65536, got 0".
 *
 * Pure functions of their arguments: any thread, no allocation. Strings
 * handed out point into obj and live as long as it does.
 */
#ifndef OFCD_JSONIN_H
#define OFCD_JSONIN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSONIN_FIELD_MAX 160 /**< member paths longer than this are cut */

/** What a failed check reports. Owned by the caller, usually on its stack. */
struct jsonin_err {
	char field[JSONIN_FIELD_MAX]; /**< member to blame, "" for the value as a whole */
	char msg[512];                /**< reason, naming the member */
};

/**
 * Fills e with field (which may be e->field itself) and the formatted message;
 * returns -EINVAL, so a caller can `return jsonin_fail(...)`.
 */
int jsonin_fail(struct jsonin_err *e, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** Writes "prefix.key" (or "key" when prefix is NULL or "") into buf; returns buf. */
const char *jsonin_field(char *buf, size_t len, const char *prefix, const char *key);

/** The member itself (any type) in *out; fails only as "X is required". */
int jsonin_member(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                  bool required, json_t **out);

/** A JSON integer within [min, max]. */
int jsonin_uint(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                bool required, uint64_t min, uint64_t max, uint64_t *out);

/** A JSON number (integer or real), finite, within [min, max]. */
int jsonin_double(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                  bool required, double min, double max, double *out);

/** true or false. */
int jsonin_bool(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                bool required, bool *out);

/** A string of minlen..maxlen bytes without NUL inside. */
int jsonin_string(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                  bool required, size_t minlen, size_t maxlen, const char **out);

/** A name: 1..64 characters of [A-Za-z0-9._-] (auth_valid_name). */
int jsonin_name(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                bool required, const char **out);

/** One of the NULL-terminated choices; *out is its index. */
int jsonin_enum(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                bool required, const char *const *choices, int *out);

/**
 * Fails naming the first member of obj not in the NULL-terminated allowed
 * list: a misspelt option is an error, not silently ignored. Where null is
 * written for a member, it counts as absent. Returns 0 or -EINVAL.
 */
int jsonin_check_members(struct jsonin_err *e, json_t *obj, const char *prefix,
                         const char *const *allowed);

/**
 * Like jsonin_check_members(), but null is an error, except for the members
 * whose allowed name ends in '?' ("switch?"): there null means none, and the
 * member is removed from obj so that the getters see it absent. For request
 * bodies, where a null the client did not mean must not pass for a default.
 */
int jsonin_check_members_strict(struct jsonin_err *e, json_t *obj, const char *prefix,
                                const char *const *allowed);

#endif
