#include "table.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The width of the key column of table_kv blocks: the longest key (ports_per_device) and room. */
#define KV_WIDTH 18

void table_init(struct table *t, size_t ncols, const char *const *header)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	for (size_t i = 0; i < ncols; i++)
		table_cell(t, "%s", header[i]);
}

static void add(struct table *t, char *cell)
{
	if (!cell) {
		t->oom = 1;
		return;
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		char **cells = realloc(t->cells, cap * sizeof(*cells));
		if (!cells) {
			free(cell);
			t->oom = 1;
			return;
		}
		t->cells = cells;
		t->cap = cap;
	}
	t->cells[t->n++] = cell;
}

void table_cell(struct table *t, const char *fmt, ...)
{
	char *cell = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&cell, fmt, ap) < 0)
		cell = NULL;
	va_end(ap);
	add(t, cell);
}

const char *table_text(const json_t *v, char *buf, size_t len)
{
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_STRING:
		snprintf(buf, len, "%s", json_string_length(v) ? json_string_value(v) : "-");
		break;
	case JSON_INTEGER:
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		snprintf(buf, len, "%g", json_real_value(v));
		break;
	case JSON_TRUE:
		snprintf(buf, len, "yes");
		break;
	case JSON_FALSE:
		snprintf(buf, len, "no");
		break;
	case JSON_NULL:
		snprintf(buf, len, "-");
		break;
	case JSON_ARRAY: {
		size_t used = 0, i;
		json_t *e;
		buf[0] = '\0';
		json_array_foreach(v, i, e)
		{
			char one[256];
			int w = snprintf(buf + used, len - used, "%s%s", i ? "," : "",
			                 table_text(e, one, sizeof(one)));
			if (w < 0 || (size_t)w >= len - used)
				break;
			used += (size_t)w;
		}
		if (!json_array_size(v))
			snprintf(buf, len, "-");
		break;
	}
	case JSON_OBJECT: {
		char *s = json_dumps(v, JSON_COMPACT);
		snprintf(buf, len, "%s", s ? s : "?");
		free(s);
		break;
	}
	}
	return buf;
}

void table_json(struct table *t, const json_t *v)
{
	char buf[4096];
	table_cell(t, "%s", table_text(v, buf, sizeof(buf)));
}

int table_print(const struct table *t, FILE *f)
{
	if (t->oom) {
		fprintf(stderr, "ofcctl: out of memory\n");
		return -ENOMEM;
	}
	size_t *width = calloc(t->ncols, sizeof(*width));
	if (!width) {
		fprintf(stderr, "ofcctl: out of memory\n");
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->n; i++) {
		size_t w = strlen(t->cells[i]);
		if (w > width[i % t->ncols])
			width[i % t->ncols] = w;
	}
	for (size_t i = 0; i < t->n; i++) {
		size_t col = i % t->ncols;
		bool last = col == t->ncols - 1 || i == t->n - 1;
		if (last)
			fprintf(f, "%s\n", t->cells[i]);
		else
			fprintf(f, "%-*s  ", (int)width[col], t->cells[i]);
	}
	free(width);
	return 0;
}

void table_free(struct table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

void table_kv(const char *key, const char *fmt, ...)
{
	va_list ap;
	printf("%s:%*s", key, (int)(strlen(key) < KV_WIDTH ? KV_WIDTH - strlen(key) : 1), "");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}
