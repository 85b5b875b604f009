/*
 * The "http://HOST:PORT" and "https://HOST:PORT" addresses the configuration
 * files take (the agent's controller, a cluster's etcd endpoints and
 * advertised URL). Pure; any thread.
 */
#ifndef OFCD_URL_H
#define OFCD_URL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * Splits the len bytes of url, "http[s]://HOST:PORT" with an optional "/"
 * after, into *tls, host (HOST without the brackets of an IPv6 "[ADDR]",
 * NUL-terminated, hostlen bytes at most) and *port (1-65535). HOST is a name
 * or address of letters, digits, '.', '-' (or, bracketed, hex digits, ':',
 * '.'); nothing else may follow the port. Returns 0 or -EINVAL (outputs
 * then undefined).
 */
int url_split(const char *url, size_t len, bool *tls, char *host, size_t hostlen, uint16_t *port);

#endif
