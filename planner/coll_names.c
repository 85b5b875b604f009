/*
 * Names of the collectives, algorithms and topologies, both ways; below every other
 * planner/coll*.c module (they name algorithms in their reasons).
 */
#include "coll_internal.h"

#include <errno.h>
#include <string.h>

static const char *const collective_names[COLL_COLLECTIVE__COUNT] = {
	[COLL_ALLREDUCE] = "allreduce",
	[COLL_ALLGATHER] = "allgather",
	[COLL_ALLTOALL] = "alltoall",
	[COLL_BROADCAST] = "broadcast",
};

static const char *const algorithm_names[COLL_ALGORITHM__COUNT] = {
	[COLL_ALG_RING] = "ring",
	[COLL_ALG_BIDIR_RING] = "bidirectional-ring",
	[COLL_ALG_RHD] = "recursive-halving-doubling",
	[COLL_ALG_RECURSIVE_DOUBLING] = "recursive-doubling",
	[COLL_ALG_FULL_MESH_DIRECT] = "full-mesh-direct",
	[COLL_ALG_CUBE_300] = "cube-300",
	[COLL_ALG_CUBE_400] = "cube-400",
	[COLL_ALG_BINOMIAL_TREE] = "binomial-tree",
	[COLL_ALG_SCATTER_ALLGATHER] = "scatter-allgather",
	[COLL_ALG_DIRECT] = "direct",
	[COLL_ALG_PLANE_RELAYED] = "plane-relayed",
	[COLL_ALG_NIC_OFFLOAD] = "nic-offload",
	[COLL_ALG_INA] = "in-network-aggregation",
	[COLL_ALG_HYPERX_DIM] = "hyperx-dim-ordered",
	[COLL_ALG_HYPERX_A2A] = "hyperx-dim-ordered-a2a",
	[COLL_ALG_TORUS_RING] = "torus-ring",
	[COLL_ALG_TORUS_A2A] = "torus-dim-ordered-a2a",
};

const char *coll_collective_name(enum coll_collective c)
{
	return (unsigned)c < COLL_COLLECTIVE__COUNT ? collective_names[c] : NULL;
}

const char *coll_algorithm_name(enum coll_algorithm a)
{
	return (unsigned)a < COLL_ALGORITHM__COUNT ? algorithm_names[a] : NULL;
}

int coll_collective_from_name(const char *name, enum coll_collective *c)
{
	for (unsigned i = 0; name && i < COLL_COLLECTIVE__COUNT; i++)
		if (!strcmp(name, collective_names[i])) {
			*c = (enum coll_collective)i;
			return 0;
		}
	return -EINVAL;
}

int coll_algorithm_from_name(const char *name, enum coll_algorithm *a)
{
	for (unsigned i = 0; name && i < COLL_ALGORITHM__COUNT; i++)
		if (!strcmp(name, algorithm_names[i])) {
			*a = (enum coll_algorithm)i;
			return 0;
		}
	return -EINVAL;
}

static const char *const topology_names[COLL_TOPOLOGY__COUNT] = {
	[COLL_TOPO_FULL_MESH] = "full-mesh",
	[COLL_TOPO_HYPERX] = "hyperx",
	[COLL_TOPO_TORUS] = "torus",
};

const char *coll_topology_name(enum coll_topology t)
{
	return (unsigned)t < COLL_TOPOLOGY__COUNT ? topology_names[t] : NULL;
}

int coll_topology_from_name(const char *name, enum coll_topology *t)
{
	for (unsigned i = 0; name && i < COLL_TOPOLOGY__COUNT; i++)
		if (!strcmp(name, topology_names[i])) {
			*t = (enum coll_topology)i;
			return 0;
		}
	return -EINVAL;
}

static const char *const relay_names[COLL_RELAY__COUNT] = {
	[COLL_RELAY_NONE] = "none",
	[COLL_RELAY_CUT_THROUGH] = "cut-through",
	[COLL_RELAY_STORE_FORWARD] = "store-and-forward",
};

const char *coll_relay_name(enum coll_relay r)
{
	return (unsigned)r < COLL_RELAY__COUNT ? relay_names[r] : NULL;
}

int coll_relay_from_name(const char *name, enum coll_relay *r)
{
	for (unsigned i = 0; name && i < COLL_RELAY__COUNT; i++)
		if (!strcmp(name, relay_names[i])) {
			*r = (enum coll_relay)i;
			return 0;
		}
	return -EINVAL;
}
