/*
 * Transmission-method cost model between two pipeline stages (document 000 of
 * spec/SEEDS.md, FIG. 14-18, [0149]-[0185]; issue 5). docs/cost-model.md
 * derives every formula used here.
 *
 * Stage k runs on the source server, stage k+1 on the target server. Exactly
 * one optical circuit joins them: device `circuit_device` of the source (src)
 * to device `circuit_device` of the target (dst). Every other device's data
 * must be funnelled through that circuit. The model prices each transmission
 * method as the sum of its steps, each step alpha + bytes / bandwidth on the
 * path it uses, and selects one under a policy.
 *
 * Methods and their stable names and ids:
 *   0 intra-server            both stages on one server: broadcast inside it
 *   1 send-broadcast          send once src->dst, broadcast inside the target
 *   2 p2p-relay               src reads its peers over P2P, send, dst writes
 *   3 allgather-send-scatter  allgather onto src, send, scatter from dst
 *   4 switch-relay            sends through the in-server switch, send, sends
 *
 * Units: bytes are bytes, bandwidths gigabits per second (1 Gb/s = 1000 bits
 * per microsecond), times microseconds.
 *
 * Threads and memory: pure computation, no I/O, no allocation, no global
 * mutable state; any thread may call any function concurrently. Inputs are
 * borrowed for the call only. Every string returned (names, reasons, rules,
 * bad field names) is a static constant that lives as long as the program.
 *
 * Errors are 0 or -errno: -EINVAL for an unknown name or an out-of-range
 * field, with the field named through a bad_field argument where there is one.
 */
#ifndef OFCD_COST_H
#define OFCD_COST_H

#include <stdbool.h>

#define COST_MAX_DEVICES  1024               /**< largest devices per server accepted */
#define COST_MAX_BYTES    1125899906842624.0 /**< 2^50: largest bytes per device accepted */
#define COST_MAX_STEPS    3                  /**< most steps any method has */
#define COST_METHOD_COUNT 5                  /**< methods 0..4 */
#define COST_PARAM_COUNT  7                  /**< fields of struct cost_params */

/*
 * Parameter ranges. Bandwidths stay above 1e-6 Gb/s and delays below 1e9 us
 * so that the largest request (2^50 bytes, COST_MAX_DEVICES devices) still
 * prices to a finite number of microseconds.
 */
#define COST_GBPS_MIN  1e-6 /**< smallest bandwidth, Gb/s */
#define COST_GBPS_MAX  1e9  /**< largest bandwidth, Gb/s */
#define COST_DELAY_MAX 1e9  /**< largest delay, us (the smallest is 0) */

/* Default parameters (docs/cost-model.md justifies each). */
#define COST_DEFAULT_INTER_GBPS       400.0 /**< one 400G optical port per device */
#define COST_DEFAULT_INTER_LATENCY_US 3.0   /**< RDMA send across the OCS, one way */
#define COST_DEFAULT_INTRA_GBPS       512.0 /**< one device-to-device link, one direction */
#define COST_DEFAULT_INTRA_LATENCY_US 2.0   /**< one in-server collective step */
#define COST_DEFAULT_BRIDGE_GBPS      504.0 /**< PCIe Gen5 x16 after 128b/130b */
#define COST_DEFAULT_P2P_READ_US      2.0   /**< non-posted P2P read round trip */
#define COST_DEFAULT_P2P_WRITE_US     1.0   /**< posted P2P write */

/** Transmission method; the value is the stable method id. */
enum cost_method {
	COST_METHOD_INTRA_SERVER = 0,           /**< "intra-server" */
	COST_METHOD_SEND_BROADCAST = 1,         /**< "send-broadcast" */
	COST_METHOD_P2P_RELAY = 2,              /**< "p2p-relay" */
	COST_METHOD_ALLGATHER_SEND_SCATTER = 3, /**< "allgather-send-scatter" */
	COST_METHOD_SWITCH_RELAY = 4,           /**< "switch-relay" */
};

/** How stage k's result is aggregated across the source server's devices. */
enum cost_aggregation {
	COST_AGG_ALLREDUCE = 0, /**< "allreduce": every source device holds the same bytes */
	COST_AGG_ALLGATHER = 1, /**< "allgather": every source device holds the same bytes */
	COST_AGG_NONE = 2,      /**< "none": each source device holds its own bytes */
};

/** Device interconnect inside a server. */
enum cost_intra {
	/** "full-mesh": a direct link of intra_gbps between every pair of devices. */
	COST_INTRA_FULL_MESH = 0,
	/**
	 * "two-groups": devices 0..N/2-1 and N/2..N-1 each form a full mesh of
	 * intra_gbps links; crossing between groups goes through one PCIe bridge
	 * of bridge_gbps that all crossing transfers share. N must be even.
	 */
	COST_INTRA_TWO_GROUPS = 1,
};

