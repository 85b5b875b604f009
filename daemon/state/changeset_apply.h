/*
 * One changeset applied row by row with the store's own statements
 * (store_table()), for store_apply_changes().
 */
#ifndef OFCD_CHANGESET_APPLY_H
#define OFCD_CHANGESET_APPLY_H

#include <stdbool.h>
#include <stddef.h>

#include "store_changes.h"

/**
 * Applies the changeset (data, len bytes; store_changeset_check() passed it)
 * inside the transaction the caller holds open; store_apply_changes() says
 * which differences from this store resolve and which abort. fk_deferred:
 * the caller has set PRAGMA defer_foreign_keys for this transaction and
 * checks the foreign keys itself at its end. Returns 0; -EAGAIN when rows
 * are left that a foreign key refused with the checks immediate (*conflict
 * names the table; roll back, and apply again with them deferred); -EPROTO when a difference
 * aborts it or the changeset is malformed (*conflict says which, unless
 * NULL; the caller rolls back); or a SQLite result code's errno for the
 * store failing (-EIO, -ENOMEM). Loop thread.
 */
int changeset_apply(struct store *s, const void *data, size_t len, bool fk_deferred,
                    struct store_conflict *conflict);

#endif
