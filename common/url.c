#include "url.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

static bool host_char(unsigned char c, bool bracketed)
{
	if (bracketed)
		return isxdigit(c) || c == ':' || c == '.';
	return isalnum(c) || c == '.' || c == '-';
}

int url_split(const char *url, size_t len, bool *tls, char *host, size_t hostlen, uint16_t *port)
{
	size_t skip;
	if (len > 8 && strncmp(url, "https://", 8) == 0)
		skip = 8, *tls = true;
	else if (len > 7 && strncmp(url, "http://", 7) == 0)
		skip = 7, *tls = false;
	else
		return -EINVAL;
	const char *p = url + skip, *end = url + len;
	if (end[-1] == '/')
		end--;
	bool bracketed = p < end && *p == '[';
	const char *h = p + bracketed, *hend = h;
	while (hend < end && host_char((unsigned char)*hend, bracketed))
		hend++;
	const char *colon = hend + bracketed;
	if (hend == h || (bracketed && (hend >= end || *hend != ']')) || colon >= end ||
	    *colon != ':' || (size_t)(hend - h) >= hostlen)
		return -EINVAL;
	unsigned long v = 0;
	const char *d = colon + 1;
	if (d == end || end - d > 5)
		return -EINVAL;
	for (; d < end; d++) {
		if (!isdigit((unsigned char)*d))
			return -EINVAL;
		v = v * 10 + (unsigned long)(*d - '0');
	}
	if (v < 1 || v > 65535)
		return -EINVAL;
	memcpy(host, h, (size_t)(hend - h));
	host[hend - h] = '\0';
	*port = (uint16_t)v;
	return 0;
}
