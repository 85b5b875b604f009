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

/** Schema version of the open database. */
int store_schema_version(struct store *s);

/**
 * Returns the cached prepared statement for sql (prepared on first use),
 * reset and with its bindings cleared. The store owns it: do not finalize;
 * call sqlite3_reset() when done stepping so no read stays open. NULL on a
 * preparation error (logged: it is a bug in the SQL).
 */
sqlite3_stmt *store_stmt(struct store *s, const char *sql);

/** Runs a statement until SQLITE_DONE and resets it. Returns 0 or -EIO. */
int store_step_done(sqlite3_stmt *st);

#endif
