/*
 * Bearer-token authentication and roles.
 *
 * Tokens come from the configuration ([auth] token.NAME = ROLE:SECRET, or
 * agent:SERVER:SECRET for the host agent of one server). A
 * request's secret is compared with every configured secret in constant time
 * (no early exit on the first match or the first differing byte), so the
 * response time does not tell how close a guess was. Secrets are never logged:
 * only token names appear in logs and the audit table. Loop thread only.
 */
#ifndef OFCD_AUTH_H
#define OFCD_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "auth_rules.h"

/** Roles, in increasing power. */
enum auth_role {
	AUTH_NONE = 0,  /**< no role: only routes that need none */
	AUTH_READ = 1,  /**< GET routes */
	AUTH_AGENT = 2, /**< GET routes, and its own server's inventory and device states */
	AUTH_ADMIN = 3, /**< everything */
};

/** One configured token. */
struct auth_token {
	char name[AUTH_NAME_MAX + 1];     /**< NAME from token.NAME, for logs and audit */
	enum auth_role role;              /**< READ, AGENT or ADMIN */
	char secret[AUTH_SECRET_MAX + 1]; /**< the bearer secret */
	char server[AUTH_NAME_MAX + 1];   /**< AGENT: the one server it may write for; else "" */
};

/** The token set; owns its array (auth_tokens_free). */
struct auth_tokens {
	struct auth_token *v; /**< tokens, in configuration order */
	size_t n;             /**< number of tokens */
};

/** Parses "read", "agent" or "admin"; returns 0 or -EINVAL. */
int auth_parse_role(const char *s, enum auth_role *out);

/** Name of a role ("none", "read", "agent", "admin"). */
const char *auth_role_name(enum auth_role role);

/**
 * Adds a token, copying name and secret. Returns 0, -EEXIST for a name given
 * twice, -EINVAL for a bad name or secret (or role AGENT: see below), -ENOMEM.
 */
int auth_tokens_add(struct auth_tokens *t, const char *name, enum auth_role role,
                    const char *secret);

/**
 * Adds an AGENT token bound to server (a valid name), copying the strings.
 * Returns as auth_tokens_add(); -EINVAL also for a bad server name.
 */
int auth_tokens_add_agent(struct auth_tokens *t, const char *name, const char *server,
                          const char *secret);

/** Frees the array and wipes the secrets. */
void auth_tokens_free(struct auth_tokens *t);

/** Deep copy of src into dst (dst is overwritten, not freed). Returns 0 or -ENOMEM. */
int auth_tokens_copy(struct auth_tokens *dst, const struct auth_tokens *src);

/**
 * Finds the token whose secret equals the given one, in constant time with
 * respect to the secrets' contents. Returns the token or NULL.
 */
const struct auth_token *auth_lookup(const struct auth_tokens *t, const char *secret,
                                     size_t secret_len);

/**
 * Extracts the secret from an Authorization header value ("Bearer SECRET").
 * Returns a pointer into header and its length, or NULL when malformed.
 */
const char *auth_bearer(const char *header, size_t *len);

#endif
