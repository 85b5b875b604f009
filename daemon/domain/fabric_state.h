/*
 * Fabric rows as the reconciler derives their states from them, and the
 * states it stores: the reconciler's side of the fabric table (the rest of
 * it is fabric.h's and topo.h's).
 *
 * Loop thread only, against the daemon's store.
 */
#ifndef OFCD_FABRIC_STATE_H
#define OFCD_FABRIC_STATE_H

#include <stddef.h>
#include <stdint.h>

struct store;

/** What the state derivation reads of a fabric's row. */
struct fabric_row {
	int64_t id;        /**< fabric.id */
	char name[65];     /**< its name */
	char state[16];    /**< its stored state */
	char err[400];     /**< its stored error, "" for none */
	int64_t revision;  /**< its plan's revision */
	int64_t nmissing;  /**< its pairs without a circuit */
	int64_t ncircuits; /**< its stored circuits */
};

/**
 * Reads fabric id's row into *out. Returns 1, 0 when there is no such fabric
 * or it is still being stored (fabric.h, struct fabric_parts: it has no state
 * to derive yet), or -EIO.
 */
int fabric_row_get(struct store *s, int64_t id, struct fabric_row *out);

/**
 * Calls fn for every fabric's row in id order (those still being stored
 * apart) until it returns nonzero.
 * Returns 0 once all were read, fn's nonzero value, or -EIO.
 */
int fabric_rows_each(struct store *s, int (*fn)(void *arg, const struct fabric_row *row),
                     void *arg);

/** Copies fabric id's name into name (len bytes). Returns 1, 0 when there is none, or -EIO. */
int fabric_name_get(struct store *s, int64_t id, char *name, size_t len);

/** One derived state to store. */
struct fabric_state_change {
	int64_t id;        /**< fabric.id */
	const char *state; /**< its new state */
	const char *error; /**< its error; "" or NULL: none */
};

/**
 * Stores the states v[0..n) with the time now as their "updated", in the
 * open transaction. Returns 0 or -EIO.
 */
int fabric_states_write(struct store *s, const struct fabric_state_change *v, size_t n);

#endif
