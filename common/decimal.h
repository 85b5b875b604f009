/*
 * Numbers in request text (query parameters, path segments, ids, tool output)
 * read one way: as people write them. strtol() and strtod() also take signs,
 * leading spaces, hex, exponents, inf and nan, and wrap or saturate past their
 * range, none of which a client means. Any thread.
 */
#ifndef OFCD_DECIMAL_H
#define OFCD_DECIMAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * Reads v as a whole number written one way only: digits, no sign, no leading
 * zero (but "0" itself), at most max. Returns true and the number in *out.
 */
static inline bool decimal_u64(const char *v, uint64_t max, uint64_t *out)
{
	uint64_t x = 0;
	size_t i = 0;
	if (v[0] == '0' && v[1] != '\0')
		return false;
	for (; v[i] >= '0' && v[i] <= '9'; i++) {
		uint64_t d = (uint64_t)(v[i] - '0');
		if (d > max || x > (max - d) / 10)
			return false;
		x = x * 10 + d;
	}
	if (i == 0 || v[i] != '\0')
		return false;
	*out = x;
	return true;
}

/** Whether v is digits, optionally a point and more digits: what strtod() may then read. */
static inline bool decimal_plain(const char *v)
{
	size_t i = 0, digits = 0;
	while (v[i] >= '0' && v[i] <= '9')
		i++, digits++;
	if (v[i] == '.')
		for (i++; v[i] >= '0' && v[i] <= '9'; i++)
			digits++;
	return digits > 0 && v[i] == '\0';
}

#endif
