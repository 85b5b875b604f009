#include "log_part.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char MAGIC[8] = { 'O', 'F', 'C', 'D', 'P', 'A', 'R', 'T' };

void *log_part_make(uint32_t index, uint32_t count, const void *payload, size_t len)
{
	unsigned char *e = malloc(LOG_PART_HEADER + len);
	if (!e)
		return NULL;
	memcpy(e, MAGIC, sizeof(MAGIC));
	log_put_be32(e + 8, index);
	log_put_be32(e + 12, count);
	memcpy(e + LOG_PART_HEADER, payload, len);
	return e;
}

bool log_part_parse(const void *value, size_t len, uint32_t *index, uint32_t *count,
                    const void **payload, size_t *payload_len)
{
	const unsigned char *v = value;
	if (len < LOG_PART_HEADER || memcmp(v, MAGIC, sizeof(MAGIC)) != 0)
		return false;
	*index = log_get_be32(v + 8);
	*count = log_get_be32(v + 12);
	if (*count == 0 || *index >= *count)
		return false;
	*payload = v + LOG_PART_HEADER;
	*payload_len = len - LOG_PART_HEADER;
	return true;
}

void log_part_reset(struct log_part_buf *b)
{
	free(b->data);
	*b = (struct log_part_buf){ 0 };
}

int log_part_add(struct log_part_buf *b, uint32_t index, uint32_t count, const void *payload,
                 size_t len)
{
	if (index == 0)
		log_part_reset(b);
	else if (index != b->next || count != b->count) {
		log_part_reset(b);
		return -EPROTO;
	}
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : len;
		while (cap < b->len + len)
			cap *= 2;
		unsigned char *d = realloc(b->data, cap);
		if (!d) {
			log_part_reset(b);
			return -ENOMEM;
		}
		b->data = d;
		b->cap = cap;
	}
	if (len)
		memcpy(b->data + b->len, payload, len);
	b->len += len;
	b->count = count;
	b->next = index + 1;
	return b->next == count ? 1 : 0;
}
