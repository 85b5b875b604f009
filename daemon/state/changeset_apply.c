/*
 * A changeset applied row by row with this store's own statements, prepared
 * once per table (store_table()), instead of sqlite3changeset_apply(): that
 * prepares its statements again for every table of every changeset, and
 * sets PRAGMA defer_foreign_keys, which expires every statement the
 * connection holds prepared, so the next handler prepares all of its own
 * again too. Together they were over half the CPU a member spent per change
 * it applied (perf, bench/ha_scale.py).
 *
 * What is kept of SQLite's way: rows in the changeset's order; a row that
 * does not find the store as the change left it is a conflict of SQLite's
 * kinds (SQLITE_CHANGESET_DATA, _NOTFOUND, _CONFLICT, _CONSTRAINT), which
 * decide() resolves or lets abort the whole. Foreign keys stay checked at
 * each statement: a row a constraint refuses (its parent comes later in
 * the changeset, a name another row holds until its delete) is tried again
 * after the others, pass after pass while any goes in; once none does,
 * that is the conflict. Row by row with immediate checks cannot pass a
 * parent that leaves before another row takes its key over (SQLite's
 * session lists a table's rows in hash order, not the order of the
 * writes): when a foreign key refused any of the rows left, the caller
 * runs the change again with the checks at the end, as SQLite's applier
 * always does; that costs the expiry, but only on such changes.
 */
/* The session extension's API is declared only with these defined. */
#define SQLITE_ENABLE_SESSION
#define SQLITE_ENABLE_PREUPDATE_HOOK

#include "changeset_apply.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_sql.h"

enum verdict { OMIT, REPLACE, ABORT };

/* What a row's application came to, besides a negative errno. */
enum {
	APPLIED = 0,    /* or left out, as decide() said */
	LATER = 1,      /* a constraint refused it: try again after the others */
	REPLACE_IT = 2, /* it differs, and decide() says the change wins */
};

struct apply {
	struct store *s;
	struct store_conflict *conflict;       /* the caller's, or NULL */
	const struct store_table *refused;     /* the table of the last row a constraint refused */
	int refused_kind;                      /* how: _CONSTRAINT, or _FOREIGN_KEY */
	const struct store_table *later_table; /* the first row kept for later in this pass */
	int later_kind;
	const struct store_table
	    *later_fk; /* the first table of a row a foreign key refused, in this pass */
	size_t *later; /* which rows a constraint refused in this pass (places in the changeset) */
	size_t nlater, cap;
};

static const char *kind_name(int kind)
{
	switch (kind) {
	case SQLITE_CHANGESET_DATA:
		return "a row differs from the change's old values";
	case SQLITE_CHANGESET_NOTFOUND:
		return "a row the change names is missing";
	case SQLITE_CHANGESET_CONFLICT:
		return "a row the change inserts is there already";
	case SQLITE_CHANGESET_FOREIGN_KEY:
		return "the change leaves a row whose parent is missing";
	default:
		return "a constraint fails";
	}
}

/* Tells the first reason the application stops, for the caller to log. */
static int stop(struct apply *a, int kind, const char *table, const char *what)
{
	struct store_conflict *c = a->conflict;
	if (c && !c->table[0]) {
		c->kind = kind;
		snprintf(c->table, sizeof(c->table), "%s", table);
		snprintf(c->what, sizeof(c->what), "%s", what ? what : kind_name(kind));
	}
	return -EPROTO;
}

/* A statement that failed: the store failing is worth a retry, anything else is the change's. */
static int failed(struct apply *a, int rc, const char *table)
{
	int primary = rc & 0xff;
	if (primary == SQLITE_NOMEM)
		return -ENOMEM;
	if (primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_BUSY ||
	    primary == SQLITE_LOCKED || primary == SQLITE_CANTOPEN || primary == SQLITE_READONLY)
		return -EIO;
	return stop(a, 0, table, sqlite3_errstr(rc));
}

/* fabric's state, error and updated: the leader's reconciler's, shipped apart and late. */
static bool is_derived(const struct store_table *t, int col)
{
	const char *c = t->column[col];
	return strcmp(c, "state") == 0 || strcmp(c, "error") == 0 || strcmp(c, "updated") == 0;
}

