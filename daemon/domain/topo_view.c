/*
 * The topology's and the wiring's views as JSON text, written from the rows (topo.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "state/store_sql.h"
#include "topo.h"
#include "utf8.h"

/*
 * A view being written, into memory grown by doubling with realloc(): past glibc's mapping
 * threshold it moves the pages rather than copying them (a memstream copied and zeroed the
 * whole text at each doubling: 0.5 s at once for the 152 MB of 2.1 million links). A write
 * that finds no room fails the view rather than sending it cut.
 */
struct view {
	char *buf; /* the text, the view's until view_end() */
	size_t len, cap;
	bool short_write;
};

static void put(struct view *v, const char *s, size_t n)
{
	if (v->short_write || !n)
		return;
	if (v->len + n > v->cap) {
		size_t cap = v->cap ? v->cap : 64 * 1024;
		while (cap < v->len + n)
			cap *= 2;
		char *b = realloc(v->buf, cap);
		if (!b) {
			v->short_write = true;
			return;
		}
		v->buf = b;
		v->cap = cap;
	}
	memcpy(v->buf + v->len, s, n);
	v->len += n;
}

static void put_raw(struct view *v, const char *s)
{
	put(v, s, strlen(s));
}

static void __attribute__((format(printf, 2, 3))) putf(struct view *v, const char *fmt, ...)
{
	char buf[160];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf))
		v->short_write = true;
	else
		put(v, buf, (size_t)n);
}

/* Bytes from p that go into a JSON string as they are: valid UTF-8, nothing to escape. */
static size_t plain_run(const unsigned char *p, size_t left)
{
	size_t run = 0;
	while (run < left) {
		unsigned char c = p[run];
		if (c < 0x20 || c == '"' || c == '\\')
			break;
		size_t n = c < 0x80 ? 1 : utf8_char(p + run, left - run);
		if (!n)
			break;
		run += n;
	}
	return run;
}

/*
 * A JSON string. The API takes names of [A-Za-z0-9._-] only, but a store edited by hand or
 * restored from elsewhere may hold anything: quotes, backslashes and control characters are
 * escaped, and a byte that is not UTF-8 becomes U+FFFD, so the view stays JSON.
 */
static void put_string(struct view *v, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t left = strlen((const char *)p);
	put(v, "\"", 1);
	while (left) {
		size_t run = plain_run(p, left);
		put(v, (const char *)p, run);
		p += run;
		left -= run;
		if (!left)
			break;
		if (*p == '"' || *p == '\\')
			putf(v, "\\%c", *p);
		else if (*p < 0x20)
			putf(v, "\\u%04x", *p);
		else
			put_raw(v, "\\ufffd");
		p++;
		left--;
	}
	put(v, "\"", 1);
}

/*
 * A JSON array of the rows of st, each written by put_row(v, st, arg). 0, or -EIO when the
 * scan fails.
 */
static int put_rows(struct view *v, sqlite3_stmt *st,
                    void (*put_row)(struct view *v, sqlite3_stmt *st, const void *arg),
                    const void *arg)
{
	int step = SQLITE_ERROR;
	put(v, "[", 1);
	for (bool first = true; st && (step = sqlite3_step(st)) == SQLITE_ROW; first = false) {
		if (!first)
			put(v, ",", 1);
		put_row(v, st, arg);
	}
	put(v, "]", 1);
	if (st)
		sqlite3_reset(st);
	return step == SQLITE_DONE ? 0 : -EIO;
}

/* A string column, or null. */
static void put_string_or_null(struct view *v, sqlite3_stmt *st, int col)
{
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		put_raw(v, "null");
	else
		put_string(v, (const char *)sqlite3_column_text(st, col));
}

/*
 * A server's definition, columns 0-6 (name, devices, ports_per_device, p2p, intra, offload,
 * switch), as the members of its object, without the closing brace.
 */
