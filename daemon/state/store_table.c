#include "store_table.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "%w" doubles the quotes inside a name: identifiers are quoted whatever they hold. */
static void key_match(sqlite3_str *q, const struct store_table *t, int stride, int offset)
{
	bool first = true;
	for (int i = 0; i < t->ncol; i++)
		if (t->pk[i]) {
			sqlite3_str_appendf(q, "%s\"%w\" = ?%d", first ? "" : " AND ", t->column[i],
			                    stride * i + offset);
			first = false;
		}
}

static char *finish(sqlite3_str *q)
{
	if (sqlite3_str_errcode(q) != SQLITE_OK) {
		sqlite3_free(sqlite3_str_finish(q));
		return NULL;
	}
	return sqlite3_str_finish(q);
}

static char *insert_sql(const struct store_table *t)
{
	sqlite3_str *q = sqlite3_str_new(NULL);
	sqlite3_str_appendf(q, "INSERT INTO \"%w\" (", t->name);
	for (int i = 0; i < t->ncol; i++)
		sqlite3_str_appendf(q, "%s\"%w\"", i ? ", " : "", t->column[i]);
	sqlite3_str_appendall(q, ") VALUES (");
	for (int i = 0; i < t->ncol; i++)
		sqlite3_str_appendf(q, "%s?%d", i ? ", " : "", i + 1);
	sqlite3_str_appendall(q, ")");
	return finish(q);
}

static char *delete_row_sql(const struct store_table *t)
{
	sqlite3_str *q = sqlite3_str_new(NULL);
	sqlite3_str_appendf(q, "DELETE FROM \"%w\" WHERE ", t->name);
	key_match(q, t, 1, 1);
	for (int i = 0; i < t->ncol; i++)
		if (!t->pk[i])
			sqlite3_str_appendf(q, " AND \"%w\" IS ?%d", t->column[i], i + 1);
	return finish(q);
}

static char *delete_key_sql(const struct store_table *t)
{
	sqlite3_str *q = sqlite3_str_new(NULL);
	sqlite3_str_appendf(q, "DELETE FROM \"%w\" WHERE ", t->name);
	key_match(q, t, 1, 1);
	return finish(q);
}

static char *select_key_sql(const struct store_table *t)
{
	sqlite3_str *q = sqlite3_str_new(NULL);
	sqlite3_str_appendall(q, "SELECT ");
	for (int i = 0; i < t->ncol; i++)
		sqlite3_str_appendf(q, "%s\"%w\"", i ? ", " : "", t->column[i]);
	sqlite3_str_appendf(q, " FROM \"%w\" WHERE ", t->name);
	key_match(q, t, 1, 1);
	return finish(q);
}

/*
 * One statement for every update of the table: which columns it sets and
 * checks is bound. Key columns are never set (a changed key is a delete and
 * an insert in a changeset).
 */
static char *update_sql(const struct store_table *t)
{
	sqlite3_str *q = sqlite3_str_new(NULL);
	bool first = true;
	sqlite3_str_appendf(q, "UPDATE \"%w\" SET ", t->name);
	for (int i = 0; i < t->ncol; i++)
		if (!t->pk[i]) {
			sqlite3_str_appendf(q, "%s\"%w\" = CASE WHEN ?%d THEN ?%d ELSE \"%w\" END",
			                    first ? "" : ", ", t->column[i], 4 * i + 1, 4 * i + 2,
			                    t->column[i]);
			first = false;
		}
	sqlite3_str_appendall(q, " WHERE ");
	key_match(q, t, 4, 4);
	for (int i = 0; i < t->ncol; i++)
		if (!t->pk[i])
			sqlite3_str_appendf(q, " AND (NOT ?%d OR \"%w\" IS ?%d)", 4 * i + 3,
			                    t->column[i], 4 * i + 4);
	return finish(q);
}

static bool all_key(const struct store_table *t)
{
	for (int i = 0; i < t->ncol; i++)
		if (!t->pk[i])
			return false;
	return true;
}

struct store_table *store_table_build(sqlite3 *db, const char *table)
{
	struct store_table *t = calloc(1, sizeof(*t));
	sqlite3_stmt *st = NULL;
	bool keyed = false, fits = true;
	/* Once per table: not worth a place in the store's statement cache. */
	if (!t || strlen(table) >= sizeof(t->name) ||
	    sqlite3_prepare_v2(db, "SELECT name, pk FROM pragma_table_info(?) ORDER BY cid", -1,
	                       &st, NULL) != SQLITE_OK) {
		free(t);
		return NULL;
	}
	snprintf(t->name, sizeof(t->name), "%s", table);
	sqlite3_bind_text(st, 1, table, -1, SQLITE_TRANSIENT);
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (t->ncol == STORE_MAX_COLUMNS) {
			fits = false;
			break;
		}
		t->column[t->ncol] = strdup((const char *)sqlite3_column_text(st, 0));
		t->pk[t->ncol] = (unsigned char)sqlite3_column_int(st, 1);
		keyed |= t->pk[t->ncol] > 0;
		if (!t->column[t->ncol++])
			fits = false;
	}
	sqlite3_finalize(st);
	if (fits && keyed) {
		t->insert = insert_sql(t);
		t->delete_row = delete_row_sql(t);
		t->delete_key = delete_key_sql(t);
		t->select_key = select_key_sql(t);
		t->update = all_key(t) ? NULL : update_sql(t);
	}
	if (!fits || !keyed || !t->insert || !t->delete_row || !t->delete_key || !t->select_key ||
	    (!t->update && !all_key(t))) {
		store_table_free(t);
		return NULL;
	}
	return t;
}

void store_table_free(struct store_table *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->ncol; i++)
		free((char *)t->column[i]);
	sqlite3_free((char *)t->insert);
	sqlite3_free((char *)t->delete_row);
	sqlite3_free((char *)t->delete_key);
	sqlite3_free((char *)t->select_key);
	sqlite3_free((char *)t->update);
	free(t);
}
