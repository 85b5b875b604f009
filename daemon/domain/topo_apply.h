/*
 * Changes to the topology: OCS units, switches, servers, the cabling, and
 * the whole topology at once (PUT /v1/topology and the demo). The caller
 * hands over values already checked for form (types, ranges, name rules:
 * the API's job); these functions check them against what is stored and
 * either change the store or refuse with an ofcd_error, changing nothing
 * they did not undo. They run inside the caller's transaction (the API's
 * dispatch, or the demo's), so a refusal rolls everything back.
 *
 * Strings in the specs are borrowed for the call. Loop thread only.
 */
#ifndef OFCD_TOPO_APPLY_H
#define OFCD_TOPO_APPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/errors.h"

struct domain_units;
struct store;

#define TOPO_OCS_MAX_PORTS       65536      /**< largest OCS unit accepted */
#define TOPO_ENDPOINT_MAX_LEN    256        /**< longest driver endpoint */
#define TOPO_SWITCH_MAX_MESSAGES (1u << 20) /**< largest switch buffer B (and window W) */

/** The ways a server's devices may be joined inside it (index = topo_server_spec.intra). */
extern const char *const topo_intra_names[];

/** The wiring rules (index = topo_wiring_spec.rule). */
extern const char *const topo_wiring_rules[];

/** One OCS unit. */
struct topo_ocs_spec {
	const char *name;     /**< unit name */
	const char *driver;   /**< driver name from the registry ("sim", "openflow") */
	const char *endpoint; /**< driver endpoint, "" for none */
	uint32_t ports;       /**< OCS ports, 1..TOPO_OCS_MAX_PORTS */
};

/** One electrical switch that servers' NICs reach. */
struct topo_switch_spec {
	const char *name; /**< switch name */
	bool aggregating; /**< it aggregates in the network (document 004) */
	bool offload;     /**< it carries NIC-offloaded collectives (document 003) */
	uint32_t buffer;  /**< B, messages per job; 0 for none */
	uint32_t window;  /**< W, messages in flight; 0 for none */
};

/** One server. */
struct topo_server_spec {
	const char *name;          /**< server name */
	uint32_t devices;          /**< devices (NPUs/GPUs) */
	uint32_t ports_per_device; /**< optical ports per device */
	bool p2p;                  /**< devices read and write each other's memory */
	int intra;                 /**< index into topo_intra_names */
	bool offload;              /**< its RDMA NIC offloads collectives */
	const char *sw;            /**< the switch its NIC reaches, or NULL */
};

/** One cable: a device's optical port to an OCS port. */
struct topo_link_spec {
	const char *server; /**< server name */
	uint32_t device;    /**< device index */
	uint32_t port;      /**< optical port of the device */
	const char *ocs;    /**< OCS unit name */
	uint32_t ocs_port;  /**< its port, from 1 */
};

/** The cabling: a rule, or explicit links. */
struct topo_wiring_spec {
	int rule;                           /**< index into topo_wiring_rules, or -1 for links */
	const struct topo_link_spec *links; /**< the cables when rule is -1 */
	size_t nlinks;                      /**< entries in links */
};

/** A whole topology, as PUT /v1/topology replaces it. */
struct topo_spec {
	const struct topo_ocs_spec *ocs;         /**< OCS units */
	size_t nocs;                             /**< entries in ocs */
	const struct topo_switch_spec *switches; /**< switches (the stored ones not here go) */
	size_t nswitches;                        /**< entries in switches */
	const struct topo_server_spec *servers;  /**< servers */
	size_t nservers;                         /**< entries in servers */
	struct topo_wiring_spec wiring;          /**< the cabling (links: none when nlinks is 0) */
};

/**
 * Checks what the form alone tells about a unit: a known driver and an
 * endpoint it accepts. prefix names the unit's object in messages (NULL for
 * the body). Returns 0 or -EINVAL with e set.
 */
int topo_ocs_check(const struct topo_ocs_spec *o, const char *prefix, struct ofcd_error *e);

/** Adds a unit (409 conflict when the name is taken). Returns its row id or -errno. */
int64_t topo_ocs_add(struct store *s, const struct topo_ocs_spec *o, struct ofcd_error *e);

/**
 * PUT of a unit: adds it (*created set), or confirms the stored unit of that
 * name when driver, ports and endpoint are the same; a unit that differs is
 * 409 conflict naming the first member that does, with the stored unit as
 * details. Returns its row id or -errno with e set.
 */
int64_t topo_ocs_put(struct store *s, const struct topo_ocs_spec *o, bool *created,
                     struct ofcd_error *e);

/**
 * Forgets a unit: refused while servers of a fabric are cabled to it, and,
 * unless force, while the unit may still hold cross-connects of ofcd's (units
 * tells). Returns 0 or -errno with e set.
 */
int topo_ocs_remove(struct store *s, const struct domain_units *units, const char *name, bool force,
                    struct ofcd_error *e);

/**
 * Checks what the form alone tells about a switch (an aggregating switch
 * needs B and W, and W <= B). prefix as for topo_ocs_check().
 */
int topo_switch_check(const struct topo_switch_spec *w, const char *prefix, struct ofcd_error *e);

