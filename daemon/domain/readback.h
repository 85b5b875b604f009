/*
 * What the OCS units hold as the reconciler last read them back, kept in the
 * store for operators and tools (actual_xc) and for the first moments after a
 * restart, and the ports whose link is down (ocs_port_down). Each member of
 * a cluster keeps its own (store_changes.h leaves them out of changesets).
 *
 * Loop thread only, against the daemon's store.
 */
#ifndef OFCD_READBACK_H
#define OFCD_READBACK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan_diff.h"

struct store;

/** Forgets what unit ocs_id was last seen to hold, in the open transaction. 0 or -EIO. */
int readback_clear(struct store *s, int64_t ocs_id);

/**
 * Rewrites what unit ocs_id holds from old[0..on) (as last written) to
 * now[0..n) (both sorted by plan_xc_cmp()): only the rows that differ, in the
 * open transaction. Returns 0 or -EIO.
 */
int readback_write(struct store *s, int64_t ocs_id, const struct plan_xc *old, size_t on,
                   const struct plan_xc *now, size_t n);

/**
 * What unit ocs_id was last seen to hold, as stored: *out (malloc'd, the
 * caller's, sorted; never NULL on success) and *n, leaving out any pair that
 * does not fit ports 1..ports. Returns 0 or -ENOMEM.
 */
int readback_load(struct store *s, int64_t ocs_id, uint32_t ports, struct plan_xc **out, size_t *n);

/** Records port of unit ocs_id going up or down, in a relaxed transaction of its own. */
int readback_port_link(struct store *s, int64_t ocs_id, uint32_t port, bool up);

/** The ports of unit ocs_id whose link is down, as a new JSON array of numbers. */
json_t *readback_ports_down(struct store *s, int64_t ocs_id);

#endif
