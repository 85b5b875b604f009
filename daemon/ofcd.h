/*
 * The daemon's composition root: the one module that knows every other. It
 * builds the store, the desired-state mirror, the event bus, the reconciler
 * and the HTTP server, wires the API's commit hook to the reconciler, and
 * owns the loop, the timers and the signals. Created by main.c (and by tests), run until
 * SIGTERM/SIGINT, then drained and torn down. Loop thread only.
 */
#ifndef OFCD_OFCD_H
#define OFCD_OFCD_H

#include <stdbool.h>
#include <time.h>

#include "api/api.h"
#include "base/config.h"
#include "domain/units.h"
#include "version.h"

struct event_base;
struct event;
struct store;
struct desired;
struct http_server;
struct reconciler;
struct events;
struct ha;

/** The daemon's state. One per process. */
struct ofcd {
	struct event_base *base;       /**< the one loop */
	struct ofcd_config cfg;        /**< configuration in force (owned) */
	const char *config_path;       /**< file to re-read on SIGHUP; NULL for built-in defaults */
	struct store *store;           /**< desired state (owned) */
	struct desired *desired;       /**< the store's circuits in memory (owned) */
	struct http_server *http;      /**< REST server (owned) */
	struct http_server *probes;    /**< [http] admin_listen's server, or NULL (owned) */
	struct reconciler *reconciler; /**< keeps OCS units equal to the plans (owned) */
	struct domain_units units;     /**< the reconciler's answers to the domain (env.units) */
	struct events *events;         /**< the event bus (owned) */
	struct worker *compute;        /**< long replies' worker, api_offload() (owned) */
	struct ha *ha;                 /**< this member's part in a cluster; NULL: single node */
	struct api_cluster cluster;    /**< the API's way to the cluster's log (env.cluster) */
	struct api_env env; /**< what request handlers see (borrowed pointers to the above) */
	bool draining;      /**< SIGTERM seen: finishing in-flight requests */
	bool resigning;     /**< drained: handing the cluster's leadership over */

	struct event *ev_sigterm;       /**< SIGTERM handler */
	struct event *ev_sigint;        /**< SIGINT handler */
	struct event *ev_sighup;        /**< SIGHUP handler */
	struct event *ev_watchdog;      /**< systemd watchdog keep-alive timer */
	struct event *ev_drain;         /**< checks whether draining is over */
	struct timespec drain_deadline; /**< when draining gives up waiting */
	time_t
	    tls_mtime; /**< newest change of the TLS files at start, to tell a reload they moved */
};

/**
 * Sets the daemon up from cfg (moved into d: the caller must not free it):
 * opens the store (loading the demo topology into an empty one when demo is
 * set), binds the listener, registers signals. Returns 0 or -errno (logged).
 * On failure call ofcd_destroy() all the same.
 */
int ofcd_init(struct ofcd *d, struct ofcd_config *cfg, const char *config_path, bool demo);

/** Runs the loop until the daemon has drained after SIGTERM/SIGINT. Returns 0. */
int ofcd_run(struct ofcd *d);

/** Starts the graceful stop: no new connections, in-flight requests finish. */
void ofcd_stop(struct ofcd *d);

/**
 * Re-reads the configuration file and applies the keys config_table marks
 * live; warns about the others that changed (they wait for a restart). A bad
 * file, or one that would drop authentication on a non-loopback socket, keeps
 * the running configuration.
 */
void ofcd_reload(struct ofcd *d);

/** Releases everything (store closed cleanly). Safe on a partly initialised d. */
void ofcd_destroy(struct ofcd *d);

#endif
