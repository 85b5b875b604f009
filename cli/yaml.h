/*
 * -o yaml: a JSON value written as a YAML document in block style. A string
 * is written plain only when no YAML reader could take it for anything else
 * (a word of letters, digits and ._/- that starts with a letter or _ or /
 * and is not a YAML 1.1 boolean or null); any other string is written
 * double-quoted, with JSON's escapes, which YAML reads the same. Pure
 * formatting: no state; any thread.
 */
#ifndef OFCCTL_YAML_H
#define OFCCTL_YAML_H

#include <jansson.h>
#include <stdio.h>

/** Writes v to f as one YAML document, ending in a newline. */
void yaml_print(FILE *f, const json_t *v);

#endif
