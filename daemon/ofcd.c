#include "ofcd.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

#include "domain/demo.h"
#include "domain/fabric.h"
#include "domain/topo_apply.h"
#include "state/desired.h"
#include "base/events.h"
#include "cluster/ha.h"
#include "net/http.h"
#include "log.h"
#include "base/metrics.h"
#include "base/worker.h"
#include "reconcile/reconcile.h"
#include "state/store.h"

#define DRAIN_TIMEOUT_S 10

static void on_resigned(void *arg)
{
	struct ofcd *d = arg;
	event_base_loopbreak(d->base);
}

static void on_drain_check(evutil_socket_t fd, short what, void *arg)
{
	struct ofcd *d = arg;
	struct timespec now;
	struct metrics_loop l = metrics_loop_enter("daemon");
	(void)fd;
	(void)what;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (http_inflight(d->http) == 0 && d->ha) {
		/* Hand the leadership over now rather than after the lease lapses. */
		if (!d->resigning)
			ha_resign(d->ha, on_resigned, d);
		d->resigning = true;
	} else if (http_inflight(d->http) == 0) {
		event_base_loopbreak(d->base);
	} else if (now.tv_sec >= d->drain_deadline.tv_sec) {
		log_warn("daemon", "%zu requests still in flight after %d s; stopping anyway",
		         http_inflight(d->http), DRAIN_TIMEOUT_S);
		event_base_loopbreak(d->base);
	}
	metrics_loop_leave(l);
}

void ofcd_stop(struct ofcd *d)
{
	if (d->draining)
		return;
	d->draining = true;
	d->env.draining = true;
	log_info("daemon", "stopping: finishing %zu in-flight requests", http_inflight(d->http));
	sd_notify(0, "STOPPING=1");
	http_quiesce(d->http);
	http_abort_suspended(d->http, false);
	http_end_streams(d->http);
	clock_gettime(CLOCK_MONOTONIC, &d->drain_deadline);
	d->drain_deadline.tv_sec += DRAIN_TIMEOUT_S;
	struct timeval tick = { 0, 20000 };
	event_add(d->ev_drain, &tick);
}

/* When the TLS files were last changed, or 0 (unreadable, or no TLS). */
static time_t tls_mtime(const struct ofcd *d)
{
	struct stat a, b;
	if (!d->cfg.tls_cert[0] || stat(d->cfg.tls_cert, &a) < 0 || stat(d->cfg.tls_key, &b) < 0)
		return 0;
	return a.st_mtime > b.st_mtime ? a.st_mtime : b.st_mtime;
}

/*
 * The certificate and key are read once, at start (libmicrohttpd cannot take
 * new ones while it runs): a renewed pair on disk needs a restart, which a
 * reload says rather than leaving an operator to think it took.
 */
static void tls_check_files(struct ofcd *d)
{
	time_t now = tls_mtime(d);
	if (d->cfg.tls_cert[0] && now != d->tls_mtime)
		log_warn("daemon",
		         "SIGHUP: %s or %s changed since the start; the daemon serves the "
		         "certificate it read then: restart it to serve the new one",
		         d->cfg.tls_cert, d->cfg.tls_key);
}

void ofcd_reload(struct ofcd *d)
{
	struct ofcd_config next;
	char err[768];

	if (!d->config_path) {
		log_info("daemon", "SIGHUP: running on built-in defaults, nothing to reload");
		return;
	}
	if (config_load(d->config_path, &next, err, sizeof(err)) < 0) {
		log_error("daemon", "SIGHUP: keeping the running configuration: %s", err);
		config_free(&next);
		return;
	}
	config_warn_exposed(d->config_path, &next);
	/* The new file is judged against the socket that stays open until a restart. */
	if (!config_auth_safe(&next, d->cfg.listen_host, d->cfg.tls_cert[0] != '\0', err,
	                      sizeof(err))) {
		log_error("daemon", "SIGHUP: keeping the running configuration: %s", err);
		config_free(&next);
		return;
	}
	tls_check_files(d);
	char fixed[256];
	if (cfgtab_changed_fixed(&config_table, &d->cfg, &next, fixed, sizeof(fixed)))
		log_warn("daemon", "SIGHUP: not applied until a restart: %s", fixed);
	/* The table's live keys; next keeps what they replace and frees it below. */
	unsigned audit_interval_s = d->cfg.audit_interval_s;
	cfgtab_swap_live(&config_table, &d->cfg, &next);
	/* Two live values are held outside the configuration too. */
	log_set_level(d->cfg.log_level);
	if (d->cfg.audit_interval_s != audit_interval_s)
		reconcile_set_audit_interval(d->reconciler, d->cfg.audit_interval_s);
	config_free(&next);
	log_info("daemon", "SIGHUP: configuration reloaded from %s (log level %s, %zu tokens)",
	         d->config_path, log_level_name(d->cfg.log_level), d->cfg.tokens.n);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct ofcd *d = arg;
	struct metrics_loop l = metrics_loop_enter("daemon");
	(void)what;
	if (sig == SIGHUP) {
		sd_notify(0, "RELOADING=1");
		ofcd_reload(d);
		sd_notify(0, "READY=1");
	} else {
		ofcd_stop(d);
	}
	metrics_loop_leave(l);
}

