/* UTF-8 checked as jansson checks it. */
#include "utf8.h"

#include <stdint.h>
#include <string.h>

size_t utf8_char(const unsigned char *p, size_t n)
{
	static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };
	size_t k = *p < 0x80           ? 1
	           : (*p >> 5) == 0x6  ? 2
	           : (*p >> 4) == 0xe  ? 3
	           : (*p >> 3) == 0x1e ? 4
	                               : 0;
	if (k <= 1)
		return k;
	if (k > n)
		return 0;
	uint32_t c = *p & (0x7f >> k);
	for (size_t i = 1; i < k; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	if (c < min[k] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	return k;
}

size_t utf8_bad_at(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	while (i < len) {
		size_t k = utf8_char(p + i, len - i);
		if (!k)
			return i;
		i += k;
	}
	return len;
}

void utf8_clean(char *s)
{
	unsigned char *p = (unsigned char *)s, *end = p + strlen(s);
	while (*p) {
		size_t n = utf8_char(p, (size_t)(end - p));
		if (!n || (n == 1 && *p < 0x20)) {
			*p++ = '?';
			continue;
		}
		p += n;
	}
}