static bool same_value(sqlite3_value *a, sqlite3_value *b)
{
	int t = sqlite3_value_type(a);
	if (t != sqlite3_value_type(b))
		return false;
	if (t == SQLITE_NULL)
		return true;
	if (t == SQLITE_INTEGER)
		return sqlite3_value_int64(a) == sqlite3_value_int64(b);
	if (t == SQLITE_FLOAT)
		return sqlite3_value_double(a) == sqlite3_value_double(b);
	int n = sqlite3_value_bytes(a);
	return n == sqlite3_value_bytes(b) &&
	       memcmp(sqlite3_value_blob(a), sqlite3_value_blob(b), (size_t)n) == 0;
}

/* A fabric row (cur) that differs from the change's old values only in derived columns. */
static bool differs_in_derived_only(const struct store_table *t, sqlite3_changeset_iter *it,
                                    sqlite3_stmt *cur)
{
	for (int i = 0; i < t->ncol; i++) {
		sqlite3_value *old = NULL;
		if (sqlite3changeset_old(it, i, &old) != SQLITE_OK || !old)
			continue;
		if (!is_derived(t, i) && !same_value(old, sqlite3_column_value(cur, i)))
			return false;
	}
	return true;
}

/* An update of fabric that sets derived columns only. */
static bool changes_derived_only(const struct store_table *t, sqlite3_changeset_iter *it)
{
	for (int i = 0; i < t->ncol; i++) {
		sqlite3_value *v = NULL;
		if (sqlite3changeset_new(it, i, &v) == SQLITE_OK && v && !is_derived(t, i))
			return false;
	}
	return true;
}

/*
 * Which differences between a change and this store are expected, and what
 * then wins. A row a delete names is gone already (a cascade of an earlier
 * row of the same changeset): the end is the same. fabric's derived columns
 * travel apart, merged and late: a fabric row may differ there, and the
 * change wins; a change of only those of a fabric this store no longer has
 * is moot. The audit trail is the leader's: an id a refusal audited here
 * took gives way. Any other difference means this store is not the
 * leader's: stop. cur: the store's row with the change's key, or NULL.
 */
static enum verdict decide(struct apply *a, int kind, int op, const struct store_table *t,
                           sqlite3_changeset_iter *it, sqlite3_stmt *cur)
{
	bool fabric = strcmp(t->name, "fabric") == 0;
	if (strcmp(t->name, "audit") == 0)
		return kind == SQLITE_CHANGESET_NOTFOUND ? OMIT : REPLACE;
	if (kind == SQLITE_CHANGESET_NOTFOUND &&
	    (op == SQLITE_DELETE || (fabric && changes_derived_only(t, it))))
		return OMIT;
	if (kind == SQLITE_CHANGESET_DATA && fabric && cur && differs_in_derived_only(t, it, cur))
		return REPLACE;
	stop(a, kind, t->name, NULL);
	return ABORT;
}

/* Binds the change's new (or old) row by column at ?(i+1); key columns only if asked. */
static void bind_row(sqlite3_stmt *st, const struct store_table *t, sqlite3_changeset_iter *it,
                     bool new_row, bool key_only)
{
	for (int i = 0; i < t->ncol; i++) {
		sqlite3_value *v = NULL;
		if (key_only && !t->pk[i])
			continue;
		if ((new_row ? sqlite3changeset_new(it, i, &v) : sqlite3changeset_old(it, i, &v)) ==
		        SQLITE_OK &&
		    v)
			sqlite3_bind_value(st, i + 1, v);
	}
}

/* Binds an update (store_table.update): what it sets, and what it checks unless forced. */
static void bind_update(sqlite3_stmt *st, const struct store_table *t, sqlite3_changeset_iter *it,
                        bool check)
{
	for (int i = 0; i < t->ncol; i++) {
		sqlite3_value *old = NULL, *new = NULL;
		sqlite3changeset_old(it, i, &old);
		sqlite3changeset_new(it, i, &new);
		if (t->pk[i]) {
			if (old)
				sqlite3_bind_value(st, 4 * i + 4, old);
			continue;
		}
		sqlite3_bind_int(st, 4 * i + 1, new != NULL);
		if (new)
			sqlite3_bind_value(st, 4 * i + 2, new);
		sqlite3_bind_int(st, 4 * i + 3, check && old);
		if (old)
			sqlite3_bind_value(st, 4 * i + 4, old);
	}
}

