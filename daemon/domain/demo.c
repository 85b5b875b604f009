#include "demo.h"

#include <errno.h>
#include <stdio.h>

#include "log.h"
#include "state/store.h"
#include "topo.h"
#include "topo_apply.h"

#define DEMO_OCS     2
#define DEMO_SERVERS 8

int demo_load(struct store *s)
{
	static const struct topo_ocs_spec ocs[DEMO_OCS] = {
		{ .name = "ocs0", .driver = "sim", .endpoint = "", .ports = 64 },
		{ .name = "ocs1", .driver = "sim", .endpoint = "", .ports = 64 },
	};
	struct topo_server_spec servers[DEMO_SERVERS];
	char names[DEMO_SERVERS][16];
	struct ofcd_error e = { 0 };

	if (!topo_is_empty(s)) {
		log_info("daemon", "demo: the store already holds a topology, leaving it");
		return 0;
	}
	for (int i = 0; i < DEMO_SERVERS; i++) {
		snprintf(names[i], sizeof(names[i]), "srv%d", i);
		servers[i] = (struct topo_server_spec){ .name = names[i],
			                                .devices = 8,
			                                .ports_per_device = 1 };
	}
	struct topo_spec t = { .ocs = ocs,
		               .nocs = DEMO_OCS,
		               .servers = servers,
		               .nservers = DEMO_SERVERS,
		               .wiring = { .rule = 0 } };
	/* No reconciler runs yet: nothing can hold a circuit of this process. */
	int rc = store_begin(s);
	if (rc == 0) {
		rc = topo_apply(s, NULL, &t, NULL, &e);
		rc = rc < 0 ? rc : store_commit(s);
	}
	if (rc < 0) {
		store_rollback(s);
		log_error("daemon", "demo: cannot load the demo topology: %s",
		          e.msg[0] ? e.msg : "the store failed");
		ofcd_error_clear(&e);
		return rc;
	}
	log_info("daemon", "demo: loaded %d sim OCS units and %d servers of 8 devices", DEMO_OCS,
	         DEMO_SERVERS);
	return 0;
}
