/* Measured runs collected for calibration: the table cost_run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/cost_run.h"
#include "state/store_sql.h"

/* Every filter bound, absent ones as NULL or the whole id range: one statement per use. */
#define WHERE                                                                                      \
	" WHERE (?1 IS NULL OR fabric = ?1) AND (?2 IS NULL OR collector = ?2) AND id >= ?3 AND "  \
	"id < ?4"

static void bind_filter(sqlite3_stmt *st, const struct cost_run_filter *f)
{
	sqlite3_bind_text(st, 1, f->fabric, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, f->collector, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, f->since);
	sqlite3_bind_int64(st, 4, f->before > 0 ? f->before : INT64_MAX);
}

/* The first of n new ids, past every id ever given (as fabric ids, schema 011). */
static int64_t next_ids(struct store *s, uint32_t n)
{
	sqlite3_stmt *st = store_stmt(s, "INSERT INTO id_seq(name, last) VALUES ('cost_run', "
	                                 "(SELECT coalesce(max(id), 0) FROM cost_run) + ?1) "
	                                 "ON CONFLICT(name) DO UPDATE SET last = max(last, "
	                                 "(SELECT coalesce(max(id), 0) FROM cost_run)) + ?1 "
	                                 "RETURNING last");
	int64_t last = -EIO;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, n);
	if (sqlite3_step(st) == SQLITE_ROW)
		last = sqlite3_column_int64(st, 0);
	if (store_step_done(st) < 0)
		last = -EIO;
	return last < 0 ? last : last - n + 1;
}

int cost_run_add(struct store *s, const struct coll_run *runs, uint32_t n,
                 const struct cost_run_origin *o, int64_t *first, uint32_t *dropped,
                 struct ofcd_error *e)
{
	int64_t id = next_ids(s, n);
	sqlite3_stmt *st;

	if (id < 0)
		goto fail;
	*first = id;
	for (uint32_t i = 0; i < n; i++) {
		const struct coll_run *r = &runs[i];

		st = store_stmt(
		    s, "INSERT INTO cost_run(id, collector, fabric, ports_per_device, "
		       "collective, algorithm, servers, devices, bytes, measured_us, batch) "
		       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
		if (!st)
			goto fail;
		sqlite3_bind_int64(st, 1, id + i);
		sqlite3_bind_text(st, 2, o->collector, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, o->fabric, -1, SQLITE_STATIC);
		if (o->ports_per_device)
			sqlite3_bind_int64(st, 4, o->ports_per_device);
		sqlite3_bind_text(st, 5, coll_collective_name(r->collective), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 6, coll_algorithm_name(r->algorithm), -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 7, r->servers);
		sqlite3_bind_int64(st, 8, r->devices);
		sqlite3_bind_int64(st, 9, (sqlite3_int64)r->bytes);
		sqlite3_bind_double(st, 10, r->measured_us);
		sqlite3_bind_text(st, 11, o->batch, -1, SQLITE_STATIC);
		if (store_step_done(st) < 0)
			goto fail;
	}
	st = store_stmt(s, "DELETE FROM cost_run WHERE id IN (SELECT id FROM cost_run ORDER BY id "
	                   "DESC LIMIT -1 OFFSET ?)");
	if (!st)
		goto fail;
	sqlite3_bind_int64(st, 1, COST_RUN_KEEP);
	if (store_step_done(st) < 0)
		goto fail;
	*dropped = (uint32_t)sqlite3_changes(store_db(s));
	return 0;
fail:
	return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot store the runs");
}

int64_t cost_run_batch(struct store *s, const struct cost_run_origin *o, int64_t *first,
                       int64_t *last)
{
	sqlite3_stmt *st;
	int64_t n = -EIO;

	*first = *last = 0;
	if (!o->batch)
		return 0;
	st = store_stmt(s, "SELECT count(*), min(id), max(id) FROM cost_run WHERE collector = ? "
	                   "AND batch = ?");
	if (!st)
		return -EIO;
	sqlite3_bind_text(st, 1, o->collector, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, o->batch, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW) {
		n = sqlite3_column_int64(st, 0);
		*first = sqlite3_column_int64(st, 1);
		*last = sqlite3_column_int64(st, 2);
	}
	sqlite3_reset(st);
	return n;
}

#define RUN_COLUMNS                                                                                \
	"SELECT id, collector, fabric, ports_per_device, collective, algorithm, servers, "         \
	"devices, "                                                                                \
	"bytes, measured_us, collected FROM cost_run"

json_t *cost_run_list(struct store *s, const struct cost_run_filter *f, uint32_t limit)
{
	sqlite3_stmt *st = store_stmt(s, RUN_COLUMNS WHERE " ORDER BY id LIMIT ?5");
	json_t *a = json_array();
	int rc;

	if (!st || !a) {
		json_decref(a);
		return NULL;
	}
	bind_filter(st, f);
	sqlite3_bind_int64(st, 5, limit);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		json_t *ports = sqlite3_column_type(st, 3) == SQLITE_NULL
		                    ? json_null()
		                    : json_integer(sqlite3_column_int64(st, 3));
		const char *fabric = (const char *)sqlite3_column_text(st, 2);

		json_array_append_new(
		    a, json_pack("{s:I, s:s, s:s?, s:o, s:s, s:s, s:I, s:I, s:I, s:f, s:s}", "id",
		                 (json_int_t)sqlite3_column_int64(st, 0), "collector",
		                 (const char *)sqlite3_column_text(st, 1), "fabric", fabric,
		                 "ports_per_device", ports, "collective",
		                 (const char *)sqlite3_column_text(st, 4), "algorithm",
		                 (const char *)sqlite3_column_text(st, 5), "servers",
		                 (json_int_t)sqlite3_column_int64(st, 6), "devices",
		                 (json_int_t)sqlite3_column_int64(st, 7), "bytes",
		                 (json_int_t)sqlite3_column_int64(st, 8), "measured_us",
		                 sqlite3_column_double(st, 9), "collected",
		                 (const char *)sqlite3_column_text(st, 10)));
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		json_decref(a);
		return NULL;
	}
	return a;
}