/* Steps st to its end; SQLite's (extended) result: SQLITE_DONE, or why not. */
static int run(sqlite3_stmt *st)
{
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	sqlite3_reset(st);
	return rc;
}

/* A statement's end for the row: applied, to try again later (a constraint), or failed. */
static int settle(struct apply *a, const struct store_table *t, int rc)
{
	if (rc == SQLITE_DONE)
		return APPLIED;
	if ((rc & 0xff) == SQLITE_CONSTRAINT) {
		a->refused = t;
		a->refused_kind = rc == SQLITE_CONSTRAINT_FOREIGNKEY ? SQLITE_CHANGESET_FOREIGN_KEY
		                                                     : SQLITE_CHANGESET_CONSTRAINT;
		return LATER;
	}
	return failed(a, rc, t->name);
}

/*
 * Runs sql (one of t's statements) for the change's row: bound by its new or
 * old values (key columns only, if asked), or as an update (check: against
 * its old values).
 */
static int exec_row(struct apply *a, const struct store_table *t, const char *sql,
                    sqlite3_changeset_iter *it, bool new_row, bool key_only)
{
	sqlite3_stmt *st = store_stmt(a->s, sql);
	if (!st)
		return -EIO;
	bind_row(st, t, it, new_row, key_only);
	return settle(a, t, run(st));
}

static int exec_update(struct apply *a, const struct store_table *t, sqlite3_changeset_iter *it,
                       bool check)
{
	sqlite3_stmt *st = store_stmt(a->s, t->update);
	if (!st)
		return -EIO;
	bind_update(st, t, it, check);
	return settle(a, t, run(st));
}

/*
 * The store's row with the change's key (from its new or old values): 1 and
 * *cur on it (reset it when done), 0 when there is none, or a negative errno.
 */
static int find_row(struct apply *a, const struct store_table *t, sqlite3_changeset_iter *it,
                    bool new_row, sqlite3_stmt **cur)
{
	sqlite3_stmt *st = store_stmt(a->s, t->select_key);
	if (!st)
		return -EIO;
	bind_row(st, t, it, new_row, true);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*cur = st;
		return 1;
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : failed(a, rc, t->name);
}

/*
 * The row found the store otherwise than the change left it (an insert its
 * key taken, a delete or update no row as the change saw it): APPLIED when
 * decide() leaves it out, REPLACE_IT when the change wins, LATER when an
 * insert was refused for another constraint (a later row may clear it), or
 * a negative errno (-EPROTO: abort).
 */
static int difference(struct apply *a, int op, const struct store_table *t,
                      sqlite3_changeset_iter *it)
{
	sqlite3_stmt *cur = NULL;
	int found = find_row(a, t, it, op == SQLITE_INSERT, &cur);
	if (found < 0)
		return found;
	if (op == SQLITE_INSERT && !found)
		return LATER;
	int kind = op == SQLITE_INSERT ? SQLITE_CHANGESET_CONFLICT
	           : found             ? SQLITE_CHANGESET_DATA
	                               : SQLITE_CHANGESET_NOTFOUND;
	enum verdict v = decide(a, kind, op, t, it, cur);
	if (cur)
		sqlite3_reset(cur);
	return v == OMIT ? APPLIED : v == REPLACE ? REPLACE_IT : -EPROTO;
}

/* Whether the last statement changed a row (a delete or update matched the change's). */
static bool changed(struct apply *a)
{
	return sqlite3_changes(store_db(a->s)) > 0;
}

