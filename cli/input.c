/* Reading what a command sends: a JSON file, or standard input for "-". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

/* Files are read whole; the daemon's own body limit is far below this. */
#define INPUT_MAX (64u << 20)

char *cmd_read_file(const char *path, char *err, size_t errlen)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		if (len + 1 >= cap) {
			char *nb = cap >= INPUT_MAX ? NULL : realloc(buf, cap ? cap * 2 : 65536);
			if (!nb) {
				snprintf(err, errlen, "%s: too large or out of memory", path);
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap = cap ? cap * 2 : 65536;
		}
		size_t got = fread(buf + len, 1, cap - len - 1, f);
		len += got;
		if (got == 0) {
			if (ferror(f)) {
				snprintf(err, errlen, "%s: read error", path);
				free(buf);
				buf = NULL;
			}
			break;
		}
	}
	if (buf)
		buf[len] = '\0';
	if (f != stdin)
		fclose(f);
	return buf;
}

int cmd_read_json(const char *path, json_t **out)
{
	char err[512];
	json_error_t je;
	char *text = cmd_read_file(path, err, sizeof(err));
	if (!text)
		return cmd_usage("%s", err);
	*out = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	free(text);
	const char *name = strcmp(path, "-") == 0 ? "standard input" : path;
	if (!*out)
		return cmd_usage("%s:%d:%d: %s", name, je.line, je.column, je.text);
	if (!json_is_object(*out) && !json_is_array(*out)) {
		json_decref(*out);
		*out = NULL;
		return cmd_usage("%s: not a JSON object or array", name);
	}
	return CMD_OK;
}
