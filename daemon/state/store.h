/*
 * The SQLite store: the durable desired state and the audit trail.
 *
 * One connection, used only from the loop thread. Opened in WAL mode with
 * synchronous=FULL (a COMMIT that returned is on disk), foreign keys on and a
 * busy timeout; the log is folded back into the database file by a thread
 * with a connection of its own (store_checkpoint.h), not inside commits. Schema migrations
 * (schema/NNN_*.sql, compiled in) are applied in order at open, tracked by PRAGMA user_version; a
 * database written by a newer ofcd is refused. This header holds what the API layer may use
 * (transactions and the audit row); statements are in store_sql.h, for the
 * domain modules that own the SQL.
 */
#ifndef OFCD_STORE_H
#define OFCD_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/hook.h"

struct store;

/**
 * Opens (creating if needed) the database at path and migrates it. Returns 0
 * and the store in *out, or a negative errno with a message in err.
 */
int store_open(const char *path, struct store **out, char *err, size_t errlen);

/** Finalises statements, checkpoints the WAL and closes. NULL is fine. */
void store_close(struct store *s);

/** BEGIN IMMEDIATE. Returns 0 or -EIO (-EBUSY when the database is locked). */
int store_begin(struct store *s);

/**
 * BEGIN IMMEDIATE for derived state that a restart recomputes anyway (the
 * reconciler's operations, fabric states, read-back copies): its COMMIT skips
 * the fsync (synchronous=NORMAL for this transaction only; WAL keeps the file
 * consistent, a power cut may lose the last such commits). Acknowledged user
 * changes use store_begin(), except a cluster member's application of the
 * replicated log: etcd holds those durably, and the log is replayed from the
 * applied revision the same commit records (store_changes.h).
 */
int store_begin_relaxed(struct store *s);

/** COMMIT; its latency goes to the metrics. Returns 0 or -EIO (then rolled back). */
int store_commit(struct store *s);

/** ROLLBACK, if a transaction is open. */
void store_rollback(struct store *s);

/** How long a statement waits for a lock another process holds, at first. */
#define STORE_BUSY_MS 1000

/**
 * Sets that wait to ms (the loop waits with it). Loop thread only; put it back
 * to STORE_BUSY_MS after a shorter one.
 */
void store_busy_timeout(struct store *s, int ms);

/** True while a transaction is open. */
bool store_in_txn(struct store *s);

/**
 * Every transaction's end: committed is true after a COMMIT that succeeded,
 * false after a ROLLBACK (or a COMMIT that failed and was rolled back).
 * Listeners (the in-memory desired state, desired.h) may use the store.
 */
HOOK_TYPE(store_txn_end, (struct store * s, bool committed), (s, committed))

/** The hook store_commit() and store_rollback() call (store_txn_end_hook_add() on it). */
struct hook *store_txn_end_hook(struct store *s);

/** Audit rows kept; older ones are pruned. */
#define STORE_AUDIT_KEEP 100000

/**
 * Records a write request in the audit table (time, token name or NULL, the
 * client's address or NULL, method, path, HTTP status). Runs inside the
 * current transaction if any.
 */
int store_audit(struct store *s, const char *token, const char *client, const char *method,
                const char *path, unsigned status);

#endif
