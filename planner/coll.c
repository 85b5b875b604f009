/*
 * Parameters, which algorithm fits which size, and the generator dispatch.
 */
#include "coll_internal.h"

#include <errno.h>
#include <math.h>
#include <string.h>

void coll_params_default(struct coll_params *p)
{
	memset(p, 0, sizeof(*p));
	p->alpha_us = 3.0;
	p->link_gbps = 200.0;
	p->intra_alpha_us = 1.0;
	p->intra_gbps = 400.0;
	p->gamma_ns_per_byte = 0.01;
	p->mtu = 4096;
	p->switch_buffer = 64;
	p->window = 32;
	p->circuit_device = NULL;
	p->link_efficiency = 1.0;
	p->intra_efficiency = 1.0;
	p->ports_per_device = 1;
}

/* An efficiency is a share of a link's rate: (0, 1]. */
static int bad_share(const char *field, double v, struct coll_error *err)
{
	if (v > 0 && v <= 1)
		return 0;
	coll_err_set(err, field, "%s must be a share in (0, 1], got %g", field, v);
	return -EINVAL;
}

static int bad_double(const char *field, double v, int positive, struct coll_error *err)
{
	if (isfinite(v) && (positive ? v > 0 : v >= 0))
		return 0;
	coll_err_set(err, field, "%s must be a finite number %s 0, got %g", field,
	             positive ? ">" : ">=", v);
	return -EINVAL;
}

int coll_params_validate(const struct coll_params *p, struct coll_error *err)
{
	int rc;

	if (!p) {
		coll_err_set(err, NULL, "no parameters");
		return -EINVAL;
	}
	rc = bad_double("alpha_us", p->alpha_us, 0, err);
	if (!rc)
		rc = bad_double("link_gbps", p->link_gbps, 1, err);
	if (!rc)
		rc = bad_double("intra_alpha_us", p->intra_alpha_us, 0, err);
	if (!rc)
		rc = bad_double("intra_gbps", p->intra_gbps, 1, err);
	if (!rc)
		rc = bad_double("gamma_ns_per_byte", p->gamma_ns_per_byte, 0, err);
	if (!rc)
		rc = bad_double("launch_us", p->launch_us, 0, err);
	for (unsigned a = 0; !rc && a < COLL_ALGORITHM__COUNT; a++)
		rc = bad_double("launch_alg_us", p->launch_alg_us[a], 0, err);
	if (!rc)
		rc = bad_double("overhead_us", p->overhead_us, 0, err);
	if (!rc)
		rc = bad_double("switch_alpha_us", p->switch_alpha_us, 0, err);
	if (!rc)
		rc = bad_share("link_efficiency", p->link_efficiency, err);
	if (!rc)
		rc = bad_share("intra_efficiency", p->intra_efficiency, err);
	if (!rc)
		rc = bad_double("device_link_gbps", p->device_link_gbps, 0, err);
	if (rc)
		return rc;
	if (!p->ports_per_device) {
		coll_err_set(err, "ports_per_device", "ports_per_device must be at least 1");
		return -EINVAL;
	}
	if ((unsigned)p->relay >= COLL_RELAY__COUNT) {
		coll_err_set(err, "relay", "unknown relay %d", (int)p->relay);
		return -EINVAL;
	}
	if ((unsigned)p->sync >= COLL_SYNC__COUNT) {
		coll_err_set(err, "sync", "unknown sync %d", (int)p->sync);
		return -EINVAL;
	}
	if (p->mtu < 256 || p->mtu > (1u << 20)) {
		coll_err_set(err, "mtu", "mtu must be 256..1048576 bytes, got %u", p->mtu);
		return -EINVAL;
	}
	if (p->segment_bytes > p->mtu) {
		coll_err_set(err, "segment_bytes", "segment_bytes %u exceeds the path mtu %u",
		             p->segment_bytes, p->mtu);
		return -EINVAL;
	}
	if (p->aggregating_switch)
		rc = coll_ina_check_window(p->window, p->switch_buffer, err);
	if (!rc && (unsigned)p->shape.topology >= COLL_TOPOLOGY__COUNT) {
		coll_err_set(err, "shape", "unknown topology %d", (int)p->shape.topology);
		rc = -EINVAL;
	}
	return rc;
}

/* Which algorithms each collective offers, in the order the selector lists them. */
static int applies(enum coll_collective c, enum coll_algorithm a)
{
	switch (c) {
	case COLL_ALLREDUCE:
		return a == COLL_ALG_RING || a == COLL_ALG_BIDIR_RING || a == COLL_ALG_RHD ||
		       a == COLL_ALG_FULL_MESH_DIRECT || a == COLL_ALG_CUBE_300 ||
		       a == COLL_ALG_CUBE_400 || a == COLL_ALG_NIC_OFFLOAD || a == COLL_ALG_INA ||
		       a == COLL_ALG_HYPERX_DIM || a == COLL_ALG_TORUS_RING;
	case COLL_ALLGATHER:
		return a == COLL_ALG_RING || a == COLL_ALG_RECURSIVE_DOUBLING ||
		       a == COLL_ALG_FULL_MESH_DIRECT || a == COLL_ALG_HYPERX_DIM ||
		       a == COLL_ALG_TORUS_RING;
	case COLL_BROADCAST:
		return a == COLL_ALG_BINOMIAL_TREE || a == COLL_ALG_FULL_MESH_DIRECT ||
		       a == COLL_ALG_SCATTER_ALLGATHER || a == COLL_ALG_HYPERX_DIM ||
		       a == COLL_ALG_TORUS_RING;
	case COLL_ALLTOALL:
		return a == COLL_ALG_DIRECT || a == COLL_ALG_PLANE_RELAYED ||
		       a == COLL_ALG_HYPERX_A2A || a == COLL_ALG_TORUS_A2A;
	default:
		return 0;
	}
}

