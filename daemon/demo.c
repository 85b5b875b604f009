#include "demo.h"

#include <errno.h>
#include <string.h>

#include "api.h"
#include "api_handlers.h"
#include "log.h"
#include "ofcd.h"
#include "store_sql.h"

static const char demo_topology[] =
    "{\"ocs\": [{\"name\": \"ocs0\", \"driver\": \"sim\", \"ports\": 64},"
    "           {\"name\": \"ocs1\", \"driver\": \"sim\", \"ports\": 64}],"
    " \"servers\": ["
    "  {\"name\": \"srv0\", \"devices\": 8}, {\"name\": \"srv1\", \"devices\": 8},"
    "  {\"name\": \"srv2\", \"devices\": 8}, {\"name\": \"srv3\", \"devices\": 8},"
    "  {\"name\": \"srv4\", \"devices\": 8}, {\"name\": \"srv5\", \"devices\": 8},"
    "  {\"name\": \"srv6\", \"devices\": 8}, {\"name\": \"srv7\", \"devices\": 8}],"
    " \"wiring\": {\"rule\": \"plane-per-ocs\"}}";

int demo_load(struct ofcd *d)
{
	sqlite3_stmt *st = store_stmt(d->store, "SELECT (SELECT count(*) FROM ocs) + "
	                                        "(SELECT count(*) FROM server)");
	int have = 0;
	if (st && sqlite3_step(st) == SQLITE_ROW)
		have = sqlite3_column_int(st, 0);
	if (st)
		sqlite3_reset(st);
	if (have) {
		log_info("daemon", "demo: the store already holds a topology, leaving it");
		return 0;
	}

	struct api_req req;
	memset(&req, 0, sizeof(req));
	req.env = &d->env;
	req.method = "PUT";
	req.path = "/v1/topology";
	req.body = json_loads(demo_topology, 0, NULL);
	int rc = store_begin(d->store);
	if (rc == 0) {
		api_topology_put(&req);
		if (req.status == 200)
			rc = store_commit(d->store);
		else
			rc = -EINVAL;
	}
	if (rc < 0) {
		store_rollback(d->store);
		log_error("daemon", "demo: cannot load the demo topology (HTTP %u)", req.status);
	} else {
		log_info("daemon", "demo: loaded 2 sim OCS units and 8 servers of 8 devices");
	}
	json_decref(req.body);
	json_decref(req.reply);
	return rc;
}