/** Selection policy. */
enum cost_policy {
	COST_POLICY_MIN_COST = 0, /**< "min-cost" (default): cheapest eligible method */
	COST_POLICY_PATENT = 1,   /**< "patent": decision flow S1801-S1807 exactly */
};

/** Where a step runs. */
enum cost_scope {
	COST_SCOPE_SOURCE = 0, /**< "source": inside the source server */
	COST_SCOPE_INTER = 1,  /**< "inter": over the circuit between the servers */
	COST_SCOPE_TARGET = 2, /**< "target": inside the target server */
};

/** Communication operator a model compiler inserts (document 000 [0063]-[0070]). */
enum cost_op {
	COST_OP_SEND = 0,           /**< "send": point-to-point send/recv pair */
	COST_OP_BROADCAST = 1,      /**< "broadcast": one root to every other device */
	COST_OP_REDUCE = 2,         /**< "reduce": every device to one root, summed */
	COST_OP_GATHER = 3,         /**< "gather": every device's chunk to one root */
	COST_OP_SCATTER = 4,        /**< "scatter": one root's chunks, one to each device */
	COST_OP_ALLGATHER = 5,      /**< "allgather": every chunk to every device */
	COST_OP_REDUCE_SCATTER = 6, /**< "reduce-scatter": summed, chunk i to device i */
	COST_OP_P2P_RECV = 7,       /**< "p2p-recv": the root reads its peers' memory */
	COST_OP_P2P_SEND = 8,       /**< "p2p-send": the root writes into its peers' memory */
};

/**
 * Cluster constants ([0173]: fixed per cluster, read from the configuration's
 * [cost] section; a request may override any). Valid ranges: bandwidths in
 * [1e-6, 1e9] Gb/s, delays in [0, 1e9] us, all finite.
 */
struct cost_params {
	double inter_gbps;       /**< circuit bandwidth between servers, one direction, Gb/s */
	double inter_latency_us; /**< fixed cost of one send over the circuit, us */
	double intra_gbps;       /**< one device-to-device link inside a server, one direction */
	double intra_latency_us; /**< fixed cost of one in-server hop or collective step, us */
	double bridge_gbps;      /**< the in-server PCIe bridge/switch of a two-groups server */
	double p2p_read_us;      /**< delay for a device to read a peer's memory (method 2) */
	double p2p_write_us;     /**< delay for a device to write a peer's memory (method 2) */
};

/** One server of the pair. */
struct cost_server {
	unsigned devices;        /**< devices N running the stage, 1..COST_MAX_DEVICES */
	bool p2p;                /**< its devices can read/write each other's memory ([0154]) */
	enum cost_intra intra;   /**< how its devices are interconnected */
	unsigned circuit_device; /**< index < devices of the device on the circuit */
};

/** One stage pair to price. */
struct cost_request {
	enum cost_aggregation aggregation; /**< identical data per device or not */
	/**
	 * D: bytes each source device holds for its counterpart, finite, in
	 * [0, COST_MAX_BYTES]. With allreduce/allgather all devices hold the same
	 * D; with none the source server holds devices * D distinct bytes.
	 */
	double bytes;
	struct cost_server source; /**< server running stage k */
	struct cost_server target; /**< server running stage k+1; ignored if same_server */
	bool same_server;          /**< both stages on `source`: only intra-server applies */
	enum cost_policy policy;   /**< how to choose among the candidates */
	struct cost_params params; /**< bandwidths and delays */
};

/** One step of a method: alpha + bytes / bandwidth of the path it uses. */
struct cost_step {
	enum cost_scope scope; /**< where it runs */
	enum cost_op op;       /**< the operator it is */
	double bytes;          /**< distinct payload bytes the step moves */
	double us;             /**< its predicted time, us */
};

/** One method as priced for a request. */
struct cost_candidate {
	enum cost_method method; /**< which method (== its index in the candidates array) */
	/**
	 * false when the method cannot be priced for the request at all:
	 * intra-server for two servers, methods 1-4 for one server. Then
	 * predicted_us is 0 and n_steps is 0.
	 */
	bool costed;
	bool eligible;       /**< the policies may choose it */
	const char *reason;  /**< why it is eligible or not; static, never NULL */
	double predicted_us; /**< sum of the steps' us; priced even when not eligible */
	unsigned n_steps;    /**< steps used, 0..COST_MAX_STEPS (no step for no peer) */
	struct cost_step steps[COST_MAX_STEPS]; /**< in execution order */
};

/** A (operator, scope) pair, the unit a model compiler inserts. */
struct cost_operator {
	enum cost_op op;       /**< the operator */
	enum cost_scope scope; /**< where it runs */
};

