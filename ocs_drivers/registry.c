/*
 * The registry of built-in OCS drivers: the one table the daemon looks a
 * unit's `driver` field up in. Adding a driver is one ops table in its own
 * file, its declaration below and one line in ocs_drivers[].
 */
#include "ocs_driver.h"

#include <string.h>

/* Defined by each driver's file; nothing but this table refers to them. */
extern const struct ocs_driver_ops ocs_sim_driver;
extern const struct ocs_driver_ops ocs_openflow_driver;
extern const struct ocs_driver_ops ocs_netconf_driver;

const struct ocs_driver_ops *const ocs_drivers[] = {
	&ocs_sim_driver,
	&ocs_openflow_driver,
	&ocs_netconf_driver,
	NULL,
};

const struct ocs_driver_ops *ocs_driver_find(const char *name)
{
	size_t i;

	if (!name)
		return NULL;
	for (i = 0; ocs_drivers[i]; i++) {
		if (strcmp(ocs_drivers[i]->name, name) == 0)
			return ocs_drivers[i];
	}
	return NULL;
}