static void put_server_definition(struct view *v, sqlite3_stmt *st)
{
	put_raw(v, "{\"name\":");
	put_string(v, (const char *)sqlite3_column_text(st, 0));
	putf(v, ",\"devices\":%lld,\"ports_per_device\":%lld,\"p2p\":%s,\"intra\":",
	     (long long)sqlite3_column_int64(st, 1), (long long)sqlite3_column_int64(st, 2),
	     sqlite3_column_int(st, 3) ? "true" : "false");
	put_string(v, (const char *)sqlite3_column_text(st, 4));
	putf(v, ",\"offload\":%s,\"switch\":", sqlite3_column_int(st, 5) ? "true" : "false");
	put_string_or_null(v, st, 6);
}

/* A server as the topology shows it: GET /v1/servers' object without its state. */
static void put_server(struct view *v, sqlite3_stmt *st, const void *arg)
{
	(void)arg;
	put_server_definition(v, st);
	put(v, "}", 1);
}

static int put_servers(struct store *s, struct view *v)
{
	return put_rows(v,
	                store_stmt(s, "SELECT name, devices, ports_per_device, p2p, intra, "
	                              "offload, switch FROM server ORDER BY id"),
	                put_server, NULL);
}

static int device_cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return (x > y) - (x < y);
}

int topo_names_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * A server as GET /v1/servers lists it: its definition, then "fabric" (column 7), the
 * failed devices (column 8, "1,5" as group_concat() gives them) and "stale" (arg: the
 * sorted names of stale servers, struct topo_names).
 */
static void put_listed_server(struct view *v, sqlite3_stmt *st, const void *arg)
{
	const struct topo_names *stale = arg;
	put_server_definition(v, st);
	put_raw(v, ",\"fabric\":");
	put_string_or_null(v, st, 7);
	put_raw(v, ",\"failed_devices\":[");
	/* group_concat() keeps no order: sorted here. */
	long long dev[PLAN_MAX_DEVICES];
	size_t n = 0;
	for (const char *p = (const char *)sqlite3_column_text(st, 8);
	     p && *p && n < PLAN_MAX_DEVICES;) {
		char *end;
		dev[n++] = strtoll(p, &end, 10);
		p = *end == ',' ? end + 1 : end + strlen(end);
	}
	qsort(dev, n, sizeof(*dev), device_cmp);
	for (size_t i = 0; i < n; i++)
		putf(v, "%s%lld", i ? "," : "", dev[i]);
	const char *name = (const char *)sqlite3_column_text(st, 0);
	bool is = name && stale->n &&
	          bsearch(&name, stale->v, stale->n, sizeof(*stale->v), topo_names_cmp) != NULL;
	putf(v, "],\"stale\":%s}", is ? "true" : "false");
}

static void put_link(struct view *v, sqlite3_stmt *st, const void *arg)
{
	(void)arg;
	put_raw(v, "{\"server\":");
	put_string(v, (const char *)sqlite3_column_text(st, 0));
	putf(v, ",\"device\":%lld,\"port\":%lld,\"ocs\":", (long long)sqlite3_column_int64(st, 1),
	     (long long)sqlite3_column_int64(st, 2));
	put_string(v, (const char *)sqlite3_column_text(st, 3));
	putf(v, ",\"ocs_port\":%lld}", (long long)sqlite3_column_int64(st, 4));
}

/* The wiring's row read by st ("SELECT rule, partial FROM wiring"): 0, or -EIO. */
struct wiring_row {
	bool has_rule;
	char rule[256];
	bool partial; /* a rule's cabling still being inserted a part at a time (topo_apply.h) */
};

static int read_wiring_row(sqlite3_stmt *st, struct wiring_row *w)
{
	int step = st ? sqlite3_step(st) : SQLITE_ERROR;
	*w = (struct wiring_row){ .partial = step == SQLITE_ROW && sqlite3_column_int(st, 1) };
	w->has_rule = step == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL;
	if (w->has_rule)
		snprintf(w->rule, sizeof(w->rule), "%s", (const char *)sqlite3_column_text(st, 0));
	if (st)
		sqlite3_reset(st);
	return step == SQLITE_ROW || step == SQLITE_DONE ? 0 : -EIO;
}

