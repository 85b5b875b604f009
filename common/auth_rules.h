/*
 * The project's name rule and the bearer-secret rule, shared by the
 * controller (token names, API names, [auth] secrets) and the host agent (its
 * server name and token), so a value one accepts is one the other can hold.
 * Pure functions: any thread.
 */
#ifndef OFCD_AUTH_RULES_H
#define OFCD_AUTH_RULES_H

#include <stdbool.h>

#define AUTH_NAME_MAX   64 /**< longest name, in bytes */
#define AUTH_SECRET_MIN 16 /**< shortest bearer secret, in bytes */
#define AUTH_SECRET_MAX                                                                            \
	128 /**< longest secret: a token line must fit the INI reader's 200-byte lines */

/** True when s is 16..128 characters of [A-Za-z0-9-._~+/=] (a usable bearer secret). */
bool auth_valid_secret(const char *s);

/** True when name is 1..64 characters of [A-Za-z0-9._-] (the project's name rule). */
bool auth_valid_name(const char *name);

#endif
