/* Printing replies in the form -o asks: tables, the daemon's JSON, or YAML. */
#include <stdio.h>
#include <stdlib.h>

#include "cmd.h"
#include "table.h"
#include "yaml.h"

void cmd_print_body(const struct client_reply *r)
{
	fwrite(r->body, 1, r->len, stdout);
	if (r->len && r->body[r->len - 1] != '\n')
		putchar('\n');
}

int cmd_print_rows(const json_t *list, const char *const *head, const char *const *keys,
                   size_t ncols)
{
	struct table t;
	const json_t *e;
	size_t i;
	table_init(&t, ncols, head);
	json_array_foreach(list, i, e)
	{
		for (size_t k = 0; k < ncols; k++)
			table_json(&t, json_object_get(e, keys[k]));
	}
	int rc = table_print(&t, stdout);
	table_free(&t);
	return rc ? CMD_UNREACHABLE : CMD_OK;
}

int cmd_print(struct cmd_ctx *c, const struct client_reply *r, cmd_show_fn table, cmd_show_fn wide)
{
	switch (c->format) {
	case OUT_JSON:
		cmd_print_body(r);
		return CMD_OK;
	case OUT_YAML:
		yaml_print(stdout, r->json);
		return CMD_OK;
	case OUT_WIDE:
		return (wide ? wide : table)(r->json);
	case OUT_TABLE:
		break;
	}
	return table(r->json);
}

bool cmd_print_doc(struct cmd_ctx *c, const json_t *v)
{
	if (c->format == OUT_YAML) {
		yaml_print(stdout, v);
		return true;
	}
	if (c->format != OUT_JSON)
		return false;
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (s)
		puts(s);
	free(s);
	return true;
}