#define WIRING_ROW_SQL "SELECT rule, partial FROM wiring WHERE id = 1"
/*
 * Every cable, by server order, device, port: the cable table's own order (ordered by sv.id
 * instead, SQLite read the cables by unit port and sorted them, four times as long).
 */
#define LINKS_SQL                                                                                  \
	"SELECT sv.name, c.device, c.port, o.name, c.ocs_port FROM cable c JOIN server sv ON "     \
	"sv.id = c.server_id JOIN ocs o ON o.id = c.ocs_id ORDER BY c.server_id, c.device, c.port"

/*
 * The wiring object: {"rule", "links", "partial"?} for its own view; inside the topology
 * (PUT-able) the rule alone when there is one (its links are not even read), else the links.
 * Its head, up to where the links go (true: they do), and its tail after them.
 */
static bool put_wiring_head(struct view *v, const struct wiring_row *w, bool in_topology)
{
	bool rule = w->has_rule;
	put(v, "{", 1);
	if (rule) {
		put_raw(v, "\"rule\":");
		put_string(v, w->rule);
	} else if (!in_topology) {
		put_raw(v, "\"rule\":null");
	}
	if (in_topology && rule)
		return false;
	put_raw(v, rule || !in_topology ? ",\"links\":" : "\"links\":");
	return true;
}

static void put_wiring_tail(struct view *v, const struct wiring_row *w, bool in_topology)
{
	/* The topology's view is PUT back as it is: how far a rule's cabling got is not input. */
	if (w->partial && !in_topology)
		put_raw(v, ",\"partial\":true");
	put(v, "}", 1);
}

static int put_wiring(struct store *s, struct view *v, bool in_topology)
{
	struct wiring_row w;
	int rc = read_wiring_row(store_stmt(s, WIRING_ROW_SQL), &w);
	if (rc == 0 && put_wiring_head(v, &w, in_topology))
		rc = put_rows(v, store_stmt(s, LINKS_SQL), put_link, NULL);
	put_wiring_tail(v, &w, in_topology);
	return rc;
}

/* Ends a view's text: its line, then the text (*len bytes, the caller's), or NULL when any of it
 * failed. v is empty after. */
static char *view_end(struct view *v, int rc, size_t *len)
{
	put(v, "\n", 1);
	char *text = v->buf;
	*len = v->len;
	if (rc < 0 || v->short_write) {
		free(text);
		text = NULL;
		*len = 0;
	}
	*v = (struct view){ 0 };
	return text;
}