/** The result of cost_select(): plain data, no pointers to free. */
struct cost_selection {
	enum cost_method method; /**< the chosen method */
	enum cost_policy policy; /**< the policy that chose it (from the request) */
	double predicted_us;     /**< the chosen candidate's predicted_us */
	/**
	 * Which branch decided, e.g. "S1805->S1806: method 3 costs more than
	 * method 4" or "cheapest eligible method"; static, never NULL.
	 */
	const char *rule;
	unsigned n_operators; /**< operators in each list, == chosen n_steps */
	/** Forward operators of the chosen method, in execution order. */
	struct cost_operator operators[COST_MAX_STEPS];
	/**
	 * Backward-pass operators: operators[] in reverse order, each replaced by
	 * cost_op_adjoint(); they run from the target towards the source.
	 */
	struct cost_operator reverse_operators[COST_MAX_STEPS];
	/** Every method, indexed by method id, eligible or not. */
	struct cost_candidate candidates[COST_METHOD_COUNT];
};

/* ---- parameters ----------------------------------------------------------- */

/** The default parameters (the COST_DEFAULT_* values). */
struct cost_params cost_params_default(void);

/**
 * Checks every field against its range. Returns 0, or -EINVAL with *bad_field
 * (when bad_field is not NULL) set to the first bad field's bare name, e.g.
 * "inter_gbps".
 */
int cost_params_validate(const struct cost_params *p, const char **bad_field);

/** Name of field i (0 <= i < COST_PARAM_COUNT) in declaration order, else NULL. */
const char *cost_params_name(unsigned i);

/** Sets the field called name to value (unchecked). 0, or -EINVAL for an unknown name. */
int cost_params_set(struct cost_params *p, const char *name, double value);

/** Reads the field called name into *value. 0, or -EINVAL for an unknown name. */
int cost_params_get(const struct cost_params *p, const char *name, double *value);

/* ---- selection ------------------------------------------------------------ */

/**
 * Checks a request. Returns 0, or -EINVAL with *bad_field (when bad_field is
 * not NULL) set to the first bad field's path: "aggregation", "bytes",
 * "policy", "source.devices", "source.intra", "source.circuit_device", the
 * same under "target." (only when !same_server), or "params.<name>".
 * A two-groups server with an odd device count is reported as "<side>.devices".
 */
int cost_request_validate(const struct cost_request *req, const char **bad_field);

/**
 * Prices every method for req and selects one under req->policy. Returns 0 and
 * fills *out (array entries past n_operators and past each candidate's n_steps
 * are left as they were), or -EINVAL as cost_request_validate() (then *out is
 * not touched). Never allocates; about a hundred floating-point operations.
 */
int cost_select(const struct cost_request *req, struct cost_selection *out, const char **bad_field);

/**
 * The operator that undoes op's data movement in the backward pass:
 * send<->send (the other way), broadcast<->reduce, scatter<->gather,
 * allgather<->reduce-scatter, p2p-recv<->p2p-send. An involution.
 * An out-of-range op is returned unchanged.
 */
enum cost_op cost_op_adjoint(enum cost_op op);

/* ---- names ---------------------------------------------------------------- */

/** Stable name of m ("send-broadcast", ...), or NULL when out of range. */
const char *cost_method_name(enum cost_method m);
/** Parses a method name into *out. 0, or -EINVAL when unknown (NULL name included). */
int cost_parse_method(const char *name, enum cost_method *out);

/** "min-cost" or "patent", or NULL when out of range. */
const char *cost_policy_name(enum cost_policy p);
/** Parses a policy name into *out. 0, or -EINVAL when unknown. */
int cost_parse_policy(const char *name, enum cost_policy *out);

/** "allreduce", "allgather" or "none", or NULL when out of range. */
const char *cost_aggregation_name(enum cost_aggregation a);
/** Parses an aggregation name into *out. 0, or -EINVAL when unknown. */
int cost_parse_aggregation(const char *name, enum cost_aggregation *out);

/** "full-mesh" or "two-groups", or NULL when out of range. */
const char *cost_intra_name(enum cost_intra i);
/** Parses an interconnect name into *out. 0, or -EINVAL when unknown. */
int cost_parse_intra(const char *name, enum cost_intra *out);

/** "source", "inter" or "target", or NULL when out of range. */
const char *cost_scope_name(enum cost_scope s);

/** Operator name ("allgather", "p2p-recv", ...), or NULL when out of range. */
const char *cost_op_name(enum cost_op op);

/** "op@scope", e.g. "allgather@source", or NULL when either is out of range. */
const char *cost_operator_name(enum cost_op op, enum cost_scope scope);

#endif