static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	sd_notify(0, "WATCHDOG=1");
}

/* Descriptors beside the connections: store, epoll, signals, OCS units, logs. */
#define OFCD_SPARE_FDS 64

/*
 * Every connection is a file descriptor: a limit under [http] max_connections
 * would make the daemon refuse clients it was told to take (and fail to open
 * its own files under load). Raise the soft limit as far as the hard one
 * allows; say so when even that is too low.
 */
static void fd_limit_check(const struct ofcd_config *cfg)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)cfg->max_connections + OFCD_SPARE_FDS;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= need)
		return;
	rlim_t was = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
	if (rl.rlim_cur > was && setrlimit(RLIMIT_NOFILE, &rl) == 0)
		log_info("daemon",
		         "file descriptor limit raised from %llu to %llu for [http] "
		         "max_connections = %u",
		         (unsigned long long)was, (unsigned long long)rl.rlim_cur,
		         cfg->max_connections);
	else
		rl.rlim_cur = was;
	if (rl.rlim_cur < need)
		log_warn("daemon",
		         "file descriptor limit %llu is below [http] max_connections = %u plus %d: "
		         "raise LimitNOFILE (ulimit -n) or lower max_connections",
		         (unsigned long long)rl.rlim_cur, cfg->max_connections, OFCD_SPARE_FDS);
}

/* The API's way to the cluster's log (struct api_cluster), through this member. */
static int cluster_gate(void *arg, char *leader, size_t len)
{
	struct ofcd *d = arg;
	return ha_gate(d->ha, leader, len);
}

static int cluster_append(void *arg, const void *data, size_t len, api_append_done done,
                          void *done_arg)
{
	struct ofcd *d = arg;
	return ha_append(d->ha, data, len, done, done_arg);
}

static int cluster_confirm_lead(void *arg, void (*done)(void *done_arg, int rc), void *done_arg)
{
	struct ofcd *d = arg;
	return ha_confirm(d->ha, done, done_arg);
}

static json_t *cluster_status(void *arg)
{
	struct ofcd *d = arg;
	return ha_status_json(d->ha);
}

static void replicate_states(void *arg, const void *changeset, size_t len)
{
	struct ofcd *d = arg;
	ha_replicate_states(d->ha, changeset, len);
}

static void ship_formers_gone(void *arg, int64_t ocs_id, int64_t upto, const struct plan_xc *gone,
                              size_t n)
{
	struct ofcd *d = arg;
	struct ha_port_pair *v = malloc((n ? n : 1) * sizeof(*v));
	for (size_t i = 0; v && i < n; i++)
		v[i] = (struct ha_port_pair){ gone[i].a, gone[i].b };
	if (v)
		ha_ship_formers_gone(d->ha, ocs_id, upto, v, n);
	free(v);
}

static void formers_gone(void *arg, int64_t ocs_id, int64_t upto, const struct ha_port_pair *gone,
                         size_t n)
{
	struct ofcd *d = arg;
	struct plan_xc *v = malloc((n ? n : 1) * sizeof(*v));
	for (size_t i = 0; v && i < n; i++)
		v[i] = (struct plan_xc){ gone[i].a, gone[i].b };
	if (v)
		desired_formers_gone(d->desired, ocs_id, upto, v, n);
	free(v);
}

/* The cluster's fence in time, asked before every send to a unit. */
static bool may_drive(void *arg)
{
	const struct ofcd *d = arg;
	return ha_may_drive(d->ha);
}

/*
 * Fabrics a stopped daemon was still storing a part at a time: their clients
 * were never told they exist, so they go before the reconciler acts on them.
 * A rule's cabling it was inserting a part at a time is finished.
 */
