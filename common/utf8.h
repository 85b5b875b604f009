/*
 * UTF-8 as jansson takes it (no overlong form, no surrogate, nothing past U+10FFFF), for text
 * that must go into JSON: the daemon's error messages, the agent's runs files. Pure; any
 * thread.
 */
#ifndef OFCD_UTF8_H
#define OFCD_UTF8_H

#include <stddef.h>

/** Bytes of the character at p (n bytes left, n >= 1), or 0 when it is not valid UTF-8. */
size_t utf8_char(const unsigned char *p, size_t n);

/**
 * Makes s (NUL-terminated, in place) fit for JSON: each byte that does not
 * start a valid character, and each control character, becomes '?'. For text
 * that echoes a client (paths, member names), possibly cut mid-character.
 */
void utf8_clean(char *s);

/** The offset of the first byte of s[0..len) that is not valid UTF-8, or len when all are. */
size_t utf8_bad_at(const char *s, size_t len);

#endif