char *topo_json_text(struct store *s, size_t *len)
{
	json_t *ocs = topo_ocs_list(s), *switches = topo_switch_list(s, false);
	json_t *head =
	    ocs && switches ? json_pack("{s:O, s:O}", "ocs", ocs, "switches", switches) : NULL;
	json_decref(ocs);
	json_decref(switches);
	char *h = head ? json_dumps(head, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	size_t hlen = h ? strlen(h) : 0;
	struct view v = { 0 };
	int rc = hlen > 2 ? 0 : -ENOMEM;
	if (rc == 0) {
		/* head is an object: the wiring and the servers go before its closing brace. */
		put(&v, h, hlen - 1);
		put_raw(&v, ",\"wiring\":");
		rc = put_wiring(s, &v, true);
		put_raw(&v, ",\"servers\":");
		if (rc == 0)
			rc = put_servers(s, &v);
		put(&v, "}", 1);
	}
	free(h);
	json_decref(head);
	return view_end(&v, rc, len);
}

char *topo_wiring_text(struct store *s, size_t *len)
{
	struct view v = { 0 };
	int rc = put_wiring(s, &v, false);
	return view_end(&v, rc, len);
}

char *topo_servers_text(struct store *s, const struct topo_names *stale, size_t *len)
{
	/* Failed devices grouped once rather than looked up for each of 32,768 servers. */
	static const char sql[] =
	    "SELECT s.name, s.devices, s.ports_per_device, s.p2p, s.intra, s.offload, s.switch, "
	    "f.name, df.devices FROM server s "
	    "LEFT JOIN fabric_server fs ON fs.server_id = s.id "
	    "LEFT JOIN fabric f ON f.id = fs.fabric_id AND NOT f.partial "
	    "LEFT JOIN (SELECT server_id, group_concat(device) AS devices FROM (SELECT "
	    "server_id, device FROM device_fault ORDER BY server_id, device) GROUP BY server_id) "
	    "df ON df.server_id = s.id ORDER BY s.id";
	struct view v = { 0 };
	put_raw(&v, "{\"servers\":");
	int rc = put_rows(&v, store_stmt(s, sql), put_listed_server, stale);
	put(&v, "}", 1);
	return view_end(&v, rc, len);
}

void topo_names_free(struct topo_names *names)
{
	for (size_t i = 0; i < names->n; i++)
		free(names->v[i]);
	free(names->v);
	*names = (struct topo_names){ 0 };
}

/*
 * The wiring's view a part at a time (topo.h), from a read transaction of a connection of its
 * own: one moment of the store throughout, whatever the loop's connection writes meanwhile.
 */
struct topo_wiring_job {
	sqlite3 *db;
	sqlite3_stmt *links;
	struct wiring_row w;
	struct view v;
	bool first; /* no link written yet */
};

void topo_wiring_job_free(struct topo_wiring_job *j)
{
	if (!j)
		return;
	free(j->v.buf);
	sqlite3_finalize(j->links);
	sqlite3_close(j->db);
	free(j);
}

int topo_wiring_text_begin(struct store *s, struct topo_wiring_job **out)
{
	const char *path = sqlite3_db_filename(store_db(s), "main");
	struct topo_wiring_job *j = calloc(1, sizeof(*j));
	sqlite3_stmt *row = NULL;
	*out = NULL;
	if (!j)
		return -ENOMEM;
	j->first = true;
	/* A store in memory (tests) has no file for a second connection to open. */
	int rc = path && path[0] ? 0 : -ENOTSUP;
	if (rc == 0 && (sqlite3_open_v2(path, &j->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
	                sqlite3_busy_timeout(j->db, 1000) != SQLITE_OK ||
	                sqlite3_exec(j->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
	                sqlite3_prepare_v2(j->db, WIRING_ROW_SQL, -1, &row, NULL) != SQLITE_OK ||
	                read_wiring_row(row, &j->w) < 0 ||
	                sqlite3_prepare_v2(j->db, LINKS_SQL, -1, &j->links, NULL) != SQLITE_OK))
		rc = -EIO;
	sqlite3_finalize(row);
	if (rc < 0) {
		topo_wiring_job_free(j);
		return rc;
	}
	put_wiring_head(&j->v, &j->w, false);
	put(&j->v, "[", 1);
	*out = j;
	return 0;
}

int topo_wiring_text_step(struct topo_wiring_job *j, size_t rows)
{
	int step = SQLITE_ROW;
	if (j->v.short_write)
		return -ENOMEM;
	for (size_t i = 0; i < rows && (step = sqlite3_step(j->links)) == SQLITE_ROW; i++) {
		if (!j->first)
			put(&j->v, ",", 1);
		j->first = false;
		put_link(&j->v, j->links, NULL);
	}
	if (step == SQLITE_ROW)
		return 1;
	return step == SQLITE_DONE ? 0 : -EIO;
}

const char *topo_wiring_text_so_far(struct topo_wiring_job *j, size_t *len)
{
	*len = j->v.len;
	return j->v.buf;
}

char *topo_wiring_text_end(struct topo_wiring_job *j, size_t *len)
{
	put(&j->v, "]", 1);
	put_wiring_tail(&j->v, &j->w, false);
	char *text = view_end(&j->v, 0, len);
	topo_wiring_job_free(j);
	return text;
}