static int drop_unfinished(struct store *s)
{
	int rc = store_begin(s);
	if (rc == 0 && (rc = fabric_drop_unfinished(s)) == 0 &&
	    (rc = topo_wiring_finish(s, true)) == 0)
		rc = store_commit(s);
	if (rc < 0) {
		store_rollback(s);
		log_error("store", "cannot drop the fabrics or finish the wiring left unfinished");
	}
	return rc;
}

static const char *driver_setting(void *arg, const char *driver, const char *unit, const char *key)
{
	struct ofcd *d = arg;
	return config_driver_setting(&d->cfg, driver, unit, key);
}

static int start_reconciler(struct ofcd *d, int64_t generation)
{
	struct reconcile_deps deps = { .base = d->base,
		                       .store = d->store,
		                       .desired = d->desired,
		                       .events = d->events,
		                       .audit_interval_s = d->cfg.audit_interval_s,
		                       .master_generation = generation,
		                       .may_send = d->ha ? may_drive : NULL,
		                       .may_send_arg = d,
		                       .setting = driver_setting,
		                       .setting_arg = d };
	int rc = reconcile_init(&deps, &d->reconciler);
	if (rc == 0 && d->ha)
		rc = reconcile_states_hook_add(reconcile_states_hook(d->reconciler),
		                               replicate_states, d);
	if (rc == 0 && d->ha)
		rc = reconcile_formers_gone_hook_add(reconcile_formers_gone_hook(d->reconciler),
		                                     ship_formers_gone, d);
	if (rc < 0) {
		log_error("daemon", "cannot start the reconciler: %s", strerror(-rc));
		reconcile_free(d->reconciler);
		d->reconciler = NULL;
	}
	d->env.reconciler = d->reconciler;
	d->units =
	    d->reconciler ? reconcile_domain_units(d->reconciler) : (struct domain_units){ 0 };
	return rc;
}

/* Whether this member drives the units: what its cluster state is checked against. */
static bool driving(void *arg)
{
	const struct ofcd *d = arg;
	return d->reconciler != NULL;
}

/* Only the leader drives the units: the reconciler lives while this member leads. */
static void on_role(void *arg, enum ha_change change, int64_t generation)
{
	struct ofcd *d = arg;
	switch (change) {
	case HA_NOW_LEADING:
		/* Whatever another process committed meanwhile (the mirror followed the log). */
		desired_refresh(d->desired);
		if (start_reconciler(d, generation) < 0)
			ha_hand_over(d->ha, "its reconciler cannot start");
		break;
	case HA_NOW_FOLLOWING:
		reconcile_free(d->reconciler);
		d->reconciler = NULL;
		d->env.reconciler = NULL;
		d->units = (struct domain_units){ 0 };
		break;
	case HA_RESYNCED:
		desired_resync(d->desired);
		desired_refresh(d->desired);
		break;
	}
}

