/*
 * The topology and fabrics as stored in SQLite: lookups, JSON views, and the
 * bridge between stored rows and the planner's structs.
 *
 * Every function runs on the loop thread against the daemon's store, inside
 * whatever transaction the caller (http.c for a write request) has open.
 * Returned json_t values are new references owned by the caller.
 */
#ifndef OFCD_TOPO_H
#define OFCD_TOPO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan.h"
#include "plan_state.h"

struct desired;

struct store;

/** True when the store holds no OCS unit and no server. */
bool topo_is_empty(struct store *s);
/**
 * Row id of the named object, or 0 when there is none (for a fabric, also
 * while it is still being stored a part at a time: fabric.h).
 */
int64_t topo_ocs_id(struct store *s, const char *name);
int64_t topo_server_id(struct store *s, const char *name);
int64_t topo_fabric_id(struct store *s, const char *name);

/**
 * Revision of the named object (bumped by every change to what GET shows of
 * it, see schema/007), or 0 when there is none: its entity tag.
 */
int64_t topo_ocs_revision(struct store *s, int64_t ocs_id);
int64_t topo_server_revision(struct store *s, int64_t server_id);
int64_t topo_switch_revision(struct store *s, const char *name);

/** Id of the fabric a server belongs to, or 0. */
int64_t topo_server_fabric(struct store *s, int64_t server_id);

/** True when any server cabled to this OCS unit is in a fabric. */
bool topo_ocs_in_use(struct store *s, int64_t ocs_id);

/** One OCS unit {"name","driver","ports","endpoint"}, or NULL. */
json_t *topo_ocs_json(struct store *s, int64_t id);
/*
 * The lists below are NULL when the store fails: a list cut short would look like units,
 * servers or switches gone, and a client putting it back would remove them.
 */

/** All OCS units, by name. */
json_t *topo_ocs_list(struct store *s);

/**
 * One server {"name","devices","ports_per_device","p2p","intra","offload",
 * "switch","fabric"} (switch: the name of the switch its NIC reaches, or null);
 * with detail, also "device_info": [{"index","state","ports":[{"port","ocs","ocs_port"}]}].
 */
json_t *topo_server_json(struct store *s, int64_t id, bool detail);

struct domain_units;

/**
 * The cabled ports of server id that a unit may still join to another port
 * nothing desires (a deleted fabric's circuit on a unit that has not answered
 * since), as units say: [{"device","port","ocs","ocs_port","why"}], [] when
 * none. NULL when units know nothing (a member that drives no unit) or the
 * store fails. The caller owns the list. Loop thread.
 */
json_t *topo_server_joined(struct store *s, const struct domain_units *units, int64_t id);

/**
 * topo_server_joined() of every server that has such ports, in creation
 * order: [{"id", "joined"}]; one pass over the cables. NULL as there.
 */
json_t *topo_servers_joined(struct store *s, const struct domain_units *units);

/** The end of a list read from the store: a, or NULL (a freed) unless step is SQLITE_DONE. */
json_t *topo_list_end(json_t *a, int step);

/**
 * All switches by name, {"name","aggregating","offload","buffer","window"};
 * with detail also "servers" (the names of the servers reaching each).
 */
json_t *topo_switch_list(struct store *s, bool detail);
/** One switch with its servers, or NULL when there is none. */
json_t *topo_switch_json(struct store *s, const char *name);
/** True when a switch of that name is stored. */
bool topo_switch_exists(struct store *s, const char *name);
/*
 * The topology's and the wiring's views as text (topo_view.c): written from the rows, not
 * built as JSON values (2.1 million cables at 32,768 servers would be gigabytes of those).
 * Each is one line of malloc'd JSON (the caller frees it) of *len bytes, NULL when out of
 * memory or the store fails; the same store gives the same text, which tags the view.
 */

/**
 * The whole topology in the form PUT /v1/topology takes: {"ocs", "switches",
 * "wiring" (its rule, else its links), "servers" (without fabric membership)}.
 */
char *topo_json_text(struct store *s, size_t *len);
/** The wiring {"rule": name|null, "links": [...]}, links by server order, device, port. */
char *topo_wiring_text(struct store *s, size_t *len);

/**
 * The wiring's view written a part at a time, for a cabling too large to write in one loop
 * turn (2.1 million links at 32,768 servers: 3.6 s). It reads a read transaction of a
 * connection of its own, so the text is the store at one moment, the same text
 * topo_wiring_text() gives for it. Loop thread.
 */
struct topo_wiring_job;

/**
 * Opens the job on s's file: 0, or -ENOTSUP (a store in memory: use topo_wiring_text()),
 * -EIO or -ENOMEM. *out is the caller's: topo_wiring_text_end() or topo_wiring_job_free().
 */
int topo_wiring_text_begin(struct store *s, struct topo_wiring_job **out);

/** Writes up to rows more links: 1 while some are left, 0 once all are written, -EIO. */
int topo_wiring_text_step(struct topo_wiring_job *j, size_t rows);

/**
 * The text written so far (*len bytes, j's: valid until the next call on j), so that a
 * caller may hash it as it grows.
 */
