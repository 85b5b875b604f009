#include "audit.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/store_sql.h"
#include "utf8.h"

/* The number in text[at..at+n), all digits already. */
static int digits(const char *text, size_t at, size_t n)
{
	int v = 0;
	for (size_t i = at; i < at + n; i++)
		v = v * 10 + (text[i] - '0');
	return v;
}

/* Whether the digits of a checked form (n characters) name a moment that exists. */
static bool a_real_time(const char *text, size_t n)
{
	static const int days[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int year = digits(text, 0, 4), month = digits(text, 5, 2), day = digits(text, 8, 2);
	bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
	if (month < 1 || month > 12 || day < 1 ||
	    day > days[month - 1] + (month == 2 && leap ? 1 : 0))
		return false;
	if (n >= 16 && (digits(text, 11, 2) > 23 || digits(text, 14, 2) > 59))
		return false;
	return n < 19 || digits(text, 17, 2) <= 59;
}

int audit_parse_time(const char *text, char *out, size_t len)
{
	/* Each character of the longest form: d digit, anything else literal. */
	static const char form[] = "dddd-dd-ddTdd:dd:dd.ddd";
	size_t n = strlen(text);
	if (n && text[n - 1] == 'Z')
		n--;
	/* A date, a minute, a second or a millisecond: nothing cut in the middle. */
	if (n != 10 && n != 16 && n != 19 && n != 23)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (form[i] == 'd' ? !isdigit((unsigned char)text[i]) : text[i] != form[i])
			return -EINVAL;
	if (!a_real_time(text, n) || n + 1 > len)
		return -EINVAL;
	/* Stored times end in "Z" after the milliseconds: a shorter prefix sorts before them. */
	memcpy(out, text, n);
	out[n] = '\0';
	return 0;
}

static json_t *text_or_null(sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	return t ? json_string((const char *)t) : json_null();
}

json_t *audit_list(struct store *s, const struct audit_query *q)
{
	sqlite3_stmt *st = q->since_at
	                       ? store_stmt(s, "SELECT id, at, token, client, method, path, status "
	                                       "FROM audit WHERE at >= ? ORDER BY id LIMIT ?")
	                       : store_stmt(s, "SELECT id, at, token, client, method, path, status "
	                                       "FROM audit WHERE id > ? ORDER BY id LIMIT ?");
	json_t *rows = json_array();
	int step;
	if (!st || !rows) {
		json_decref(rows);
		return NULL;
	}
	if (q->since_at)
		sqlite3_bind_text(st, 1, q->since_at, -1, SQLITE_STATIC);
	else
		sqlite3_bind_int64(st, 1, q->since_id);
	sqlite3_bind_int64(st, 2, q->limit);
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		/* A refused request's path is whatever the client sent (%FF decoded). */
		char *path = strdup((const char *)sqlite3_column_text(st, 5));
		if (path)
			utf8_clean(path);
		json_t *row = !path ? NULL
		                    : json_pack("{s:I, s:s, s:o, s:o, s:s, s:s, s:I}", "id",
		                                (json_int_t)sqlite3_column_int64(st, 0), "at",
		                                sqlite3_column_text(st, 1), "token",
		                                text_or_null(st, 2), "client", text_or_null(st, 3),
		                                "method", sqlite3_column_text(st, 4), "path", path,
		                                "status", (json_int_t)sqlite3_column_int64(st, 6));
		free(path);
		if (!row) {
			step = SQLITE_NOMEM; /* a short page would end a client's reading early */
			break;
		}
		json_array_append_new(rows, row);
	}
	sqlite3_reset(st);
	if (step != SQLITE_DONE) {
		json_decref(rows);
		return NULL;
	}
	return rows;
}
