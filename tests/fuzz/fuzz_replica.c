/*
 * A change of the replicated log applied on a member, the way every member
 * applies one (cluster/apply.c): the input is the change's value as the log
 * holds it (a bundle of changesets, or a bare changeset of an older leader),
 * applied to a store that holds the demo topology and two fabrics, whose
 * desired mirror follows it row by row.
 *
 * Every input starts from the same store (restored from a snapshot taken
 * once). Checked: the answer is 0 or -EPROTO and nothing else; a change that
 * is refused leaves the store as it was; one that is applied leaves no
 * foreign key dangling and the store intact; either way the mirror equals
 * the store (mirror.h).
 *
 * OFCD_FUZZ_SEEDS=DIR build/fuzz/fuzz_replica writes the seeds to DIR and
 * exits: changes captured from real writes (fabrics created, deleted and
 * re-planned on a device failure, servers added, fabric states), each alone
 * and with states riding along, as a leader sends them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/apply.h"
#include "cluster/log_bundle.h"
#include "domain/demo.h"
#include "domain/fabric.h"
#include "domain/topo.h"
#include "fuzz.h"
#include "log.h"
#include "mirror.h"
#include "state/desired.h"
#include "state/store_changes.h"
#include "state/store_sql.h"

static struct store *store;
static struct desired *mirror;
static struct store_snapshot *copy; /* kept for the run: its data is the snapshot */
static const void *snapshot;
static size_t snapshot_len;
static int64_t revision;

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_replica: %s\n", what);
	abort();
}

static void exec_sql(const char *sql)
{
	if (sqlite3_exec(store_db(store), sql, NULL, NULL, NULL) != SQLITE_OK)
		fail(sqlite3_errmsg(store_db(store)));
}

static void fabric(const char *name, const char *const *servers, size_t m)
{
	struct fabric_ctx c = { .store = store, .desired = mirror };
	struct ofcd_error e = { 0 };
	if (store_begin(store) < 0 ||
	    fabric_create(&c, name, servers, m, &FABRIC_LAYOUT_FULL_MESH, NULL, &e) < 0 ||
	    store_commit(store) < 0)
		fail("cannot create the base fabrics");
	ofcd_error_clear(&e);
}

/* A write made through the domain, captured as a leader captures it, and rolled back. */
static size_t capture(const char *only, void (*write)(void), void **out)
{
	struct store_capture *cap = NULL;
	size_t len = 0;
	if (store_capture_start(store, only, &cap) < 0 || store_begin(store) < 0)
		fail("cannot capture");
	write();
	if (store_capture_take(cap, out, &len) < 0)
		fail("cannot take the changeset");
	store_rollback(store);
	store_capture_free(cap);
	return len;
}

static void w_create(void)
{
	static const char *const s[] = { "srv4", "srv5", "srv6" };
	struct fabric_ctx c = { .store = store, .desired = mirror };
	struct ofcd_error e = { 0 };
	fabric_create(&c, "f3", s, 3, &FABRIC_LAYOUT_FULL_MESH, NULL, &e);
	ofcd_error_clear(&e);
}

static void w_delete(void)
{
	struct fabric_ctx c = { .store = store, .desired = mirror };
	struct ofcd_error e = { 0 };
	fabric_delete(&c, "f1", NULL, &e);
	ofcd_error_clear(&e);
}

static void w_fail_device(void)
{
	struct fabric_ctx c = { .store = store, .desired = mirror };
	struct ofcd_error e = { 0 };
	uint32_t index = 0;
	bool failed = true, changed = false;
	json_t *f = NULL;
	fabric_devices_set(&c, topo_server_id(store, "srv0"), "srv0", 1, &index, &failed, &changed,
	                   &f, &e);
	json_decref(f);
	ofcd_error_clear(&e);
}

static void w_server(void)
{
	exec_sql("INSERT INTO server(name, devices, ports_per_device) VALUES ('extra', 2, 1)");
}

static void w_states(void)
{
	exec_sql("UPDATE fabric SET state = 'applied', updated = 'now'");
}

