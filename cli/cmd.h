/*
 * What every ofcctl command shares: the exit codes, the parsed command line,
 * and the helpers that send a request and report a refusal the same way
 * everywhere (call.c). The commands themselves are in cmd_*.c; main.c holds
 * the table that names them. Single-threaded.
 */
#ifndef OFCCTL_CMD_H
#define OFCCTL_CMD_H

#include <stdbool.h>
#include <stdint.h>

#include <signal.h>

#include "client.h"
#include "settings.h"

/** The exit codes ofcctl promises to scripts (docs: ofcctl(1)). */
enum cmd_exit {
	CMD_OK = 0,          /**< done */
	CMD_REFUSED = 1,     /**< the daemon refused the request (4xx) */
	CMD_USAGE = 2,       /**< bad command line, configuration or token file */
	CMD_WAIT = 3,        /**< --wait ended before the state asked for */
	CMD_UNREACHABLE = 4, /**< no answer from the daemon, or a 5xx */
};

/** Time for the daemon to answer, on top of any ?wait= it was asked to hold the reply. */
#define CMD_REPLY_TIMEOUT_MS 30000L

/** -o: tables for people, or the daemon's JSON (or the same as YAML) for scripts. */
enum out_format {
	OUT_TABLE, /**< tables and "key: value" blocks (the default) */
	OUT_WIDE,  /**< the tables with every column the reply has */
	OUT_JSON,  /**< the daemon's JSON as it came */
	OUT_YAML,  /**< the same document as YAML (yaml.h) */
};

/**
 * The options a command may take, one bit each of a uint64_t (more of them
 * than an enum, an int, holds); each command of the table lists its own.
 */
#define CMD_OPT(n)           (UINT64_C(1) << (n))
#define OPT_WAIT             CMD_OPT(0)  /**< --wait SECONDS */
#define OPT_SERVERS          CMD_OPT(1)  /**< --servers N */
#define OPT_DEVICES          CMD_OPT(2)  /**< --devices D */
#define OPT_PORTS_PER_DEVICE CMD_OPT(3)  /**< --ports-per-device P */
#define OPT_FORMULA          CMD_OPT(4)  /**< --formula auto|1|3 */
#define OPT_FABRIC           CMD_OPT(5)  /**< --fabric NAME */
#define OPT_OCS              CMD_OPT(6)  /**< --ocs NAME */
#define OPT_LIMIT            CMD_OPT(7)  /**< --limit N */
#define OPT_WATCH            CMD_OPT(8)  /**< --watch, -w */
#define OPT_FILE             CMD_OPT(9)  /**< --file, -f FILE|- */
#define OPT_FORCE            CMD_OPT(10) /**< --force */
#define OPT_IGNORE_NOT_FOUND CMD_OPT(11) /**< --ignore-not-found */
#define OPT_IF_MATCH         CMD_OPT(12) /**< --if-match REV */
#define OPT_SINCE            CMD_OPT(13) /**< --since ID|TIME */
#define OPT_PORTS            CMD_OPT(14) /**< --ports N (an OCS unit's) */
#define OPT_DRIVER           CMD_OPT(15) /**< --driver NAME */
#define OPT_ENDPOINT         CMD_OPT(16) /**< --endpoint ADDRESS */
#define OPT_P2P              CMD_OPT(17) /**< --p2p */
#define OPT_INTRA            CMD_OPT(18) /**< --intra full-mesh|two-groups */
#define OPT_OFFLOAD          CMD_OPT(19) /**< --offload */
#define OPT_SWITCH           CMD_OPT(20) /**< --switch NAME */
#define OPT_AGGREGATING      CMD_OPT(21) /**< --aggregating */
#define OPT_BUFFER           CMD_OPT(22) /**< --buffer B */
#define OPT_WINDOW           CMD_OPT(23) /**< --window W */
#define OPT_TOPOLOGY         CMD_OPT(24) /**< --topology auto|full-mesh|hyperx|torus */
#define OPT_SHAPE            CMD_OPT(25) /**< --shape AxB... */
#define OPT_TRAFFIC          CMD_OPT(26) /**< --traffic allreduce|alltoall|mixed */
#define OPT_ACTIVATE         CMD_OPT(27) /**< --activate */
#define OPT_COLLECTIVE       CMD_OPT(28) /**< --collective C */
#define OPT_ALGORITHM        CMD_OPT(29) /**< --algorithm A */
#define OPT_IN_PLACE         CMD_OPT(30) /**< --in-place */
#define OPT_FIT              CMD_OPT(31) /**< --fit TERM,TERM... */
#define OPT_RELAY            CMD_OPT(32) /**< --relay MODE */
#define OPT_NOTE             CMD_OPT(33) /**< --note TEXT */
#define OPT_COLLECTED        CMD_OPT(34) /**< --collected */
#define OPT_SYNC             CMD_OPT(35) /**< --sync MODE */
#define OPT_JOINED           CMD_OPT(36) /**< --joined */
#define OPT_CONSISTENT       CMD_OPT(37) /**< --consistent */

