/* The demo topology that `make run` starts with (ofcd --demo). Loop thread only. */
#ifndef OFCD_DEMO_H
#define OFCD_DEMO_H

struct store;

/**
 * Loads two sim OCS units, 8 servers of 8 devices and plane-per-ocs cabling
 * into an empty store through topo_apply(), the path of PUT /v1/topology, in
 * a transaction of its own. A store that already holds a topology is left
 * alone. Returns 0 or -errno (logged).
 */
int demo_load(struct store *s);

#endif
