/*
 * What every ofcctl command shares: the exit codes, the parsed command line,
 * and the helpers that send a request and report a refusal the same way
 * everywhere (call.c). The commands themselves are in cmd_*.c; main.c holds
 * the table that names them. Single-threaded.
 */
#ifndef OFCCTL_CMD_H
#define OFCCTL_CMD_H

#include "client.h"

/** The exit codes ofcctl promises to scripts (docs: ofcctl(1)). */
enum cmd_exit {
	CMD_OK = 0,          /**< done */
	CMD_REFUSED = 1,     /**< the daemon refused the request (4xx) */
	CMD_USAGE = 2,       /**< bad command line, configuration or token file */
	CMD_WAIT = 3,        /**< --wait ended before the state asked for */
	CMD_UNREACHABLE = 4, /**< no answer from the daemon, or a 5xx */
};

/** -o: tables for people or the daemon's JSON for scripts. */
enum out_format {
	OUT_TABLE,
	OUT_JSON,
};

/** The options a command may take; each command of the table lists its own. */
enum cmd_opt {
	OPT_WAIT = 1u << 0,    /**< --wait SECONDS */
	OPT_SERVERS = 1u << 1, /**< --servers N */
	OPT_DEVICES = 1u << 2, /**< --devices D */
	OPT_PORTS = 1u << 3,   /**< --ports-per-device P */
	OPT_FORMULA = 1u << 4, /**< --formula auto|1|3 */
	OPT_FABRIC = 1u << 5,  /**< --fabric NAME */
	OPT_OCS = 1u << 6,     /**< --ocs NAME */
	OPT_LIMIT = 1u << 7,   /**< --limit N */
};

/** The command line of one command, parsed. */
struct cmd_args {
	unsigned given;      /**< the OPT_* bits present */
	const char *wait;    /**< --wait, as given (checked by cmd_wait_param) */
	long servers;        /**< --servers */
	long devices;        /**< --devices */
	long ports;          /**< --ports-per-device */
	const char *formula; /**< --formula */
	const char *fabric;  /**< --fabric */
	const char *ocs;     /**< --ocs */
	long limit;          /**< --limit */
	int argc;            /**< positional words after the command's own name */
	char **argv;         /**< those words (argv of main) */
};

/** What a command runs with. */
struct cmd_ctx {
	struct client *client;  /**< connected to the daemon */
	enum out_format format; /**< -o */
	struct cmd_args args;   /**< its command line */
};

/** A command's entry point: returns an enum cmd_exit value. */
typedef int (*cmd_fn)(struct cmd_ctx *c);

/**
 * Sends one request (body is JSON text or NULL). wait_s is the longest the
 * daemon may hold the reply (added to the usual time limit). On a 2xx reply
 * returns CMD_OK with it in r. Otherwise prints "ofcctl: STATUS CODE:
 * MESSAGE" on stderr (with -o json the daemon's body also goes to stdout)
 * and returns CMD_REFUSED for a 4xx, CMD_UNREACHABLE for anything else. The
 * caller frees r in every case.
 */
int cmd_call(struct cmd_ctx *c, const char *method, const char *path, const char *body,
             double wait_s, struct client_reply *r);

/**
 * Turns the outcome of a client call (its return rc, err when rc is not 0,
 * the reply r) into an exit code, reporting failures as cmd_call does.
 */
int cmd_report(struct cmd_ctx *c, int rc, const char *err, const struct client_reply *r);

/** Prints a reply for people; returns an enum cmd_exit value. */
typedef int (*cmd_show_fn)(const json_t *reply);

/**
 * The read commands' whole job: GET path, then print the body unchanged
 * (-o json) or through show (tables). Returns an enum cmd_exit value.
 */
int cmd_get_show(struct cmd_ctx *c, const char *path, cmd_show_fn show);

/** Prints the reply body unchanged to stdout (-o json), with a final newline if it lacks one. */
void cmd_print_body(const struct client_reply *r);

/**
 * Prints a table to stdout: one row per element of list (a JSON array of
 * objects), one column per key, under head (ncols each). Returns CMD_OK, or
 * CMD_UNREACHABLE when the output could not be built.
 */
int cmd_print_rows(const json_t *list, const char *const *head, const char *const *keys,
                   size_t ncols);

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
 * Checks --wait (0 to 60 seconds, decimals allowed: the daemon's range) and
 * writes "?wait=S" into buf, or "" when --wait was not given. CMD_OK or
 * CMD_USAGE after a message; *seconds gets the value (0 when absent).
 */
int cmd_wait_param(struct cmd_ctx *c, char *buf, size_t len, double *seconds);

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

/* cmd_daemon.c */
int cmd_operations(struct cmd_ctx *c);
int cmd_events(struct cmd_ctx *c);
int cmd_health(struct cmd_ctx *c);

#endif
