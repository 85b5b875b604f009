/*
 * What the web console and reports read besides the JSON API: the console's
 * own files, the OpenAPI document, and a fabric's picture as SVG. The files
 * are compiled in (console.h) and hold no data, so they need no token.
 */
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "console.h"
#include "fabric_svg.h"
#include "domain/topo.h"

/* Replies with a copy of an embedded file (the reply owns malloc'd text). */
static void reply_file(struct api_req *req, const struct console_file *f)
{
	char *text = malloc(f->len ? f->len : 1);
	if (!text) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		return;
	}
	memcpy(text, f->data, f->len);
	api_reply_text(req, 200, f->content_type, text, f->len);
}

void api_console_page(struct api_req *req)
{
	const struct console_file *f = console_find(console_files, "index.html");
	if (!f) {
		api_error(req, OFCD_E_INTERNAL, NULL, "the console was not built in");
		return;
	}
	reply_file(req, f);
}

void api_console_file(struct api_req *req)
{
	const struct console_file *f = console_find(console_files, req->params[0]);
	if (!f) {
		api_error(req, OFCD_E_NOT_FOUND, "file", "the console has no file %s",
		          req->params[0]);
		return;
	}
	reply_file(req, f);
}

void api_openapi(struct api_req *req)
{
	reply_file(req, &console_openapi[0]);
}

void api_fabric_svg(struct api_req *req)
{
	struct store *s = req->env->store;
	int64_t id = topo_fabric_id(s, req->params[0]);
	if (!id) {
		api_error(req, OFCD_E_NOT_FOUND, "name", "no fabric %s", req->params[0]);
		return;
	}
	json_t *fabric = topo_fabric_json(s, id);
	json_t *failed = fabric ? topo_fabric_failed_devices(s, id) : NULL;
	size_t len = 0;
	char *svg = failed ? fabric_svg_render(fabric, failed, &len) : NULL;
	json_decref(failed);
	json_decref(fabric);
	if (!svg) {
		api_error(req, OFCD_E_INTERNAL, NULL, "cannot draw fabric %s", req->params[0]);
		return;
	}
	api_reply_text(req, 200, "image/svg+xml", svg, len);
}
