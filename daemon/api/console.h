/*
 * Files compiled into the binary: the web console (the files of console/, served at / and
 * /console/{file}) and the OpenAPI document (docs/openapi.yaml as JSON,
 * served at /v1/openapi.json). console/embed.sh generates the tables into
 * build/gen/; they are constant and may be read from any thread.
 */
#ifndef OFCD_CONSOLE_H
#define OFCD_CONSOLE_H

#include <stddef.h>

/** One embedded file. */
struct console_file {
	const char *name;         /**< base name, e.g. "app.js"; NULL ends a table */
	const char *content_type; /**< MIME type it is served with */
	const char *data;         /**< its bytes (static storage) */
	size_t len;               /**< number of bytes in data */
};

/** The web console's files (build/gen/console.c), ending with a NULL name. */
extern const struct console_file console_files[];

/** The OpenAPI document as one JSON file (build/gen/openapi.c), ending with a NULL name. */
extern const struct console_file console_openapi[];

/** The file of that name in table, or NULL. */
const struct console_file *console_find(const struct console_file *table, const char *name);

#endif