static void write_seed(const char *dir, int n, const struct log_changeset *v, size_t k)
{
	size_t len;
	void *change = log_bundle_make(v, k, &len);
	char path[512];
	snprintf(path, sizeof(path), "%s/seed-%03d", dir, n);
	FILE *f = change ? fopen(path, "wb") : NULL;
	if (!f || fwrite(change, 1, len, f) != len)
		fail("cannot write a seed");
	fclose(f);
	free(change);
}

static void write_seeds(const char *dir)
{
	void (*writes[])(void) = { w_create, w_delete, w_fail_device, w_server };
	void *states;
	size_t states_len = capture("fabric", w_states, &states);
	int n = 0;
	for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
		void *cs;
		size_t len = capture(NULL, writes[i], &cs);
		struct log_changeset one = { LOG_WRITE, cs, len };
		struct log_changeset two[2] = { { LOG_STATES, states, states_len }, one };
		write_seed(dir, n++, &one, 1);
		write_seed(dir, n++, two, 2);
		/* A bare changeset, as an older leader wrote it. */
		char path[512];
		snprintf(path, sizeof(path), "%s/seed-%03d", dir, n++);
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(cs, 1, len, f) != len)
			fail("cannot write a seed");
		fclose(f);
		free(cs);
	}
	struct log_changeset alone = { LOG_STATES, states, states_len };
	write_seed(dir, n++, &alone, 1);
	free(states);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_set_level(LOG_LVL_ERROR);
	const char *tmp = getenv("TMPDIR");
	static char dir[256];
	snprintf(dir, sizeof(dir), "%s/ofcd-fuzz-replica-XXXXXX",
	         tmp                             ? tmp
	         : access("/dev/shm", W_OK) == 0 ? "/dev/shm"
	                                         : "/tmp");
	char path[300], err[256];
	if (!mkdtemp(dir))
		fail("cannot make a directory");
	snprintf(path, sizeof(path), "%s/ofcd.db", dir);
	if (store_open(path, &store, err, sizeof(err)) < 0 || desired_open(store, &mirror) < 0 ||
	    demo_load(store) < 0)
		fail("cannot set the store up");
	static const char *const a[] = { "srv0", "srv1", "srv2" };
	static const char *const b[] = { "srv3", "srv7" };
	fabric("f1", a, 3);
	fabric("f2", b, 2);
	const char *seeds = getenv("OFCD_FUZZ_SEEDS");
	if (seeds) {
		write_seeds(seeds);
		exit(0);
	}
	if (store_snapshot_begin(store, &copy) < 0 || store_snapshot_step(copy, -1) != 1 ||
	    !(snapshot = store_snapshot_data(copy, &snapshot_len)))
		fail("cannot take the snapshot");
	return 0;
}

static long long count(const char *sql)
{
	sqlite3_stmt *st = NULL;
	long long n = -1;
	if (sqlite3_prepare_v2(store_db(store), sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (store_restore(store, snapshot, snapshot_len) < 0)
		fail("cannot restore the snapshot");
	desired_resync(mirror);
	desired_refresh(mirror);
	static const char *const rows = "SELECT (SELECT count(*) FROM circuit) + (SELECT count(*) "
	                                "FROM fabric) * 1000003 + (SELECT count(*) FROM server) * "
	                                "7919 + (SELECT count(*) FROM cable) * 31";
	long long before = count(rows);
	int rc = apply_change(store, ++revision, NULL, data, size, false, NULL);
	if (rc != 0 && rc != -EPROTO) {
		fprintf(stderr, "fuzz_replica: %s\n", strerror(-rc));
		fail("an answer other than applied or refused");
	}
	if (store_in_txn(store))
		fail("a transaction left open");
	if (rc == 0) {
		if (count("SELECT count(*) FROM pragma_foreign_key_check") != 0)
			fail("an applied change left a foreign key dangling");
		if (store_applied_revision(store) != revision)
			fail("an applied change without its revision");
	} else if (store_applied_revision(store) == revision || count(rows) != before) {
		fail("a refused change changed the store");
	}
	mirror_check("fuzz_replica", store, mirror);
	return 0;
}