/** What nccl-tests output does not say of its runs: cost calibrate's options for such a file. */
#define OPT_NCCL_TESTS (OPT_COLLECTIVE | OPT_ALGORITHM | OPT_SERVERS | OPT_DEVICES | OPT_IN_PLACE)

/** Room for an If-Match value: a tag the daemon gives is far shorter. */
#define CMD_TAG_LEN 130

/** The command line of one command, parsed; the strings point into argv of main. */
struct cmd_args {
	uint64_t given;             /**< the OPT_* bits present */
	const char *wait;           /**< --wait, as given (checked by cmd_wait_param) */
	long servers;               /**< --servers */
	long devices;               /**< --devices */
	long ports_per_device;      /**< --ports-per-device */
	const char *formula;        /**< --formula */
	const char *fabric;         /**< --fabric */
	const char *ocs;            /**< --ocs */
	long limit;                 /**< --limit */
	const char *file;           /**< --file */
	char if_match[CMD_TAG_LEN]; /**< --if-match as an entity tag: 3 becomes "3" */
	const char *since;          /**< --since */
	long ports;                 /**< --ports */
	const char *driver;         /**< --driver */
	const char *endpoint;       /**< --endpoint */
	const char *intra;          /**< --intra */
	const char *sw;             /**< --switch */
	long buffer;                /**< --buffer */
	long window;                /**< --window */
	const char *topology;       /**< --topology */
	const char *shape;          /**< --shape, as given ("32x32") */
	const char *traffic;        /**< --traffic */
	const char *collective;     /**< --collective */
	const char *algorithm;      /**< --algorithm */
	const char *fit;            /**< --fit, as given ("alpha_us,link_efficiency") */
	const char *relay;          /**< --relay */
	const char *sync;           /**< --sync */
	const char *note;           /**< --note */
	int argc;                   /**< positional words after the command's own name */
	char **argv;                /**< those words (argv of main) */
};

/** What a command runs with. */
struct cmd_ctx {
	struct client *client;  /**< connected to the daemon (NULL for a command that needs none) */
	enum out_format format; /**< -o */
	struct cmd_args args;   /**< its command line */
	/**
	 * A refusal's message is prefixed by the error's field when it does not
	 * name it (set by the cost commands: the daemon's calibration messages
	 * often leave the field, runs[3].algorithm, to the error body).
	 */
	bool name_field;
};

/** What cmd_parse_options found besides options and exit codes. */
enum {
	CMD_OPTIONS_HELP = -1, /**< --help: the caller prints the usage */
	CMD_OPTIONS_DONE = -2, /**< --version, answered: nothing more to do */
};

/**
 * Parses the options of argv (getopt_long, so they may come before, between
 * and after the command's words) into ctx->format, ctx->args and flags, and
 * moves the other words to the end of argv, from *first on. Returns CMD_OK,
 * CMD_USAGE after a message naming the bad option or value, or one of
 * CMD_OPTIONS_HELP and CMD_OPTIONS_DONE (options.c).
 */
int cmd_parse_options(int argc, char **argv, struct cmd_ctx *ctx, struct settings_flags *flags,
                      int *first);

/** The long name ("--wait") of one OPT_* bit, for messages. */
const char *cmd_option_name(uint64_t bit);

/** A command's entry point: returns an enum cmd_exit value. */
typedef int (*cmd_fn)(struct cmd_ctx *c);

/**
 * Sends q (with no time limit given and no fn, the usual one) and reports
 * the outcome as cmd_report does. Returns CMD_OK on a 2xx reply, with it in
 * r; the caller frees r in every case.
 */
