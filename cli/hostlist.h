/*
 * Slurm host lists: "srv[0-4,7],gpu[01-03]" to names and back.
 *
 * Expansion follows Slurm's syntax: items separated by commas outside
 * brackets; in an item, each bracket group holds comma-separated numbers or
 * ranges "lo-hi" (lo <= hi), printed with the width of lo when lo has a
 * leading zero ("[08-10]" is 08, 09, 10); several groups in one item expand
 * as a product, leftmost slowest ("r[1-2]n[1-3]" is r1n1, r1n2, r1n3, r2n1...).
 * Pure: no I/O; any thread, one list per thread.
 */
#ifndef OFCCTL_HOSTLIST_H
#define OFCCTL_HOSTLIST_H

#include <stddef.h>

/** Expansions stop beyond this many names (a typo such as "[0-99999999]"). */
#define HOSTLIST_MAX 65536

/** A list of names in order; zero it before the first use. */
struct hostlist {
	char **names; /**< n names, each malloc'd; owned by the list */
	size_t n;     /**< names held */
	size_t cap;   /**< slots allocated in names */
};

/**
 * Appends the names expr expands to. On a malformed expression (unbalanced
 * or nested brackets, a reversed or non-numeric range, an empty item or
 * range) returns -EINVAL with the reason in err, -E2BIG past HOSTLIST_MAX
 * names, -ENOMEM; the list then keeps what it held before the call.
 */
int hostlist_expand(struct hostlist *hl, const char *expr, char *err, size_t errlen);

/**
 * Writes names[0..n) in compressed form into a malloc'd string (the caller
 * frees it), keeping their order: runs of names that share a prefix and a
 * number of equal width become "prefix[a-b,c]". Expanding the result gives
 * the same names. NULL when out of memory.
 */
char *hostlist_compress(char *const *names, size_t n);

/** Frees the names; the list is empty and reusable afterwards. */
void hostlist_free(struct hostlist *hl);

#endif
