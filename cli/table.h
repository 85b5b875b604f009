/*
 * Output for people: tables with a header and aligned columns, and
 * "key: value" blocks, built from the daemon's JSON. Single-threaded.
 */
#ifndef OFCCTL_TABLE_H
#define OFCCTL_TABLE_H

#include <jansson.h>
#include <stdio.h>

/** A table being filled row by row; cells are copied. */
struct table {
	size_t ncols; /**< columns per row */
	char **cells; /**< ncols * rows cells, header row first (malloc'd) */
	size_t n;     /**< cells added so far */
	size_t cap;   /**< cells allocated */
	int oom;      /**< a cell could not be stored: table_print reports it */
};

/** Starts a table whose header is the ncols strings of header. */
void table_init(struct table *t, size_t ncols, const char *const *header);

/** Adds the next cell (rows fill left to right), formatted like printf. */
void table_cell(struct table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Adds the next cell with the text of a JSON value (see table_text). */
void table_json(struct table *t, const json_t *v);

/**
 * Prints the table to f: columns two spaces apart, each as wide as its
 * widest cell, no trailing blanks. -ENOMEM (after a message on stderr) when
 * a cell was lost, else 0.
 */
int table_print(const struct table *t, FILE *f);

/** Frees the cells. */
void table_free(struct table *t);

/**
 * The text of a JSON value for a table, into buf: a string as is ("-" when
 * empty, so that no cell is blank), numbers in
 * decimal, true/false as yes/no, null or NULL as "-", an array as its
 * elements joined by commas, anything else as compact JSON. Returns buf.
 */
const char *table_text(const json_t *v, char *buf, size_t len);

/** Prints "key:" padded to a column, then the value formatted like printf, to stdout. */
void table_kv(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