int cmd_send(struct cmd_ctx *c, struct client_req *q, struct client_reply *r);

/**
 * Sends one request (body is JSON text or NULL), with --if-match when the
 * command was given it and the method is not GET. wait_s is the longest the
 * daemon may hold the reply (added to the usual time limit). On a 2xx reply
 * returns CMD_OK with it in r. Otherwise reports as cmd_report does. The
 * caller frees r in every case.
 */
int cmd_call(struct cmd_ctx *c, const char *method, const char *path, const char *body,
             double wait_s, struct client_reply *r);

/**
 * Turns the outcome of a client call (its return rc, err when rc is not 0,
 * the reply r) into an exit code. A failure is reported as "ofcctl: STATUS
 * CODE: MESSAGE" on stderr (with -o json or yaml the daemon's body also goes
 * to stdout, in that form; with c->name_field, "STATUS CODE: FIELD: MESSAGE"
 * when the message does not name the field), CMD_REFUSED for a 4xx, CMD_UNREACHABLE for
 * anything else; but with --ignore-not-found a 404 not_found is CMD_OK,
 * silently (r->status tells it).
 */
int cmd_report(struct cmd_ctx *c, int rc, const char *err, const struct client_reply *r);

/** Prints a reply for people; returns an enum cmd_exit value. */
typedef int (*cmd_show_fn)(const json_t *reply);

/**
 * Prints a reply in the form -o asks: the body unchanged (json), as YAML,
 * through wide (-o wide; NULL: through table) or table. Returns an enum
 * cmd_exit value.
 */
int cmd_print(struct cmd_ctx *c, const struct client_reply *r, cmd_show_fn table, cmd_show_fn wide);

/**
 * For a document ofcctl builds itself: prints v as one line of compact JSON
 * (-o json) or as YAML and returns true; returns false in the table forms,
 * which the caller prints.
 */
bool cmd_print_doc(struct cmd_ctx *c, const json_t *v);

/**
 * The read commands' whole job: GET path, then print the reply as cmd_print
 * does. Returns an enum cmd_exit value.
 */
int cmd_get_show(struct cmd_ctx *c, const char *path, cmd_show_fn table, cmd_show_fn wide);

/** Prints the reply body unchanged to stdout (-o json), with a final newline if it lacks one. */
void cmd_print_body(const struct client_reply *r);

/**
 * Prints a table to stdout: one row per element of list (a JSON array of
 * objects), one column per key, under head (ncols each). Returns CMD_OK, or
 * CMD_UNREACHABLE when the output could not be built.
 */
int cmd_print_rows(const json_t *list, const char *const *head, const char *const *keys,
                   size_t ncols);

/**
 * Makes SIGINT and SIGTERM set the flag returned instead of ending ofcctl
 * (without SA_RESTART, so a wait is cut short): the commands that follow a
 * stream (events, --watch) pass it as client_req.stop and end with exit 0.
 * Static storage; main thread.
 */
const volatile sig_atomic_t *cmd_stop_on_signals(void);

/** Prints "ofcctl: MESSAGE" on stderr and returns CMD_USAGE (main then prints the usage line). */
int cmd_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** Prints "ofcctl: MESSAGE" on stderr and returns code. */
int cmd_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/**
 * before + name escaped for a URL path segment + after (e.g. "/v1/fabrics/",
 * name, "?wait=5"), malloc'd; NULL after a message when out of memory.
 */
char *cmd_path(struct cmd_ctx *c, const char *before, const char *name, const char *after);

/**
 * Appends "?name=value" (or "&name=value" after the first), value escaped,
 * to the malloc'd path *p, replacing it. 0, or -ENOMEM with *p freed and NULL.
 */
int cmd_add_query(struct cmd_ctx *c, char **p, const char *name, const char *value);

/**
 * Checks --wait (0 to 60 seconds, decimals allowed: the daemon's range) and
 * writes "?wait=S" into buf, or "" when --wait was not given. CMD_OK or
 * CMD_USAGE after a message; *seconds gets the value (0 when absent).
 */
int cmd_wait_param(struct cmd_ctx *c, char *buf, size_t len, double *seconds);

/**
 * Reads a whole file, or standard input for "-" (malloc'd, NUL-terminated;
 * the caller frees it); NULL with the reason in err.
 */
