/*
 * Daemon configuration: an INI file read against one typed table
 * (config_table, see cfgtab.h): every key's field, type, bounds, default,
 * whether SIGHUP applies it live, and its line in the reference that
 * `ofcd --dump-config-doc` prints into docs/operations.md. An unknown section
 * or key, a key given twice or a bad value stops loading with a message naming
 * file, line and key. Loop thread only.
 */
#ifndef OFCD_CONFIG_H
#define OFCD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "cfgtab.h"
#include "cost.h"
#include "log.h"

/** Upper bound of [http] max_body: a REST body has no business being larger. */
#define CONFIG_MAX_BODY_LIMIT (64u * 1024 * 1024)

/** Most etcd endpoints [cluster] etcd may list. */
#define CONFIG_CLUSTER_MAX_ENDPOINTS 8

/** Most [netconf] KEY.UNIT settings a file may give. */
#define CONFIG_UNIT_SETTINGS_MAX 64

/** One [netconf] KEY.UNIT setting: KEY's value for that OCS unit alone. */
struct config_unit_setting {
	char key[16];    /**< "key", "known_hosts" or "model" */
	char unit[65];   /**< the OCS unit's name */
	char value[512]; /**< the value */
};

/** Everything the configuration file can set. Owned by whoever loaded it. */
struct ofcd_config {
	char source[512]; /**< file it came from, or "(built-in)" */

	char listen_host[256]; /**< [http] listen, host part ("127.0.0.1", "::1", "0.0.0.0") */
	uint16_t listen_port;  /**< [http] listen, port part */
	char admin_listen_host[256];     /**< [http] admin_listen, host part; "" when off */
	uint16_t admin_listen_port;      /**< [http] admin_listen, port part */
	size_t max_body;                 /**< [http] max_body, bytes */
	unsigned max_connections;        /**< [http] max_connections */
	unsigned max_connections_per_ip; /**< [http] max_connections_per_ip */
	unsigned request_timeout_s; /**< [http] request_timeout: a request must arrive within */
	unsigned idle_timeout_s;    /**< [http] idle_timeout: keep-alive between requests */
	unsigned header_timeout_s;  /**< [http] header_timeout: a whole header must arrive within */
	unsigned body_min_rate;     /**< [http] body_min_rate: bytes/s a body must average */
	char tls_cert[512];       /**< [http] tls_cert: PEM certificate chain, "" for plain HTTP */
	char tls_key[512];        /**< [http] tls_key: its PEM private key, "" for plain HTTP */
	char tls_priorities[512]; /**< [http] tls_priorities: GnuTLS priority string of HTTPS */
	bool allow_plaintext_tokens; /**< [http] allow_plaintext_tokens off loopback without TLS */

	char store_path[512]; /**< [store] path of the SQLite file */

	enum log_level log_level; /**< [log] level */

	struct auth_tokens tokens;  /**< [auth] token.NAME = ROLE:SECRET */
	bool allow_unauthenticated; /**< [auth] allow_unauthenticated */

	bool debug_faults; /**< [debug] faults: enables fault injection routes */

	unsigned audit_interval_s; /**< [reconcile] audit_interval, seconds */

	/**
	 * [cost] inter_gbps ... p2p_write_us: the cluster's bandwidths and delays
	 * that transmission-method selection uses unless a request overrides them
	 * (defaults: cost_params_default()).
	 */
	struct cost_params cost;

	/**
	 * [cluster] etcd: etcd client URLs ("http://127.0.0.1:2379"), tried
	 * in turn. None (the default): the single embedded daemon, no cluster.
	 */
	char cluster_endpoints[CONFIG_CLUSTER_MAX_ENDPOINTS][128];
	unsigned cluster_nendpoints;  /**< how many cluster_endpoints are set */
	char cluster_name[65];        /**< [cluster] name: this member, unique in the cluster */
	char cluster_advertise[256];  /**< [cluster] advertise: URL clients reach this member at */
	unsigned cluster_lease_ttl_s; /**< [cluster] lease_ttl: the leader's etcd lease, seconds */
	char cluster_prefix[128];     /**< [cluster] prefix: etcd key prefix of this cluster */
	unsigned cluster_log_keep;    /**< [cluster] log_keep: log entries the leader keeps */
	/** [cluster] token: bearer token this member presents to fetch a snapshot ("": none) */
	char cluster_token[256];

