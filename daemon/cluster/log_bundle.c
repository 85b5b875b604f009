#include "log_bundle.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log_part.h"

static const char MAGIC[8] = { 'O', 'F', 'C', 'D', 'B', 'N', 'D', 'L' };

#define HEADER (sizeof(MAGIC) + 4u)
#define ITEM   5u /* kind, length */

void *log_bundle_make(const struct log_changeset *v, size_t n, size_t *len)
{
	size_t total = HEADER;
	if (n > LOG_BUNDLE_MAX)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (v[i].len > UINT32_MAX)
			return NULL;
		total += ITEM + v[i].len;
	}
	unsigned char *b = malloc(total), *p = b;
	if (!b)
		return NULL;
	memcpy(p, MAGIC, sizeof(MAGIC));
	log_put_be32(p + sizeof(MAGIC), (uint32_t)n);
	p += HEADER;
	for (size_t i = 0; i < n; i++) {
		*p = (unsigned char)v[i].kind;
		log_put_be32(p + 1, (uint32_t)v[i].len);
		if (v[i].len)
			memcpy(p + ITEM, v[i].data, v[i].len);
		p += ITEM + v[i].len;
	}
	*len = total;
	return b;
}

int log_bundle_parse(const void *data, size_t len, struct log_changeset *v, size_t max)
{
	const unsigned char *p = data;
	if (len < HEADER || memcmp(p, MAGIC, sizeof(MAGIC)) != 0) {
		/* A bare changeset: one write (what an older leader sent). */
		if (!len || max < 1)
			return -EPROTO;
		v[0] = (struct log_changeset){ LOG_WRITE, data, len };
		return 1;
	}
	uint32_t n = log_get_be32(p + sizeof(MAGIC));
	size_t at = HEADER;
	if (n > max)
		return -EPROTO;
	for (uint32_t i = 0; i < n; i++) {
		if (len - at < ITEM)
			return -EPROTO;
		unsigned kind = p[at];
		size_t size = log_get_be32(p + at + 1);
		at += ITEM;
		if ((kind != LOG_WRITE && kind != LOG_STATES && kind != LOG_EVENTS) ||
		    size > len - at)
			return -EPROTO;
		v[i] = (struct log_changeset){ (enum log_kind)kind, p + at, size };
		at += size;
	}
	return at == len ? (int)n : -EPROTO;
}
