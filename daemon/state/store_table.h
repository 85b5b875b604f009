/*
 * Builds a store_table (store_sql.h): a table's columns and the SQL that
 * applies a row of a change to it. store.c keeps what this builds.
 */
#ifndef OFCD_STORE_TABLE_H
#define OFCD_STORE_TABLE_H

#include "store_sql.h"

/**
 * Looks table up in db's schema and writes its statements. Returns a new
 * store_table the caller frees with store_table_free(), or NULL when there
 * is no such table (or it has more than STORE_MAX_COLUMNS columns, or no
 * primary key: no changeset names those) or memory ran out. Loop thread.
 */
struct store_table *store_table_build(sqlite3 *db, const char *table);

/** Frees t; NULL is a no-op. */
void store_table_free(struct store_table *t);

#endif
