/*
 * The check the fuzzers that write to a store share: the in-memory desired
 * state (state/desired.h) equals what the store holds, unit by unit: the
 * circuits, and which fabric owns each cabled port. Aborts with what differs
 * (who is the harness's name).
 */
#ifndef OFCD_FUZZ_MIRROR_H
#define OFCD_FUZZ_MIRROR_H

#include <stdio.h>
#include <stdlib.h>

#include "state/desired.h"
#include "state/store_sql.h"

static void mirror_fail(const char *who, const char *what, long long ocs, size_t n)
{
	fprintf(stderr, "%s: unit %lld: %s (%zu)\n", who, ocs, what, n);
	abort();
}

static void mirror_check(const char *who, struct store *s, struct desired *d)
{
	sqlite3 *sql = store_db(s);
	sqlite3_stmt *units = NULL, *rows = NULL, *owners = NULL;
	int rc = sqlite3_prepare_v2(sql, "SELECT id FROM ocs UNION SELECT ocs_id FROM circuit", -1,
	                            &units, NULL);
	rc |= sqlite3_prepare_v2(sql,
	                         "SELECT min(a_ocs_port, b_ocs_port), max(a_ocs_port, b_ocs_port), "
	                         "fabric_id FROM circuit WHERE ocs_id = ? ORDER BY 1, 2",
	                         -1, &rows, NULL);
	rc |=
	    sqlite3_prepare_v2(sql,
	                       "SELECT c.ocs_port, fs.fabric_id FROM cable c JOIN fabric_server fs "
	                       "ON fs.server_id = c.server_id WHERE c.ocs_id = ?",
	                       -1, &owners, NULL);
	if (rc != SQLITE_OK || !desired_usable(d)) {
		fprintf(stderr, "%s: cannot read the store: %s\n", who, sqlite3_errmsg(sql));
		abort();
	}
	while (sqlite3_step(units) == SQLITE_ROW) {
		int64_t ocs = sqlite3_column_int64(units, 0);
		struct desired_set set = desired_of(d, ocs);
		size_t n = 0;
		sqlite3_reset(rows);
		sqlite3_bind_int64(rows, 1, ocs);
		for (; sqlite3_step(rows) == SQLITE_ROW; n++)
			if (n >= set.n || set.xc[n].a != (uint32_t)sqlite3_column_int64(rows, 0) ||
			    set.xc[n].b != (uint32_t)sqlite3_column_int64(rows, 1) ||
			    set.fabric[n] != sqlite3_column_int64(rows, 2))
				mirror_fail(who, "a circuit differs", (long long)ocs, n);
		if (n != set.n)
			mirror_fail(who, "circuits in memory and stored differ in number",
			            (long long)ocs, set.n);
		size_t nown, held = 0;
		const int64_t *own = desired_owners(d, ocs, &nown);
		for (size_t p = 0; p < nown; p++)
			held += own[p] != 0;
		sqlite3_reset(owners);
		sqlite3_bind_int64(owners, 1, ocs);
		size_t stored = 0;
		for (; sqlite3_step(owners) == SQLITE_ROW; stored++) {
			int64_t p = sqlite3_column_int64(owners, 0);
			if (p < 0 || (size_t)p >= nown || own[p] != sqlite3_column_int64(owners, 1))
				mirror_fail(who, "a port's owner differs", (long long)ocs,
				            (size_t)p);
		}
		if (stored != held)
			mirror_fail(who, "ports owned in memory and stored differ in number",
			            (long long)ocs, held);
	}
	sqlite3_finalize(units);
	sqlite3_finalize(rows);
	sqlite3_finalize(owners);
}

#endif
