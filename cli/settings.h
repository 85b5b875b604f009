/*
 * Where ofcctl finds its daemon and its token. Each setting comes from the
 * first of: the command-line flag, the environment (OFCCTL_URL,
 * OFCCTL_TOKEN_FILE), the user's file ($XDG_CONFIG_HOME/ofcctl.ini, by
 * default ~/.config/ofcctl.ini), the system file (OFCCTL_SYSTEM_INI), the
 * built-in default (SETTINGS_DEFAULT_URL, no token). The files are INI:
 *
 *     [ofcctl]
 *     url = http://ofcd.example:8470
 *     token_file = /etc/ofcd/ofcctl.token
 *
 * Single-threaded (reads the environment).
 */
#ifndef OFCCTL_SETTINGS_H
#define OFCCTL_SETTINGS_H

#include <stddef.h>

#ifndef OFCCTL_SYSTEM_INI
#define OFCCTL_SYSTEM_INI "/etc/ofcd/ofcctl.ini"
#endif

/** The daemon `make run` starts. */
#define SETTINGS_DEFAULT_URL "http://127.0.0.1:8470"

/** Room for a URL or a path. */
#define SETTINGS_LEN 4096

/** The resolved settings. */
struct settings {
	char url[SETTINGS_LEN];        /**< the daemon's base URL */
	char token_file[SETTINGS_LEN]; /**< file holding the bearer token; "" for none */
};

/**
 * Resolves s from flag_url and flag_token_file (NULL when not given), the
 * environment and the files. A missing file is skipped; an unreadable one,
 * an unknown section or key, or a value too long is -EINVAL with
 * "FILE:LINE: reason" in err.
 */
int settings_resolve(struct settings *s, const char *flag_url, const char *flag_token_file,
                     char *err, size_t errlen);

/**
 * Reads the token from path: its first line, without surrounding white
 * space. *token is malloc'd (the caller frees it). -ENOENT, -EACCES, -EINVAL
 * (empty file) or -ENOMEM with the reason in err.
 */
int settings_read_token(const char *path, char **token, char *err, size_t errlen);

#endif