	char netconf_key[512];         /**< [netconf] key: SSH private key file of every unit */
	char netconf_known_hosts[512]; /**< [netconf] known_hosts: the units' host keys */
	char netconf_model[512];       /**< [netconf] model of the units' cross-connects */
	char netconf_yang_dir[512];    /**< [netconf] yang_dir: YANG modules looked at first */
	/** [netconf] KEY.UNIT: per-unit values, in file order */
	struct config_unit_setting netconf_units[CONFIG_UNIT_SETTINGS_MAX];
	unsigned netconf_nunits; /**< entries of netconf_units in use */
};

/** Every key of the daemon's file; ofcd_reload() applies the live ones. */
extern const struct cfgtab config_table;

/**
 * Fills cfg with the built-in defaults (loopback, ./var/ofcd.db, no tokens):
 * the table's. Returns 0, or -EINVAL with the reason in err when the table is
 * broken. cfg owns nothing afterwards that config_free() would not release.
 */
int config_defaults(struct ofcd_config *cfg, char *err, size_t errlen);

/**
 * Loads path over the defaults into cfg and validates the result. On error
 * returns -EINVAL (or -errno when the file cannot be read) with a message
 * "FILE:LINE: [section] key: reason" in err, and cfg is unspecified. In both
 * cases cfg owns memory afterwards: release it with config_free().
 */
int config_load(const char *path, struct ofcd_config *cfg, char *err, size_t errlen);

/** Same as config_load() for INI text in memory; name is used in messages. */
int config_load_string(const char *text, const char *name, struct ofcd_config *cfg, char *err,
                       size_t errlen);

/** Releases what cfg owns (the tokens); cfg may be loaded again afterwards. */
void config_free(struct ofcd_config *cfg);

/**
 * What a [cost] key (or a request's params member) accepts, for messages:
 * "a bandwidth in Gb/s from 1e-06 to 1e+09" for the _gbps keys, "a delay in us
 * from 0 to 1e+09" for the _us keys. A static string; NULL for an unknown key.
 */
const char *config_cost_range(const char *key);

/**
 * A driver's setting for one OCS unit: [DRIVER] KEY.UNIT, else [DRIVER] KEY;
 * NULL when neither is set (or the driver has no section). The string is
 * owned by cfg. Loop thread.
 */
const char *config_driver_setting(const struct ofcd_config *cfg, const char *driver,
                                  const char *unit, const char *key);

/** True when host names a loopback address ("127.0.0.0/8", "::1", "localhost"). */
bool config_host_is_loopback(const char *host);

/**
 * Logs a warning for each file any user of the machine can read that holds a
 * secret: the file at path, which cfg was loaded from, when it holds tokens
 * (or the cluster's token); [http] tls_key; [netconf] key and key.UNIT. Loop
 * thread (startup and SIGHUP).
 */
void config_warn_exposed(const char *path, const struct ofcd_config *cfg);

/**
 * Whether next's authentication suits a listener on host, with or without
 * TLS: false, with the reason in err, when a host other than loopback would
 * serve without tokens ([auth] allow_unauthenticated off), or when bearer
 * secrets would cross the network in clear (no TLS, [http]
 * allow_plaintext_tokens off). A SIGHUP reload judges the new file against
 * the running listener (host and TLS are fixed until a restart).
 */
bool config_auth_safe(const struct ofcd_config *next, const char *host, bool tls, char *err,
                      size_t errlen);

#endif
