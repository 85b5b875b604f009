/*
 * OCS units, servers and switches one by one (create, delete; switch list
 * and get), and apply: a resource document made true whatever was there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "table.h"

/* A kind of resource: the name documents and messages give it, and its route. */
struct kind {
	const char *name; /* "ocs" */
	const char *path; /* "/v1/ocs/" */
};

static const struct kind kinds[] = {
	{ "fabric", "/v1/fabrics/" },
	{ "ocs", "/v1/ocs/" },
	{ "server", "/v1/servers/" },
	{ "switch", "/v1/switches/" },
};
#define OCS    (&kinds[1])
#define SERVER (&kinds[2])
#define SWITCH (&kinds[3])

/* ---- create and delete --------------------------------------------------- */

/* Sets member key of o to v (stolen); a value that is not UTF-8 is a usage error. */
static int set(json_t *o, const char *key, json_t *v)
{
	if (!v || json_object_set_new(o, key, v) < 0)
		return cmd_usage("--%s: not UTF-8", key);
	return CMD_OK;
}

/*
 * The body of a create: -f FILE's object (its name, if it has one, must be
 * NAME's), then NAME and the options given. NULL after a message, with the
 * exit code in *rc.
 */
static json_t *create_body(struct cmd_ctx *c, int *rc)
{
	json_t *body = NULL;
	const char *name = c->args.argv[0];
	if (c->args.given & OPT_FILE) {
		if ((*rc = cmd_read_json(c->args.file, &body)))
			return NULL;
		const char *given = json_string_value(json_object_get(body, "name"));
		if (!json_is_object(body) || (given && strcmp(given, name) != 0)) {
			*rc = cmd_usage("%s: %s", c->args.file,
			                json_is_object(body) ? "its name is not the one given"
			                                     : "not a JSON object");
			json_decref(body);
			return NULL;
		}
	} else {
		body = json_object();
	}
	*rc = body ? set(body, "name", json_string(name)) : cmd_fail(CMD_UNREACHABLE, "no memory");
	if (*rc) {
		json_decref(body);
		return NULL;
	}
	return body;
}

/* POSTs body (stolen) to the kind's collection and says what was made. */
static int create(struct cmd_ctx *c, const struct kind *k, json_t *body, int rc)
{
	struct client_reply r = { 0 };
	char collection[32];
	char *text = rc ? NULL : json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (rc)
		return rc;
	if (!text)
		return cmd_fail(CMD_UNREACHABLE, "out of memory");
	snprintf(collection, sizeof(collection), "%.*s", (int)strlen(k->path) - 1, k->path);
	rc = cmd_call(c, "POST", collection, text, 0, &r);
	if (rc == CMD_OK && !cmd_print_doc(c, r.json))
		printf("%s %s created\n", k->name, c->args.argv[0]);
	free(text);
	client_reply_free(&r);
	return rc;
}

int cmd_ocs_create(struct cmd_ctx *c)
{
	const struct cmd_args *a = &c->args;
	int rc;
	json_t *b = create_body(c, &rc);
	if (!rc && (a->given & OPT_PORTS))
		rc = set(b, "ports", json_integer(a->ports));
	if (!rc && (a->given & OPT_DRIVER))
		rc = set(b, "driver", json_string(a->driver));
	if (!rc && (a->given & OPT_ENDPOINT))
		rc = set(b, "endpoint", json_string(a->endpoint));
	return create(c, OCS, b, rc);
}

int cmd_server_create(struct cmd_ctx *c)
{
	const struct cmd_args *a = &c->args;
	int rc;
	json_t *b = create_body(c, &rc);
	if (!rc && (a->given & OPT_DEVICES))
		rc = set(b, "devices", json_integer(a->devices));
	if (!rc && (a->given & OPT_PORTS_PER_DEVICE))
		rc = set(b, "ports_per_device", json_integer(a->ports_per_device));
	if (!rc && (a->given & OPT_P2P))
		rc = set(b, "p2p", json_true());
	if (!rc && (a->given & OPT_INTRA))
		rc = set(b, "intra", json_string(a->intra));
	if (!rc && (a->given & OPT_OFFLOAD))
		rc = set(b, "offload", json_true());
	if (!rc && (a->given & OPT_SWITCH))
		rc = set(b, "switch", json_string(a->sw));
	return create(c, SERVER, b, rc);
}

int cmd_switch_create(struct cmd_ctx *c)
{
	const struct cmd_args *a = &c->args;
	int rc;
	json_t *b = create_body(c, &rc);
	if (!rc && (a->given & OPT_AGGREGATING))
		rc = set(b, "aggregating", json_true());
	if (!rc && (a->given & OPT_OFFLOAD))
		rc = set(b, "offload", json_true());
	if (!rc && (a->given & OPT_BUFFER))
		rc = set(b, "buffer", json_integer(a->buffer));
	if (!rc && (a->given & OPT_WINDOW))
		rc = set(b, "window", json_integer(a->window));
	return create(c, SWITCH, b, rc);
}

/* DELETE the named object (query: "" or "?force=true"); silent when --ignore-not-found spared a
 * 404. */