static int apply_row(struct apply *a, sqlite3_changeset_iter *it)
{
	const char *name = NULL;
	int ncol = 0, op = 0, indirect = 0, rc;
	if (sqlite3changeset_op(it, &name, &ncol, &op, &indirect) != SQLITE_OK || !name)
		return stop(a, 0, "(not a changeset)", "a row names no table");
	const struct store_table *t = store_table(a->s, name);
	if (!t || t->ncol != ncol || (op == SQLITE_UPDATE && !t->update))
		return stop(a, 0, name, "the change does not fit this store's table");
	switch (op) {
	case SQLITE_INSERT:
		rc = exec_row(a, t, t->insert, it, true, false);
		if (rc == LATER)
			rc = difference(a, op, t, it);
		/* The inserted row takes the place of the one holding its key. */
		if (rc == REPLACE_IT &&
		    (rc = exec_row(a, t, t->delete_key, it, true, true)) == APPLIED)
			rc = exec_row(a, t, t->insert, it, true, false);
		return rc;
	case SQLITE_DELETE:
		rc = exec_row(a, t, t->delete_row, it, false, false);
		if (rc == APPLIED && !changed(a))
			rc = difference(a, op, t, it);
		return rc == REPLACE_IT ? exec_row(a, t, t->delete_key, it, false, true) : rc;
	case SQLITE_UPDATE:
		rc = exec_update(a, t, it, true);
		if (rc == APPLIED && !changed(a))
			rc = difference(a, op, t, it);
		return rc == REPLACE_IT ? exec_update(a, t, it, false) : rc;
	default:
		return stop(a, 0, name, "a row is no insert, delete or update");
	}
}

static int keep_for_later(struct apply *a, size_t row)
{
	if (a->nlater == 0) {
		a->later_table = a->refused;
		a->later_kind = a->refused_kind;
	}
	if (!a->later_fk && a->refused_kind == SQLITE_CHANGESET_FOREIGN_KEY)
		a->later_fk = a->refused;
	if (a->nlater == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 16;
		size_t *p = realloc(a->later, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		a->later = p;
		a->cap = cap;
	}
	a->later[a->nlater++] = row;
	return 0;
}

/*
 * One pass over the changeset: every row, or only those listed in only[0..n)
 * (ascending); rows a constraint refuses are listed in a->later.
 */
static int pass(struct apply *a, const void *data, size_t len, const size_t *only, size_t n)
{
	sqlite3_changeset_iter *it = NULL;
	size_t row = 0, next = 0;
	int rc = 0;
	a->nlater = 0;
	a->later_fk = NULL;
	if (sqlite3changeset_start(&it, (int)len, (void *)data) != SQLITE_OK)
		return stop(a, 0, "(not a changeset)", "it cannot be read");
	while (rc == 0 && (!only || next < n) && sqlite3changeset_next(it) == SQLITE_ROW) {
		if (only && only[next] != row) {
			row++;
			continue;
		}
		next++;
		rc = apply_row(a, it);
		if (rc == LATER)
			rc = keep_for_later(a, row);
		row++;
	}
	int end = sqlite3changeset_finalize(it);
	if (rc == 0 && end != SQLITE_OK)
		rc = (end & 0xff) == SQLITE_NOMEM
		         ? -ENOMEM
		         : stop(a, 0, "(not a changeset)", sqlite3_errstr(end));
	return rc;
}

int changeset_apply(struct store *s, const void *data, size_t len, bool fk_deferred,
                    struct store_conflict *conflict)
{
	struct apply a = { .s = s, .conflict = conflict };
	size_t *tried = NULL;
	if (len == 0)
		return 0;
	if (len > INT_MAX)
		return stop(&a, 0, "(the change)", "it is too large");
	int rc = pass(&a, data, len, NULL, 0);
	while (rc == 0 && a.nlater > 0) {
		size_t n = a.nlater;
		free(tried);
		tried = a.later;
		a.later = NULL;
		a.cap = 0;
		rc = pass(&a, data, len, tried, n);
		if (rc == 0 && a.nlater == n && a.later_fk && !fk_deferred) {
			stop(&a, SQLITE_CHANGESET_FOREIGN_KEY, a.later_fk->name, NULL);
			rc = -EAGAIN;
		} else if (rc == 0 && a.nlater == n) {
			rc = stop(&a, a.later_kind, a.later_table->name, NULL);
		}
	}
	free(tried);
	free(a.later);
	return rc;
}
