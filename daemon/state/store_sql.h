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

/**
 * Each row a statement is about to change (sqlite3_preupdate_hook()'s
 * callback: sqlite3_preupdate_old() and _new() read its values inside).
 * Listen through store_preupdate_hook(), never with sqlite3_preupdate_hook():
 * SQLite's sessions (store_changes.h) take the connection's one slot while
 * they record and expect to find none or another session there, so a capture
 * sets the store's aside (store_preupdate_aside()) and puts it back.
 */
HOOK_TYPE(store_preupdate,
          (sqlite3 * db, int op, const char *zdb, const char *table, sqlite3_int64 key1,
           sqlite3_int64 key2),
          (db, op, zdb, table, key1, key2))

/** Each row changed (sqlite3_update_hook()'s callback, after the change). */
HOOK_TYPE(store_update, (int op, const char *zdb, const char *table, sqlite3_int64 rowid),
          (op, zdb, table, rowid))

/** The hook of every row about to change (store_preupdate_hook_add() on it). */
struct hook *store_preupdate_hook(struct store *s);

/** The hook of every row changed (store_update_hook_add() on it). */
struct hook *store_update_hook(struct store *s);

/** Sets the store's pre-update hook aside (aside true) or puts it back. */
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

/** Rows store_insert_rows() writes per statement. */
#define STORE_INSERT_ROWS 64

/**
 * Inserts n rows through one (a literal "INSERT INTO t(c1, ..) VALUES (?, ..)"
 * of ncols values, kept by its address like store_stmt()'s), STORE_INSERT_ROWS
 * rows per statement while that many are left: a statement's own cost (its
 * statement journal, its triggers' set-up) is then shared by its rows, a
 * half of a million-row insert's time. bind(st, first, row, arg) binds row's
 * values at ?first onwards. Returns 0, or -EIO (the statement's error stays
 * on the connection; the rows before it are written).
 */
int store_insert_rows(struct store *s, const char *one, int ncols, size_t n,
                      void (*bind)(sqlite3_stmt *st, int first, size_t row, void *arg), void *arg);

/** Most columns a table of this store has. */
#define STORE_MAX_COLUMNS 64

/**
 * A table of this store as a changeset names it: its columns, which of them
 * form its primary key, and the SQL of the statements that apply one row of
 * a change to it (run through store_stmt(), which keeps them prepared by the
 * addresses of these strings). Values are bound by column: column i (from 0,
 * in the table's order) at ?(i+1), or, in update, at ?(4i+1) .. ?(4i+4).
 */
struct store_table {
	char name[64];                       /**< the table's name */
	int ncol;                            /**< how many columns it has */
	unsigned char pk[STORE_MAX_COLUMNS]; /**< column i's place in the key (1, 2...), 0: none */
	const char *column[STORE_MAX_COLUMNS]; /**< column i's name */
	const char *insert;                    /**< INSERT of a row of every column */
	const char *delete_row; /**< DELETE of the row whose every column IS its value */
	const char *delete_key; /**< DELETE of the row with that key (only key columns bound) */
	const char *select_key; /**< SELECT of every column of the row with that key */
	/**
	 * UPDATE of the row whose key columns are ?(4i+4); a column outside the
	 * key is set to ?(4i+2) where ?(4i+1) is true, and must be IS ?(4i+4)
	 * where ?(4i+3) is true. NULL when every column is in the key.
	 */
	const char *update;
};

/**
 * The table named table in this store, looked up on first use and kept,
 * unchanged, until store_close(): the schema changes only with the
 * migrations in store_open() (a snapshot restored is of the same version).
 * The store owns it. NULL: no such table, or out of memory. Loop thread.
 */
const struct store_table *store_table(struct store *s, const char *table);

/** Runs a statement until SQLITE_DONE and resets it. Returns 0 or -EIO. */
int store_step_done(sqlite3_stmt *st);

#endif