static int remove_named(struct cmd_ctx *c, const struct kind *k, const char *query)
{
	struct client_reply r = { 0 };
	char *path = cmd_path(c, k->path, c->args.argv[0], query);
	if (!path)
		return CMD_UNREACHABLE;
	int rc = cmd_call(c, "DELETE", path, NULL, 0, &r);
	if (rc == CMD_OK && r.status != 404 && !cmd_print_doc(c, r.json))
		printf("%s %s deleted\n", k->name, c->args.argv[0]);
	free(path);
	client_reply_free(&r);
	return rc;
}

int cmd_ocs_delete(struct cmd_ctx *c)
{
	return remove_named(c, OCS, c->args.given & OPT_FORCE ? "?force=true" : "");
}

int cmd_server_delete(struct cmd_ctx *c)
{
	return remove_named(c, SERVER, "");
}

int cmd_switch_delete(struct cmd_ctx *c)
{
	return remove_named(c, SWITCH, "");
}

/* ---- switches ------------------------------------------------------------ */

static const char *const switch_head[] = { "NAME",   "AGGREGATING", "OFFLOAD",
	                                   "BUFFER", "WINDOW",      "SERVERS" };
static const char *const switch_keys[] = { "name",   "aggregating", "offload",
	                                   "buffer", "window",      "servers" };

static int show_switches(const json_t *reply)
{
	return cmd_print_rows(json_object_get(reply, "switches"), switch_head, switch_keys, 5);
}

static int show_switches_wide(const json_t *reply)
{
	return cmd_print_rows(json_object_get(reply, "switches"), switch_head, switch_keys, 6);
}

int cmd_switch_list(struct cmd_ctx *c)
{
	return cmd_get_show(c, "/v1/switches", show_switches, show_switches_wide);
}

static int show_switch(const json_t *w)
{
	char buf[4096];
	for (size_t i = 0; i < sizeof(switch_keys) / sizeof(switch_keys[0]); i++)
		table_kv(switch_keys[i], "%s",
		         table_text(json_object_get(w, switch_keys[i]), buf, sizeof(buf)));
	return CMD_OK;
}

int cmd_switch_get(struct cmd_ctx *c)
{
	char *path = cmd_path(c, "/v1/switches/", c->args.argv[0], "");
	if (!path)
		return CMD_UNREACHABLE;
	int rc = cmd_get_show(c, path, show_switch, NULL);
	free(path);
	return rc;
}

/* ---- apply --------------------------------------------------------------- */

/* Prints what apply did to one document: kubectl's words. */
static void applied(struct cmd_ctx *c, const struct kind *k, const char *name, const char *what)
{
	json_t *doc = json_pack("{s:s, s:s, s:s}", "kind", k->name, "name", name, "result", what);
	/* Several documents make one YAML stream. */
	if (doc && c->format == OUT_YAML)
		puts("---");
	if (!doc || !cmd_print_doc(c, doc))
		printf("%s/%s %s\n", k->name, name, what);
	json_decref(doc);
}

/*
 * One document {"kind", "name", ...the body of its PUT}: PUT creates it
 * (201) or finds it as it is (200). One found with other values is the
 * daemon's 409 conflict, naming the member: a PUT never changes an object
 * (the topology's PUT does, and may re-cable the cluster with it). where
 * prefixes messages about the document ("" or "[3]: ").
 */
static int apply_one(struct cmd_ctx *c, json_t *doc, const char *where)
{
	const char *kind = json_string_value(json_object_get(doc, "kind"));
	const char *name = json_string_value(json_object_get(doc, "name"));
	const struct kind *k = NULL;
	if (!json_is_object(doc))
		return cmd_usage("%snot a JSON object", where);
	for (size_t i = 0; kind && i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (strcmp(kind, kinds[i].name) == 0)
			k = &kinds[i];
	}
	if (!k)
		return cmd_usage("%skind must be fabric, ocs, server or switch", where);
	if (!name)
		return cmd_usage("%sname must be a string", where);

	json_t *spec = json_deep_copy(doc);
	json_object_del(spec, "kind");
	char *body = spec ? json_dumps(spec, JSON_COMPACT) : NULL;
	char *path = body ? cmd_path(c, k->path, name, "") : NULL;
	struct client_reply r = { 0 };
	int rc = !body  ? cmd_fail(CMD_UNREACHABLE, "out of memory")
	         : path ? cmd_call(c, "PUT", path, body, 0, &r)
	                : CMD_UNREACHABLE;
	if (rc == CMD_OK)
		applied(c, k, name, r.status == 201 ? "created" : "unchanged");
	client_reply_free(&r);
	json_decref(spec);
	free(path);
	free(body);
	return rc;
}

/* FILE holds one document, or an array of them applied in order (the first failure stops). */
int cmd_apply(struct cmd_ctx *c)
{
	json_t *docs, *doc;
	size_t i;
	int rc = cmd_read_json(c->args.argv[0], &docs);
	if (rc)
		return rc;
	if (json_is_object(docs))
		rc = apply_one(c, docs, "");
	json_array_foreach(docs, i, doc)
	{
		char where[32];
		snprintf(where, sizeof(where), "[%zu]: ", i);
		if ((rc = apply_one(c, doc, where)))
			break;
	}
	json_decref(docs);
	return rc;
}
