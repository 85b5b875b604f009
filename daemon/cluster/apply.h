/*
 * The one way a change of the replicated log reaches a member's store, the
 * same on every member, as etcd's own server applies its committed entries:
 * a follower's replica calls it for each change it reads from the log, in
 * log order; the leader calls it for each change it appended, once etcd has
 * committed it and before the client that proposed it hears the answer. The
 * change's changesets (log_bundle.h) are applied in order in one transaction
 * that records the change's revision (store_changes.h): the store's hooks,
 * and so the desired mirror and the reconciler, see every row, and nothing
 * is reloaded. A change that does not apply cleanly is logged with its
 * revision and table, counted (ofcd_cluster_apply_conflicts_total) and
 * refused: its member has diverged from the log and copies a snapshot.
 *
 * Loop thread only.
 */
#ifndef OFCD_APPLY_H
#define OFCD_APPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/hook.h"
#include "log_bundle.h"

struct store;

/**
 * A change was applied at revision: its changesets v[0..n) (borrowed for the
 * call), own when this member appended it (its fabric states were not
 * applied again: they were committed here first). What followers publish as
 * events comes from here.
 */
HOOK_TYPE(apply_done, (int64_t revision, const struct log_changeset *v, size_t n, bool own),
          (revision, v, n, own))

/** Shows the counter of conflicts from 0, before the first change is applied. */
void apply_metrics_init(void);

/**
 * Applies change (len bytes, a bundle or a bare changeset) of the log entry key
 * (the last of its parts; NULL: not known) at revision to s, which records both,
 * unless s holds that revision already (then 0 and nothing happens, but for
 * own: -EXDEV, etcd went back behind the store). own is a change this member
 * appended as leader: its fabric states are skipped, committed here first. The
 * apply_done listeners of done (NULL: none) hear each change applied. Returns
 * 0, -EXDEV, -EPROTO (malformed, or a conflict: diverged), -EBUSY (a
 * transaction is open) or -EIO.
 */
int apply_change(struct store *s, int64_t revision, const char *key, const void *change, size_t len,
                 bool own, struct hook *done);

#endif
