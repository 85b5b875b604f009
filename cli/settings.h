/*
 * Where ofcctl finds its daemon, its token and the CA that signed the
 * daemon's certificate. Each setting comes from the first of: the
 * command-line flag, the environment (OFCCTL_URL, OFCCTL_TOKEN_FILE,
 * OFCCTL_CACERT, OFCCTL_INSECURE, OFCCTL_RETRY; then CURL_CA_BUNDLE and SSL_CERT_FILE for
 * the CA, as curl reads them), the user's file ($XDG_CONFIG_HOME/ofcctl.ini,
 * by default ~/.config/ofcctl.ini), the system file (OFCCTL_SYSTEM_INI), the
 * built-in default (SETTINGS_DEFAULT_URL, no token, the system's CAs,
 * certificates checked). The files are INI:
 *
 *     [ofcctl]
 *     url = https://ofcd-a.example:8470,https://ofcd-b.example:8470
 *     token_file = /etc/ofcd/ofcctl.token
 *     cacert = /etc/ofcd/tls/ca.pem
 *     insecure = false
 *     retry = 15
 *
 * url may list a cluster's members, comma-separated (client.h says how they
 * are used); retry is seconds from 0 to SETTINGS_RETRY_MAX.
 * Single-threaded (reads the environment).
 */
#ifndef OFCCTL_SETTINGS_H
#define OFCCTL_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>

#ifndef OFCCTL_SYSTEM_INI
#define OFCCTL_SYSTEM_INI "/etc/ofcd/ofcctl.ini"
#endif

/** The daemon `make run` starts. */
#define SETTINGS_DEFAULT_URL "http://127.0.0.1:8470"

/** The longest retry taken, in seconds: an hour. */
#define SETTINGS_RETRY_MAX 3600.0

/** Room for a URL list or a path. */
#define SETTINGS_LEN 4096

/** The resolved settings. */
struct settings {
	char url[SETTINGS_LEN];        /**< the daemon's base URL */
	char token_file[SETTINGS_LEN]; /**< file holding the bearer token; "" for none */
	char cacert[SETTINGS_LEN];     /**< PEM file of the CAs to trust; "" for the system's */
	bool insecure;                 /**< do not check the daemon's certificate */
	double retry_s; /**< how long to keep sending a request no member took; 0: one pass */
};

/** What the command line said (NULL, false: not given). */
struct settings_flags {
	const char *url;        /**< --url */
	const char *token_file; /**< --token-file */
	const char *cacert;     /**< --cacert */
	bool insecure;          /**< --insecure, -k */
	const char *retry;      /**< --retry, as given */
};

/**
 * Resolves s from the flags, the environment and the files. A missing file
 * is skipped; an unreadable one, an unknown section or key, a value too long,
 * an insecure that is not true or false, or a retry that is not a number of
 * seconds from 0 to SETTINGS_RETRY_MAX is -EINVAL with the reason in err
 * ("FILE:LINE: reason" for a file's).
 */
int settings_resolve(struct settings *s, const struct settings_flags *flags, char *err,
                     size_t errlen);

/**
 * Reads the token from path: its first line, without surrounding white
 * space. *token is malloc'd (the caller frees it). -ENOENT, -EACCES, -EINVAL
 * (empty file) or -ENOMEM with the reason in err.
 */
int settings_read_token(const char *path, char **token, char *err, size_t errlen);

#endif
