/*
 * Statements on the store, for the domain modules that own the SQL (topo,
 * topo_apply, fabric, inventory, ...): the API layer never includes this
 * (make check-deps). Prepared statements are cached by the address of their
 * SQL text, so pass string literals. Loop thread only.
 */
#ifndef OFCD_STORE_SQL_H
#define OFCD_STORE_SQL_H

#include <sqlite3.h>

#include "store.h"

/** The raw connection, for code that needs more than the helpers below. */
sqlite3 *store_db(struct store *s);

/** A pre-update hook (sqlite3_preupdate_hook()'s callback). */
typedef void (*store_preupdate_fn)(void *arg, sqlite3 *db, int op, const char *zdb,
                                   const char *table, sqlite3_int64 key1, sqlite3_int64 key2);

/**
 * Sets the connection's one pre-update hook (the desired-state mirror's);
 * NULL fn removes it. Set it through here, never with
 * sqlite3_preupdate_hook(): SQLite's sessions (store_changes.h) take the same
 * hook while they record and expect to find none or another session there,
 * so a capture sets this one aside (store_preupdate_aside()) and puts it back.
 */
void store_preupdate_hook(struct store *s, store_preupdate_fn fn, void *arg);

/** Sets the hook of store_preupdate_hook() aside (aside true) or puts it back. */
void store_preupdate_aside(struct store *s, bool aside);

/** Schema version of the open database. */
int store_schema_version(struct store *s);

/**
 * Returns the cached prepared statement for sql (prepared on first use),
 * reset and with its bindings cleared. The store owns it: do not finalize;
 * call sqlite3_reset() when done stepping so no read stays open. NULL on a
 * preparation error (logged: it is a bug in the SQL).
 */
sqlite3_stmt *store_stmt(struct store *s, const char *sql);

/**
 * A unit's desired circuits (?1: its id) as rows (x, y, fabric_id), x and y
 * its two ports with x < y, ordered by (x, y). No index leads with the unit
 * (schema 009: a fabric touches every unit, and such an index cost it a page
 * per unit), so the statement walks the fabric ids in circuit's primary key,
 * one index step each, and reads each fabric's entries for the unit there.
 * It needs no fabric row: the audit sees orphans too.
 */
#define STORE_SQL_UNIT_CIRCUITS                                                                    \
	"WITH RECURSIVE f(id) AS (SELECT min(fabric_id) FROM circuit UNION ALL "                   \
	"SELECT (SELECT min(fabric_id) FROM circuit WHERE fabric_id > f.id) FROM f "               \
	"WHERE f.id IS NOT NULL) "                                                                 \
	"SELECT min(c.a_ocs_port, c.b_ocs_port) AS x, max(c.a_ocs_port, c.b_ocs_port) AS y, "      \
	"c.fabric_id FROM f CROSS JOIN circuit c ON c.fabric_id = f.id AND c.ocs_id = ?1 "         \
	"ORDER BY x, y"

/** Runs a statement until SQLITE_DONE and resets it. Returns 0 or -EIO. */
int store_step_done(sqlite3_stmt *st);

#endif