/** Adds a switch (409 when the name is taken). Returns 0 or -errno with e set. */
int topo_switch_add(struct store *s, const struct topo_switch_spec *w, struct ofcd_error *e);

/**
 * PUT of a switch: adds it (*created set) or confirms an identical one (409
 * conflict as for topo_ocs_put()). Returns 0 or -errno with e set.
 */
int topo_switch_put(struct store *s, const struct topo_switch_spec *w, bool *created,
                    struct ofcd_error *e);

/** Removes a switch no server reaches. Returns 0 or -errno with e set (404, 409). */
int topo_switch_remove(struct store *s, const char *name, struct ofcd_error *e);

/** Inserts or updates every switch of v[0..n). Returns 0 or -EIO. For topo_apply(). */
int topo_switches_replace(struct store *s, const struct topo_switch_spec *v, size_t n);

/** Deletes the stored switches not in keep[0..n). Returns 0 or -EIO. For topo_apply(). */
int topo_switches_prune(struct store *s, const struct topo_switch_spec *keep, size_t n);

/**
 * Checks what the form alone tells about a server (a two-groups server needs
 * an even device count). prefix as for topo_ocs_check().
 */
int topo_server_check(const struct topo_server_spec *v, const char *prefix, struct ofcd_error *e);

/** Adds a server (409 when taken, 422 for an unknown switch). Returns its row id or -errno. */
int64_t topo_server_add(struct store *s, const struct topo_server_spec *v, struct ofcd_error *e);

/**
 * PUT of a server: adds it (*created set) or confirms an identical one
 * (devices, ports per device, p2p, intra, offload and switch; 409 conflict as
 * for topo_ocs_put()). Returns its row id or -errno with e set.
 */
int64_t topo_server_put(struct store *s, const struct topo_server_spec *v, bool *created,
                        struct ofcd_error *e);

/** Removes a server in no fabric. Returns 0 or -errno with e set. */
int topo_server_remove(struct store *s, const char *name, struct ofcd_error *e);

/** A rule cabling's new cables not inserted yet (topo_wiring_apply()'s rest). */
struct topo_cables;

/** New cables a wiring change inserts at once; more are left to parts when asked. */
#define TOPO_CABLES_AT_ONCE 8192

/** Cables a part inserts, about: a rule's part is whole servers (about 40 ms at 32,768). */
#define TOPO_CABLES_STEP 16384

/**
 * Replaces the cabling, refusing (409) to change a cable a fabric's circuit
 * uses, or to cable a device port to an OCS port that units (NULL: none
 * known) say may still be joined to another port. prefix is the wiring
 * object's field ("wiring" inside a topology, NULL for PUT /v1/wiring). With
 * rest set, a rule's cabling that adds more than TOPO_CABLES_AT_ONCE cables
 * leaves their insertion to parts: *rest (owned by the caller, NULL when none
 * is left) for topo_cables_step(), and the wiring row is marked partial until
 * the last part. Everything that can be refused is checked before. Returns 0
 * or -errno with e set (*rest NULL).
 */
int topo_wiring_apply(struct store *s, const struct domain_units *units,
                      const struct topo_wiring_spec *w, const char *prefix,
                      struct topo_cables **rest, struct ofcd_error *e);

/**
 * Inserts the next TOPO_CABLES_STEP cables of c in the open transaction; the
 * last part marks the wiring whole and sets *done. Returns 1 (the turn should
 * end: a part is as much as a turn holds), 0 once done, or -EIO.
 */
int topo_cables_step(struct store *s, struct topo_cables *c, bool *done);

/** Inserts every cable of c left, at once. Returns 0 or -EIO. */
int topo_cables_finish(struct store *s, struct topo_cables *c);

/** Frees c (NULL is fine). */
void topo_cables_free(struct topo_cables *c);

/**
 * A wiring marked partial (its parts were cut short by a stop or a failing
 * store) is finished: its rule is applied again, which inserts the cables
 * missing, in the caller's transaction. With give_up (the start-up, the
 * write after such a failure) a failure that trying again would not mend (a
 * rule that no longer fits) is logged and the mark cleared. Returns 0 (also
 * when there was nothing to do), or -errno: -EIO, -ENOMEM, or without
 * give_up whatever kept it from being whole.
 */
int topo_wiring_finish(struct store *s, bool give_up);

/**
 * Whether a write in parts left a fabric (fabric_drop_unfinished()) or the
 * wiring (topo_wiring_finish()) unfinished: one read, outside a transaction.
 * True when the store cannot tell.
 */
bool topo_unfinished_writes(struct store *s);

/**
 * Replaces the whole topology: units, switches and servers by name (kept
 * names are updated in place, so fabrics' references stay valid), then the
 * cabling. Anything a fabric uses must survive unchanged, and units that are
 * dropped or re-addressed must not still hold circuits (units tell), else 409
 * and nothing changes. rest as for topo_wiring_apply(). Returns 0 or -errno
 * with e set.
 */
int topo_apply(struct store *s, const struct domain_units *units, const struct topo_spec *t,
               struct topo_cables **rest, struct ofcd_error *e);

#endif