char *cmd_read_file(const char *path, char *err, size_t errlen);

/**
 * Reads a JSON object or array from a file or "-" into *out (the caller
 * decrefs it). CMD_OK, or CMD_USAGE after a message naming the file and, for
 * bad JSON, the line and column.
 */
int cmd_read_json(const char *path, json_t **out);

/** What a --watch follows: the answer to re-read and the events that call for it. */
struct watch_spec {
	const char *path;         /**< the GET that gives the answer printed */
	const char *fabric;       /**< the stream's ?fabric=, or NULL for every event */
	const char *const *kinds; /**< event types that call for a re-read, NULL-terminated */
	const char *resource;     /**< what is watched: "fabric", "ocs" or "server" */
	const char *name;         /**< the one object watched, or NULL for a list */
	cmd_show_fn table;        /**< prints it for -o table */
	cmd_show_fn wide;         /**< prints it for -o wide (NULL: table) */
	/**
	 * For the table forms, NULL or: adds to the answer, before it is printed,
	 * what a second read over cl carries (a failed read leaves it as it is).
	 */
	void (*complete)(struct client *cl, json_t *answer);
};

/**
 * --watch: prints the answer of w->path, then follows GET /v1/events and
 * prints it again whenever an event concerns it and it changed; a dropped
 * stream is resumed with Last-Event-ID, and after a reset (events lost) the
 * answer is read again. Returns CMD_OK on SIGINT or SIGTERM or once the
 * watched object is deleted, or the exit code of a refusal (watch.c).
 */
int cmd_watch(struct cmd_ctx *c, const struct watch_spec *w);

/* The commands, one per table entry in main.c (cmd_fabric.c). */
int cmd_fabric_create(struct cmd_ctx *c);
int cmd_fabric_delete(struct cmd_ctx *c);
int cmd_fabric_list(struct cmd_ctx *c);
int cmd_fabric_get(struct cmd_ctx *c);
int cmd_plan(struct cmd_ctx *c);

/* cmd_topology.c */
int cmd_topology_get(struct cmd_ctx *c);
int cmd_topology_put(struct cmd_ctx *c);
int cmd_ocs_list(struct cmd_ctx *c);
int cmd_ocs_get(struct cmd_ctx *c);
int cmd_ocs_cross_connects(struct cmd_ctx *c);

/* cmd_server.c */
int cmd_server_list(struct cmd_ctx *c);
int cmd_server_get(struct cmd_ctx *c);
int cmd_device_fail(struct cmd_ctx *c);
int cmd_device_ok(struct cmd_ctx *c);

/* cmd_topology.c */
int cmd_wiring_get(struct cmd_ctx *c);
int cmd_wiring_put(struct cmd_ctx *c);

/* cmd_daemon.c */
int cmd_operations(struct cmd_ctx *c);
int cmd_events(struct cmd_ctx *c);
int cmd_health(struct cmd_ctx *c);

/* cmd_cluster.c */
int cmd_version(struct cmd_ctx *c);
int cmd_cluster_status(struct cmd_ctx *c);
int cmd_cluster_members(struct cmd_ctx *c);
int cmd_cluster_snapshot_save(struct cmd_ctx *c);
int cmd_audit(struct cmd_ctx *c);
int cmd_completion(struct cmd_ctx *c);

/* cmd_resource.c */
int cmd_apply(struct cmd_ctx *c);
int cmd_ocs_create(struct cmd_ctx *c);
int cmd_ocs_delete(struct cmd_ctx *c);
int cmd_server_create(struct cmd_ctx *c);
int cmd_server_delete(struct cmd_ctx *c);
int cmd_switch_list(struct cmd_ctx *c);
int cmd_switch_get(struct cmd_ctx *c);
int cmd_switch_create(struct cmd_ctx *c);
int cmd_switch_delete(struct cmd_ctx *c);

/* cmd_cost.c */
int cmd_cost_calibrate(struct cmd_ctx *c);
int cmd_cost_params(struct cmd_ctx *c);
int cmd_cost_activate(struct cmd_ctx *c);
int cmd_cost_delete(struct cmd_ctx *c);
int cmd_cost_runs(struct cmd_ctx *c);
int cmd_cost_runs_delete(struct cmd_ctx *c);

#endif
