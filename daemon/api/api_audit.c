/* GET /v1/audit: the audit trail of write requests, for admins. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "api_handlers.h"
#include "decimal.h"
#include "domain/audit.h"

/* ?since=: an audit id (rows after it) or a UTC time (rows from it on). */
static int parse_since(struct api_req *req, struct audit_query *q, char *at, size_t len)
{
	const char *v = api_query(req, "since");
	uint64_t id;
	if (!v)
		return 0;
	if (!strchr(v, '-')) {
		if (decimal_u64(v, INT64_MAX, &id)) {
			q->since_id = (int64_t)id;
			return 0;
		}
	} else if (audit_parse_time(v, at, len) == 0) {
		q->since_at = at;
		return 0;
	}
	api_error(req, OFCD_E_INVALID_FIELD, "since",
	          "since must be an audit id or a UTC time such as 2026-11-21T23:50:38Z, got "
	          "\"%s\"",
	          v);
	return -EINVAL;
}

static int parse_limit(struct api_req *req, struct audit_query *q)
{
	uint64_t n;
	if (api_query_uint(req, "limit", 1, AUDIT_LIMIT_MAX, AUDIT_LIMIT_DEFAULT, &n) < 0)
		return -EINVAL;
	q->limit = (unsigned)n;
	return 0;
}

void api_audit_list(struct api_req *req)
{
	struct audit_query q = { 0 };
	char at[32];
	if (parse_since(req, &q, at, sizeof(at)) < 0 || parse_limit(req, &q) < 0)
		return;
	json_t *rows = audit_list(req->env->store, &q);
	if (!rows) {
		api_error(req, OFCD_E_STORE, NULL, "cannot read the audit trail, try again");
		return;
	}
	api_reply(req, 200, json_pack("{s:o}", "audit", rows));
}