int ofcd_init(struct ofcd *d, struct ofcd_config *cfg, const char *config_path, bool demo)
{
	char err[768];
	int rc;
	uint64_t wd_usec = 0;

	memset(d, 0, sizeof(*d));
	d->cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	d->config_path = config_path;
	clock_gettime(CLOCK_MONOTONIC, &d->env.started);
	log_set_level(d->cfg.log_level);
	signal(SIGPIPE, SIG_IGN);

	d->base = event_base_new();
	if (!d->base) {
		log_error("daemon", "cannot create the event loop");
		return -ENOMEM;
	}
	rc = store_open(d->cfg.store_path, &d->store, err, sizeof(err));
	if (rc < 0) {
		log_error("store", "%s", err);
		return rc;
	}
	rc = desired_open(d->store, &d->desired);
	if (rc < 0) {
		log_error("store", "cannot load the desired state: %s", strerror(-rc));
		return rc;
	}
	d->env.base = d->base;
	d->env.cfg = &d->cfg;
	d->env.store = d->store;
	d->env.desired = d->desired;
	d->env.units = &d->units;
	bool cluster = d->cfg.cluster_nendpoints > 0;
	if (demo && cluster)
		log_warn("daemon", "no demo topology in a cluster: its members share one store");
	else if (demo && demo_load(d->store) < 0)
		return -EIO;
	rc = events_new(&d->events);
	if (rc < 0) {
		log_error("daemon", "cannot create the event bus: %s", strerror(-rc));
		return rc;
	}
	d->env.events = d->events;
	d->compute = worker_new(d->base, "ofcd-compute", API_OFFLOAD_MAX_IN_HAND);
	if (!d->compute) {
		log_error("daemon", "cannot start the compute worker");
		return -ENOMEM;
	}
	d->env.compute = d->compute;
	api_offload_metrics_init();
	if (!cluster && ((rc = drop_unfinished(d->store)) < 0 || (rc = start_reconciler(d, 0)) < 0))
		return rc;
	if (cluster) {
		/* Only the leader drives the units: the reconciler starts when it leads. */
		struct ha_deps hd = { .base = d->base,
			              .cfg = &d->cfg,
			              .store = d->store,
			              .events = d->events,
			              .driving = driving,
			              .formers_gone = formers_gone,
			              .arg = d };
		rc = ha_start(&hd, &d->ha);
		if (rc == 0)
			rc = ha_role_hook_add(ha_role_hook(d->ha), on_role, d);
		if (rc < 0) {
			log_error("cluster", "cannot join the cluster: %s", strerror(-rc));
			return rc;
		}
		d->cluster = (struct api_cluster){ .gate = cluster_gate,
			                           .append = cluster_append,
			                           .confirm = cluster_confirm_lead,
			                           .status = cluster_status,
			                           .arg = d };
		d->env.cluster = &d->cluster;
	}
	fd_limit_check(&d->cfg);
	d->tls_mtime = tls_mtime(d);
	rc = http_start(&d->env, false, &d->http, err, sizeof(err));
	if (rc == 0 && d->cfg.admin_listen_host[0]) {
		rc = http_start(&d->env, true, &d->probes, err, sizeof(err));
		if (rc == 0)
			log_info("daemon", "probes and scrapes also on %s:%u (HTTP)",
			         d->cfg.admin_listen_host, http_port(d->probes));
	}
	if (rc < 0) {
		log_error("http", "%s", err);
		return rc;
	}
	d->ev_sigterm = evsignal_new(d->base, SIGTERM, on_signal, d);
	d->ev_sigint = evsignal_new(d->base, SIGINT, on_signal, d);
	d->ev_sighup = evsignal_new(d->base, SIGHUP, on_signal, d);
	d->ev_drain = event_new(d->base, -1, EV_PERSIST, on_drain_check, d);
	if (!d->ev_sigterm || !d->ev_sigint || !d->ev_sighup || !d->ev_drain ||
	    event_add(d->ev_sigterm, NULL) || event_add(d->ev_sigint, NULL) ||
	    event_add(d->ev_sighup, NULL)) {
		log_error("daemon", "cannot register signal handlers");
		return -ENOMEM;
	}
	if (sd_watchdog_enabled(0, &wd_usec) > 0 && wd_usec > 0) {
		struct timeval tv = { .tv_sec = (time_t)(wd_usec / 2 / 1000000),
			              .tv_usec = (suseconds_t)(wd_usec / 2 % 1000000) };
		d->ev_watchdog = event_new(d->base, -1, EV_PERSIST, on_watchdog, d);
		if (d->ev_watchdog)
			event_add(d->ev_watchdog, &tv);
	}
	log_info("daemon", "ofcd %s listening on %s:%u (%s), store %s%s", OFCD_VERSION,
	         d->cfg.listen_host, http_port(d->http), d->cfg.tls_cert[0] ? "HTTPS" : "HTTP",
	         d->cfg.store_path, d->cfg.tokens.n ? "" : " (no tokens: authentication is off)");
	return 0;
}

int ofcd_run(struct ofcd *d)
{
	/* Only now are the store open and the socket listening. */
	sd_notify(0, "READY=1");
	event_base_dispatch(d->base);
	log_info("daemon", "stopped");
	return 0;
}

void ofcd_destroy(struct ofcd *d)
{
	http_destroy(d->probes);
	d->probes = NULL;
	http_destroy(d->http);
	d->http = NULL;
	/* After the requests: their jobs are cancelled, the running one is waited for. */
	worker_free(d->compute);
	d->compute = NULL;
	d->env.compute = NULL;
	ha_free(d->ha);
	d->ha = NULL;
	d->env.cluster = NULL;
	reconcile_free(d->reconciler);
	d->reconciler = NULL;
	events_free(d->events);
	d->events = NULL;
	desired_free(d->desired);
	d->desired = NULL;
	store_close(d->store);
	d->store = NULL;
	struct event *evs[] = { d->ev_sigterm, d->ev_sigint, d->ev_sighup, d->ev_watchdog,
		                d->ev_drain };
	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		if (evs[i])
			event_free(evs[i]);
	if (d->base)
		event_base_free(d->base);
	d->base = NULL;
	config_free(&d->cfg);
}