int64_t cost_run_count(struct store *s, const struct cost_run_filter *f)
{
	static const struct cost_run_filter all = { 0 };
	sqlite3_stmt *st = store_stmt(s, "SELECT count(*) FROM cost_run" WHERE);
	int64_t n = -EIO;

	if (st)
		bind_filter(st, f ? f : &all);
	if (st && sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	if (st)
		sqlite3_reset(st);
	return n;
}

/* Adds text to the array a unless it is there already. */
static void add_once(json_t *a, const char *text)
{
	size_t i;
	json_t *v;

	if (!text)
		return;
	json_array_foreach(a, i, v)
	{
		if (!strcmp(json_string_value(v), text))
			return;
	}
	json_array_append_new(a, json_string(text));
}

int64_t cost_run_load(struct store *s, const struct cost_run_filter *f, struct coll_run *runs,
                      int64_t *ids, uint32_t max, int64_t *lo, int64_t *hi, uint32_t *ports,
                      json_t **who)
{
	sqlite3_stmt *st = store_stmt(s, RUN_COLUMNS WHERE " ORDER BY id LIMIT ?5");
	json_t *collectors = json_array(), *fabrics = json_array();
	int64_t n = 0;
	int rc;

	*lo = *hi = 0;
	*ports = 0;
	*who = NULL;
	if (!st || !collectors || !fabrics)
		goto fail;
	bind_filter(st, f);
	sqlite3_bind_int64(st, 5, max);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct coll_run *r = &runs[n++];
		uint32_t p = (uint32_t)sqlite3_column_int64(st, 3);

		/* Stored by this daemon from names it knows: they read back. */
		coll_collective_from_name((const char *)sqlite3_column_text(st, 4), &r->collective);
		coll_algorithm_from_name((const char *)sqlite3_column_text(st, 5), &r->algorithm);
		r->servers = (uint32_t)sqlite3_column_int64(st, 6);
		r->devices = (uint32_t)sqlite3_column_int64(st, 7);
		r->bytes = (uint64_t)sqlite3_column_int64(st, 8);
		r->measured_us = sqlite3_column_double(st, 9);
		*hi = ids[n - 1] = sqlite3_column_int64(st, 0);
		if (n == 1)
			*lo = *hi;
		if (p && *ports != UINT32_MAX)
			*ports = *ports && *ports != p ? UINT32_MAX : p;
		add_once(collectors, (const char *)sqlite3_column_text(st, 1));
		add_once(fabrics, (const char *)sqlite3_column_text(st, 2));
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		goto fail;
	*who = json_pack("{s:o, s:o}", "collectors", collectors, "fabrics", fabrics);
	return n;
fail:
	json_decref(collectors);
	json_decref(fabrics);
	return -EIO;
}

int64_t cost_run_delete(struct store *s, const struct cost_run_filter *f)
{
	sqlite3_stmt *st = store_stmt(s, "DELETE FROM cost_run" WHERE);

	if (!st)
		return -EIO;
	bind_filter(st, f);
	if (store_step_done(st) < 0)
		return -EIO;
	return sqlite3_changes(store_db(s));
}
