/*
 * The operations as stored: every batch the reconciler sent to an OCS unit,
 * with its outcome and the fabrics it served. The reconciler writes them
 * (operations_insert() and operations_end(), inside its transactions), the
 * operations routes read them back as JSON (docs/api.md).
 *
 * Loop thread only, against the daemon's store. Every json_t handed out is a
 * new reference owned by the caller.
 */
#ifndef OFCD_OPERATIONS_H
#define OFCD_OPERATIONS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

/** A batch's operation as the reconciler records it; every pointer borrowed for the call. */
struct operations_row {
	int64_t id;            /**< the operation's id (the reconciler numbers them) */
	const char *ocs;       /**< name of the unit it was sent to */
	const char *trigger;   /**< why: startup, change, connect, audit, retry */
	size_t nadd;           /**< cross-connects it adds */
	size_t ndel;           /**< cross-connects it removes */
	const char *adds;      /**< the added pairs as JSON text, [[a,b],...] */
	const char *dels;      /**< the removed ones, the same way */
	const char *status;    /**< "running", or how it ended (see operations_end()) */
	const char *error;     /**< why it failed; NULL: none */
	bool ended;            /**< it ended already: its end time is now */
	const json_t *fabrics; /**< names of the fabrics it touches (array of strings) */
};

/** Inserts an operation, its pairs and its fabrics, in the open transaction. 0 or -EIO. */
int operations_insert(struct store *s, const struct operations_row *op);

/**
 * Records how operation id ended: status "succeeded", "failed" or
 * "interrupted", error NULL or why; the end time is now. In the open
 * transaction. Returns 0 or -EIO.
 */
int operations_end(struct store *s, int64_t id, const char *status, const char *error);

/**
 * Forgets the operations older than the last @keep before @newest, the oldest first and at
 * most @most of them, in the open transaction. Returns how many it forgot (@most: there may
 * be more), or -EIO.
 */
int64_t operations_prune(struct store *s, int64_t newest, int64_t keep, int64_t most);

/** The id after the highest stored (1 for none). */
int64_t operations_next_id(struct store *s);

/**
 * Marks the operations a crash left running as interrupted, in a
 * transaction of its own (at the reconciler's start). Returns 0 or -EIO.
 */
int operations_interrupt_running(struct store *s);

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
