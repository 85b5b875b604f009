/*
 * The operations as stored: every batch the reconciler sent to an OCS unit,
 * with its outcome and the fabrics it served, read back as JSON for the
 * operations routes (docs/api.md).
 *
 * Loop thread only, against the daemon's store. Every json_t handed out is a
 * new reference owned by the caller.
 */
#ifndef OFCD_OPERATIONS_H
#define OFCD_OPERATIONS_H

#include <jansson.h>
#include <stdint.h>

struct store;

/**
 * The newest operations first, at most limit of them, only those with an id
 * below before (0: any), only those sent to OCS unit ocs and only those that
 * served fabric (either filter NULL: any): a page, the next one starting
 * below the last id of this one. Each is {"id","ocs","trigger","nadds",
 * "ndeletes","status","started","error","ended","fabrics"}. Returns 0 and
 * the array in *out, -ENOMEM or -EIO.
 */
int operations_list(struct store *s, const char *ocs, const char *fabric, int64_t before,
                    uint32_t limit, json_t **out);

/**
 * One operation as in operations_list(), with its cross-connects "adds" and
 * "deletes" too. Returns 0 and the object in *out, -ENOENT when there is no
 * operation id, -ENOMEM or -EIO.
 */
int operations_get(struct store *s, int64_t id, json_t **out);

#endif