int coll_fit_shape(enum coll_collective c, enum coll_algorithm a, uint32_t servers,
                   uint32_t devices, struct coll_error *err)
{
	if ((unsigned)c >= COLL_COLLECTIVE__COUNT) {
		coll_err_set(err, "collective", "unknown collective %d", (int)c);
		return -EINVAL;
	}
	if ((unsigned)a >= COLL_ALGORITHM__COUNT || !applies(c, a)) {
		coll_err_set(err, "algorithm", "%s is not an algorithm for %s",
		             (unsigned)a < COLL_ALGORITHM__COUNT ? coll_algorithm_name(a) : "?",
		             coll_collective_name(c));
		return -EINVAL;
	}
	if (servers > COLL_MAX_SERVERS || devices > COLL_MAX_DEVICES) {
		coll_err_set(err, servers > COLL_MAX_SERVERS ? "servers" : "devices",
		             "at most %u servers of %u devices, got %u x %u", COLL_MAX_SERVERS,
		             COLL_MAX_DEVICES, servers, devices);
		return -EINVAL;
	}
	if (c == COLL_ALLTOALL) {
		if (!servers || !devices || (uint64_t)servers * devices < 2) {
			coll_err_set(err, servers ? "devices" : "servers",
			             "all-to-all needs at least 2 devices in all, got %u servers x "
			             "%u devices",
			             servers, devices);
			return -EINVAL;
		}
		return 0;
	}
	if (servers < 2) {
		coll_err_set(err, "servers", "%s needs at least 2 servers, got %u",
		             coll_collective_name(c), servers);
		return -EINVAL;
	}
	switch (a) {
	case COLL_ALG_BIDIR_RING:
		if (servers < 3) {
			coll_err_set(err, NULL,
			             "bidirectional-ring needs at least 3 servers (with 2, "
			             "both rings are the same circuit: use ring)");
			return -EDOM;
		}
		return 0;
	case COLL_ALG_RHD:
	case COLL_ALG_RECURSIVE_DOUBLING:
		if (!coll_is_pow2(servers)) {
			coll_err_set(err, NULL, "%s needs a power-of-two number of servers, got %u",
			             coll_algorithm_name(a), servers);
			return -EDOM;
		}
		return 0;
	case COLL_ALG_CUBE_300:
	case COLL_ALG_CUBE_400:
		if (servers != 8) {
			coll_err_set(err, NULL,
			             "%s needs exactly 8 servers (the vertices of a cube), "
			             "got %u",
			             coll_algorithm_name(a), servers);
			return -EDOM;
		}
		return 0;
	default:
		return 0;
	}
}

int coll_generate(enum coll_collective c, enum coll_algorithm a, uint32_t servers, uint32_t devices,
                  uint64_t bytes, const struct coll_params *p, struct coll_schedule *out,
                  struct coll_error *err)
{
	uint32_t root = p ? p->root : 0;
	struct coll_params def;
	uint64_t P;
	int rc;

	if (!out) {
		coll_err_set(err, NULL, "no schedule to fill");
		return -EINVAL;
	}
	memset(out, 0, sizeof(*out));
	if (!p) {
		coll_params_default(&def);
		p = &def;
	}
	rc = coll_fit_shape(c, a, servers, devices, err);
	if (!rc && c == COLL_BROADCAST && root >= servers) {
		coll_err_set(err, "root", "root %u is not one of the %u servers", root, servers);
		rc = -EINVAL;
	}
	if (!rc)
		rc = coll_shape_fit(c, a, servers, p, err);
	if (rc)
		return rc;
	if (a == COLL_ALG_NIC_OFFLOAD || a == COLL_ALG_INA) {
		coll_err_set(err, "algorithm",
		             "%s runs in the NICs or the switch: priced, not "
		             "scheduled round by round",
		             coll_algorithm_name(a));
		return -EOPNOTSUPP;
	}
	/* The shape algorithms have one participant per server, all-to-all included. */
	P = c == COLL_ALLTOALL && !coll_is_shape_alg(a) ? (uint64_t)servers * devices : servers;
	if (P > COLL_MAX_PARTICIPANTS ||
	    (c == COLL_ALLTOALL && P > COLL_MAX_ALLTOALL_PARTICIPANTS)) {
		coll_err_set(err, NULL,
		             "%llu participants: schedules are generated for at most %u "
		             "(%u for all-to-all)",
		             (unsigned long long)P, COLL_MAX_PARTICIPANTS,
		             COLL_MAX_ALLTOALL_PARTICIPANTS);
		return -E2BIG;
	}
	switch (coll_is_shape_alg(a) ? COLL_COLLECTIVE__COUNT : c) {
	case COLL_COLLECTIVE__COUNT:
		rc = coll_gen_shape(c, a, p, servers, devices, bytes, out);
		break;
	case COLL_ALLREDUCE:
		rc = coll_gen_allreduce(a, servers, bytes, out);
		break;
	case COLL_ALLGATHER:
		rc = coll_gen_allgather(a, servers, bytes, out);
		break;
	case COLL_BROADCAST:
		rc = coll_gen_broadcast(a, servers, root, bytes, out);
		break;
	default:
		rc = coll_gen_alltoall(a, servers, devices, bytes, out);
		break;
	}
	if (rc)
		coll_err_set(err, NULL, "%s",
		             rc == -ENOMEM ? "out of memory" : "schedule too large");
	else
		out->shape = p->shape; /* the checker holds the transfers to its circuits */
	return rc;
}
