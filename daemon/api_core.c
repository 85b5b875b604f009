/* Routes of the daemon itself: health probe and metrics. */
#include <stdlib.h>

#include "api_handlers.h"
#include "metrics.h"
#include "ofcd.h"

void api_health(struct api_req *req)
{
	api_reply(req, 200,
	          json_pack("{s:s, s:s, s:I}", "status", req->d->draining ? "draining" : "ok",
	                    "version", OFCD_VERSION, "uptime_s", (json_int_t)ofcd_uptime(req->d)));
}

void api_metrics(struct api_req *req)
{
	size_t len = 0;
	char *text = metrics_render(&len);
	if (!text) {
		api_error(req, OFCD_E_INTERNAL, NULL, "cannot render metrics");
		return;
	}
	api_reply_text(req, 200, "text/plain; version=0.0.4", text, len);
}
