/*
 * Names of the collectives, algorithms and topologies, both ways; below every other
 * planner/coll*.c module (they name algorithms in their reasons).
 */
#include "coll_internal.h"

#include <errno.h>
#include <string.h>

int coll_name_index(const char *const *names, unsigned n, const char *name)
{
	for (unsigned i = 0; name && i < n; i++)
		if (names[i] && !strcmp(name, names[i]))
			return (int)i;
	return -EINVAL;
}

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
	int i = coll_name_index(collective_names, COLL_COLLECTIVE__COUNT, name);

	if (i < 0)
		return i;
	*c = (enum coll_collective)i;
	return 0;
}

int coll_algorithm_from_name(const char *name, enum coll_algorithm *a)
{
	int i = coll_name_index(algorithm_names, COLL_ALGORITHM__COUNT, name);

	if (i < 0)
		return i;
	*a = (enum coll_algorithm)i;
	return 0;
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
	int i = coll_name_index(topology_names, COLL_TOPOLOGY__COUNT, name);

	if (i < 0)
		return i;
	*t = (enum coll_topology)i;
	return 0;
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
	int i = coll_name_index(relay_names, COLL_RELAY__COUNT, name);

	if (i < 0)
		return i;
	*r = (enum coll_relay)i;
	return 0;
}

static const char *const sync_names[COLL_SYNC__COUNT] = {
	[COLL_SYNC_BARRIER] = "barrier",
	[COLL_SYNC_PAIRWISE] = "pairwise",
	[COLL_SYNC_DATAFLOW] = "dataflow",
};

const char *coll_sync_name(enum coll_sync s)
{
	return (unsigned)s < COLL_SYNC__COUNT ? sync_names[s] : NULL;
}

int coll_sync_from_name(const char *name, enum coll_sync *s)
{
	int i = coll_name_index(sync_names, COLL_SYNC__COUNT, name);

	if (i < 0)
		return i;
	*s = (enum coll_sync)i;
	return 0;
}