const char *topo_wiring_text_so_far(struct topo_wiring_job *j, size_t *len);

/** Frees j, returning the whole text (*len bytes, the caller's) or NULL (out of memory). */
char *topo_wiring_text_end(struct topo_wiring_job *j, size_t *len);

/** Frees j without its text. NULL is fine. */
void topo_wiring_job_free(struct topo_wiring_job *j);

/** Server names, sorted (strcmp), each and the array malloc'd: topo_names_free(). */
struct topo_names {
	char **v;
	size_t n;
};

/** Their order: qsort()'s and bsearch()'s comparison of two char * elements. */
int topo_names_cmp(const void *a, const void *b);

/** Frees what names holds (the struct itself is the caller's). */
void topo_names_free(struct topo_names *names);

/**
 * GET /v1/servers' reply: {"servers": [...]} in creation order, each server as
 * topo_server_json() shows it plus "stale" (its name among stale, borrowed).
 * NULL when the store cannot be read or memory runs out; the text is the
 * caller's (*len bytes, a newline last).
 */
char *topo_servers_text(struct store *s, const struct topo_names *stale, size_t *len);

/** A fabric with its plan (see docs/api.md), or NULL. */
json_t *topo_fabric_json(struct store *s, int64_t id);

/**
 * topo_fabric_json() as JSON text (malloc'd, the caller's; *len bytes), or
 * NULL. Its links are written as text: as jansson objects, a 1,024-server
 * fabric's 31,744 held the loop for a quarter of a second.
 */
char *topo_fabric_json_text(struct store *s, int64_t id, size_t *len);

/** A fabric's pairs of servers without a circuit: [[name, name], ...] (new reference). */
json_t *topo_fabric_missing_json(struct store *s, int64_t id);
/** {server: [failed device index, ...]} for the fabric's servers that have any (new reference). */
json_t *topo_fabric_failed_devices(struct store *s, int64_t id);
/** Copies the state of the named fabric into buf. Returns 0, or -ENOENT. */
int topo_fabric_state(struct store *s, const char *name, char *buf, size_t len);

/**
 * A fabric without the lists of its plan, for the replies schedulers read
 * often: {"name","state","revision","min_devices","formula","planes",
 * "created","updated","error" (when set),"server_count","circuits" (a count),
 * "missing" (a count)}, or NULL. Its cost is the fabric's size, not the
 * cluster's.
 */
json_t *topo_fabric_summary_json(struct store *s, const struct desired *d, int64_t id);

/**
 * All fabrics, by name: each {"name","state","revision","min_devices",
 * "circuits","missing" (counts),"servers" (names)}, or with summary as
 * topo_fabric_summary_json() (no server names). Circuits are counted in the
 * in-memory desired state d (committed changes only).
 */
json_t *topo_fabric_list(struct store *s, const struct desired *d, bool summary);

/** One OCS unit's row as the reconciler follows it (a unit per row, one driver instance each). */
struct topo_unit_row {
	int64_t id;         /**< ocs.id */
	char name[65];      /**< its name */
	char driver[33];    /**< its driver's name */
	char endpoint[257]; /**< where its controller is */
	uint32_t ports;     /**< its ports, 1..ports */
};

/**
 * Calls fn for every OCS unit's row (in no set order) until it returns
 * nonzero. Returns 0 once all were read, fn's nonzero value, or -EIO.
 */
int topo_units_each(struct store *s, int (*fn)(void *arg, const struct topo_unit_row *u),
                    void *arg);

/**
 * Which fabric owns each port of unit ocs_id as the store says (through cable
 * and membership): owner[port] for the ports below n, the others left alone.
 * Returns 0 or -EIO.
 */
int topo_unit_owners(struct store *s, int64_t ocs_id, int64_t *owner, size_t n);

/**
 * Calls fn for each circuit desired of unit ocs_id as the store says, sorted
 * by its ports (x < y), until it returns nonzero. Returns 0, fn's value or
 * -EIO.
 */
int topo_unit_circuits_each(struct store *s, int64_t ocs_id,
                            int (*fn)(void *arg, uint32_t x, uint32_t y, int64_t fabric),
                            void *arg);

/** How many fabrics are in each state (counts[PLAN_STATE_...]). Returns 0 or -EIO. */
int topo_fabric_state_counts(struct store *s, uint64_t counts[PLAN_STATE__COUNT]);

/** OCS port pairs [[x,y],...] (x < y, sorted) that all fabrics ask of the unit. */
json_t *topo_desired_json(struct store *s, int64_t ocs_id);

/**
 * What the planner needs about a fabric's servers: per server its device and
 * port counts and a port table (OCS unit as a dense index into ocs_ids,
 * health from device_fault). Owned by the struct; free with topo_input_free().
 */
struct topo_input {
	uint32_t m;                  /**< number of servers */
	int64_t *server_ids;         /**< server row ids, by position */
	struct plan_server *servers; /**< planner view, by position */
	struct plan_port *ports;     /**< storage behind servers[].ports */
	int64_t *ocs_ids;            /**< dense OCS index -> row id */
	uint32_t nocs;               /**< entries in ocs_ids */
	uint32_t ocs_cap;            /**< room in ocs_ids */
};

