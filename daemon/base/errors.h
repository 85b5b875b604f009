/*
 * The one table of stable error codes. Every REST error body reuses it:
 *   {"error": {"code": "<code>", "message": "...", "field": "..."}}
 * Codes are part of the API: never rename one, only add.
 */
#ifndef OFCD_ERRORS_H
#define OFCD_ERRORS_H

#include <jansson.h>
#include <stddef.h>

/** Error identifiers; index into the table in errors.c. */
enum ofcd_err {
	OFCD_OK = 0,
	OFCD_E_INVALID_JSON,       /**< 400: body is not well-formed JSON */
	OFCD_E_INVALID_FIELD,      /**< 400: missing, mistyped or out-of-range field */
	OFCD_E_UNAUTHORIZED,       /**< 401: no or unknown bearer token */
	OFCD_E_FORBIDDEN,          /**< 403: token's role does not allow this */
	OFCD_E_NOT_FOUND,          /**< 404: no such route or object */
	OFCD_E_METHOD_NOT_ALLOWED, /**< 405: route exists, method does not */
	OFCD_E_CONFLICT,           /**< 409: already exists */
	OFCD_E_IN_USE,             /**< 409: object is used by a fabric or another object */
	OFCD_E_BODY_TOO_LARGE,     /**< 413: body over [http] max_body */
	OFCD_E_UNSUPPORTED_MEDIA,  /**< 415: write without application/json */
	OFCD_E_UNPROCESSABLE, /**< 422: well-formed but not acceptable (e.g. cabling conflict) */
	OFCD_E_INFEASIBLE,    /**< 422: the request cannot be satisfied by the topology */
	OFCD_E_INTERNAL,      /**< 500: a bug or an unexpected library failure */
	OFCD_E_STORE,         /**< 503: the store could not commit (disk full, I/O error) */
	OFCD_E_SHUTTING_DOWN, /**< 503: the daemon is draining */
	OFCD_E_OVERLOADED,    /**< 503: every connection slot is taken (probes still served) */
	OFCD_E_PRECONDITION,  /**< 412: If-Match names another version of the object */
	OFCD_E_NOT_LEADER,    /**< 503: a cluster member that does not lead, and no leader known */
	OFCD_E_CHANGE_TOO_LARGE, /**< 413: a change larger than the cluster's log takes */
	OFCD_E_OUTCOME_UNKNOWN,  /**< 504: the cluster's log did not say whether it took a change */
	OFCD_E_BAD_REQUEST,      /**< 400: the request's framing is ambiguous or malformed */
	OFCD_E__COUNT
};

/** Stable code string ("invalid_json", ...). Never NULL for a valid err. Any thread. */
const char *ofcd_err_code(enum ofcd_err err);

/** HTTP status for err (200 for OFCD_OK). Any thread. */
unsigned ofcd_err_status(enum ofcd_err err);

/**
 * A refusal as a domain module reports it: what kind, which field, why. The
 * API turns it into the error body (api_fail); other callers log it. Owned
 * by the caller, usually on its stack; loop thread.
 */
struct ofcd_error {
	enum ofcd_err err; /**< kind of refusal; OFCD_OK while none */
	char field[160];   /**< the request field to blame, "" for none (jsonin's length) */
	char msg[512];     /**< a message naming the object and what to do */
	json_t *details;   /**< extra facts for the error body (owned), or NULL */
};

/**
 * Fills e (field may be NULL; details is stolen, may be NULL) and returns rc,
 * so a domain function can write `return ofcd_fail(e, -EBUSY, OFCD_E_IN_USE, ...)`.
 */
int ofcd_fail(struct ofcd_error *e, int rc, enum ofcd_err err, const char *field, json_t *details,
              const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/** Builds "prefix.key" (or "key" when prefix is NULL) into buf, for field names. */
const char *ofcd_field(char *buf, size_t len, const char *prefix, const char *key);

/** Releases what e owns (its details). */
void ofcd_error_clear(struct ofcd_error *e);

#endif
