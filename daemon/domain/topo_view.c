/*
 * The topology's and the wiring's views as JSON text, written from the rows (topo.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/store_sql.h"
#include "topo.h"

/*
 * A JSON string. The API takes names of [A-Za-z0-9._-] only, but a store edited by hand or
 * restored from elsewhere may hold anything: the view stays JSON.
 */
static void put_string(FILE *f, const char *v)
{
	static const char escaped[] = "\"\\\001\002\003\004\005\006\007\010\011\012\013\014\015"
	                              "\016\017\020\021\022\023\024\025\026\027\030\031\032"
	                              "\033\034\035\036\037";
	const char *p = v ? v : "";
	fputc('"', f);
	for (size_t n; *p; p += n + 1) {
		n = strcspn(p, escaped);
		fwrite(p, 1, n, f);
		if (!p[n])
			break;
		if (p[n] == '"' || p[n] == '\\')
			fprintf(f, "\\%c", p[n]);
		else
			fprintf(f, "\\u%04x", (unsigned char)p[n]);
	}
	fputc('"', f);
}

/* The servers as the topology shows them: GET /v1/servers' objects without their state. */
static int put_servers(struct store *s, FILE *f)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT name, devices, ports_per_device, p2p, intra, "
	                                 "offload, switch FROM server ORDER BY id");
	int step = SQLITE_ERROR;
	fputc('[', f);
	for (bool first = true; st && (step = sqlite3_step(st)) == SQLITE_ROW; first = false) {
		fputs(first ? "{\"name\":" : ",{\"name\":", f);
		put_string(f, (const char *)sqlite3_column_text(st, 0));
		fprintf(f, ",\"devices\":%lld,\"ports_per_device\":%lld,\"p2p\":%s,\"intra\":",
		        (long long)sqlite3_column_int64(st, 1),
		        (long long)sqlite3_column_int64(st, 2),
		        sqlite3_column_int(st, 3) ? "true" : "false");
		put_string(f, (const char *)sqlite3_column_text(st, 4));
		fprintf(
		    f, ",\"offload\":%s,\"switch\":", sqlite3_column_int(st, 5) ? "true" : "false");
		if (sqlite3_column_type(st, 6) == SQLITE_NULL)
			fputs("null", f);
		else
			put_string(f, (const char *)sqlite3_column_text(st, 6));
		fputc('}', f);
	}
	fputc(']', f);
	if (st)
		sqlite3_reset(st);
	return step == SQLITE_DONE ? 0 : -EIO;
}

/*
 * Every cable, by server order, device, port: the cable table's own order (ordered by sv.id
 * instead, SQLite read the cables by unit port and sorted them, four times as long).
 */
static int put_links(struct store *s, FILE *f)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT sv.name, c.device, c.port, o.name, c.ocs_port "
	                                 "FROM cable c JOIN server sv ON sv.id = c.server_id "
	                                 "JOIN ocs o ON o.id = c.ocs_id "
	                                 "ORDER BY c.server_id, c.device, c.port");
	int step = SQLITE_ERROR;
	fputc('[', f);
	for (bool first = true; st && (step = sqlite3_step(st)) == SQLITE_ROW; first = false) {
		fputs(first ? "{\"server\":" : ",{\"server\":", f);
		put_string(f, (const char *)sqlite3_column_text(st, 0));
		fprintf(f, ",\"device\":%lld,\"port\":%lld,\"ocs\":",
		        (long long)sqlite3_column_int64(st, 1),
		        (long long)sqlite3_column_int64(st, 2));
		put_string(f, (const char *)sqlite3_column_text(st, 3));
		fprintf(f, ",\"ocs_port\":%lld}", (long long)sqlite3_column_int64(st, 4));
	}
	fputc(']', f);
	if (st)
		sqlite3_reset(st);
	return step == SQLITE_DONE ? 0 : -EIO;
}

/*
 * The wiring object: {"rule", "links", "partial"?} for its own view; inside the topology
 * (PUT-able) the rule alone when there is one (its links are not even read), else the links.
 */
static int put_wiring(struct store *s, FILE *f, bool in_topology)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT rule, partial FROM wiring WHERE id = 1");
	int step = st ? sqlite3_step(st) : SQLITE_ERROR;
	bool rule = step == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL;
	bool partial = step == SQLITE_ROW && sqlite3_column_int(st, 1);
	int rc = step == SQLITE_ROW || step == SQLITE_DONE ? 0 : -EIO;
	fputc('{', f);
	if (rule) {
		fputs("\"rule\":", f);
		put_string(f, (const char *)sqlite3_column_text(st, 0));
	} else if (!in_topology) {
		fputs("\"rule\":null", f);
	}
	if (st)
		sqlite3_reset(st);
	if (rc == 0 && (!in_topology || !rule)) {
		fputs(rule || !in_topology ? ",\"links\":" : "\"links\":", f);
		rc = put_links(s, f);
	}
	/* A rule's cabling still being inserted a part at a time (topo_apply.h). */
	if (partial)
		fputs(",\"partial\":true", f);
	fputc('}', f);
	return rc;
}

/* Ends a view's text: its line, and whether it was all written. */
static char *view_end(FILE *f, int rc, char **text)
{
	fputc('\n', f);
	if (ferror(f))
		rc = -ENOMEM;
	if (fclose(f) != 0)
		rc = -ENOMEM;
	if (rc < 0) {
		free(*text);
		*text = NULL;
	}
	return *text;
}

char *topo_json_text(struct store *s, size_t *len)
{
	json_t *head = json_pack("{s:o, s:o}", "ocs", topo_ocs_list(s), "switches",
	                         topo_switch_list(s, false));
	char *h = head ? json_dumps(head, JSON_COMPACT | JSON_SORT_KEYS) : NULL, *text = NULL;
	size_t hlen = h ? strlen(h) : 0;
	FILE *f = hlen > 2 ? open_memstream(&text, len) : NULL;
	int rc = f ? 0 : -ENOMEM;
	if (f) {
		/* head is an object: the wiring and the servers go before its closing brace. */
		fprintf(f, "%.*s,\"wiring\":", (int)(hlen - 1), h);
		rc = put_wiring(s, f, true);
		fputs(",\"servers\":", f);
		if (rc == 0)
			rc = put_servers(s, f);
		fputc('}', f);
	}
	free(h);
	json_decref(head);
	return f ? view_end(f, rc, &text) : NULL;
}

char *topo_wiring_text(struct store *s, size_t *len)
{
	char *text = NULL;
	FILE *f = open_memstream(&text, len);
	return f ? view_end(f, put_wiring(s, f, false), &text) : NULL;
}