/** Number of a fabric's member servers (0 when there is no such fabric). */
int64_t topo_fabric_size(struct store *s, int64_t fabric_id);

/** Revision of a fabric, or 0 when there is none. */
int64_t topo_fabric_revision(struct store *s, int64_t fabric_id);

/**
 * A server of a fabric as the cost models see it (stage transfers and
 * collectives): its server row, position, and the switch its NIC reaches.
 */
struct topo_member {
	char name[65];        /**< server name */
	uint32_t position;    /**< its position in the fabric (the plan's server index) */
	uint32_t devices;     /**< devices of the server */
	bool p2p;             /**< its devices can read and write each other's memory */
	char intra[16];       /**< "full-mesh" or "two-groups" */
	bool offload;         /**< its NIC offloads collectives (document 003) */
	char switch_name[65]; /**< the switch its NIC reaches, "" when none */
	bool sw_aggregating;  /**< that switch aggregates in the network (document 004) */
	bool sw_offload;      /**< that switch runs offloaded reduction trees (document 003) */
	uint32_t sw_buffer;   /**< that switch's buffer B in messages, 0 when not given */
	uint32_t sw_window;   /**< its window W in messages, 0 when not given */
};

/**
 * Loads the servers of a fabric, in position order, into *out (malloc'd, the
 * caller frees it; NULL when there are none) and their count into *m.
 * Returns 0, -ENOMEM or -EIO.
 */
int topo_fabric_members(struct store *s, int64_t fabric_id, struct topo_member **out, uint32_t *m);

/**
 * One stored circuit between two servers of a fabric, seen from src: the src_
 * fields are the end on server src, whichever of the circuit's a and b it is.
 */
struct topo_circuit {
	uint32_t src;          /**< in: position of the source server */
	uint32_t dst;          /**< in: position of the target server */
	bool found;            /**< out: a stored circuit joins them */
	uint32_t src_device;   /**< device of the source server on the circuit */
	uint32_t src_port;     /**< its optical port */
	uint32_t src_ocs_port; /**< OCS port that port is cabled to */
	uint32_t dst_device;   /**< device of the target server on the circuit */
	uint32_t dst_port;     /**< its optical port */
	uint32_t dst_ocs_port; /**< OCS port that port is cabled to */
	int64_t ocs_id;        /**< row id of the OCS unit holding the circuit */
	char ocs[65];          /**< its name */
};

/**
 * Looks up the stored circuit of each of n server pairs of a fabric (pairs
 * may repeat; a pair with src == dst is never found) in one pass over the
 * fabric's circuits. Fills every pair; returns 0, -ENOMEM or -EIO.
 */
int topo_fabric_circuits(struct store *s, int64_t fabric_id, struct topo_circuit *pairs, size_t n);

/** Loads the planner input for servers (row ids, in fabric order). Returns 0 or -errno. */
int topo_input_load(struct store *s, const int64_t *server_ids, uint32_t m, struct topo_input *in);

/**
 * topo_input_load() a part at a time: topo_input_begin() reads every
 * server's size (in is freed on failure), topo_input_more() the cables and
 * faults of servers from to to (exclusive); the input is whole once every
 * server had its turn. Returns 0 or -errno.
 */
int topo_input_begin(struct store *s, const int64_t *server_ids, uint32_t m, struct topo_input *in);
int topo_input_more(struct store *s, struct topo_input *in, uint32_t from, uint32_t to);

/** Loads the planner input of a stored fabric (its servers in position order). */
int topo_input_load_fabric(struct store *s, int64_t fabric_id, struct topo_input *in);

/** Frees what in owns. */
void topo_input_free(struct topo_input *in);

/**
 * Reads a stored fabric's plan back into planner form (OCS indices resolved
 * through in). Returns 0, or -ENOENT when a circuit's OCS is not in in.
 */
int topo_plan_load(struct store *s, int64_t fabric_id, const struct topo_input *in,
                   struct plan_fabric *plan);

/**
 * Stores circuits from to to (exclusive) of a fabric's plan, OCS indices
 * resolved through in, beside those it has. Returns 0, -EINVAL for a circuit
 * whose OCS is not in in, or -EIO.
 */
int topo_circuits_add(struct store *s, int64_t fabric_id, const struct topo_input *in,
                      const struct plan_fabric *plan, size_t from, size_t to);

/**
 * Replaces the stored plan of a fabric (circuits, missing pairs, counts),
 * sets its state to base_state (the reconciler takes it from there) and clears
 * its error. With prev (the plan stored now, as topo_plan_load() read it),
 * only the circuits that differ are written; without, all are. When bump is
 * set the revision goes up by one. Returns 0 or -errno.
 */
int topo_plan_save(struct store *s, int64_t fabric_id, const struct topo_input *in,
                   const struct plan_fabric *prev, const struct plan_fabric *plan,
                   const char *base_state, bool bump);

#endif
