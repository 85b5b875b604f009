/*
 * A change too large for one entry of the replicated log (etcd takes about
 * 1.5 MiB per request) travels as consecutive entries, each framed as a part:
 * a 16-byte header ("OFCDPART", its index, the number of parts, both 32-bit
 * big-endian) and a slice of the changeset. A follower applies the whole
 * changeset at the revision of the last part; parts not followed by the rest
 * (their leader stopped sending) are dropped, as the write they carried was
 * never acknowledged. A plain entry is a bare changeset: SQLite changesets
 * start with 'T', never with this header. Pure functions, any thread.
 */
#ifndef OFCD_LOG_PART_H
#define OFCD_LOG_PART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Writes v at p as 4 bytes, big-endian (the log's framing). */
static inline void log_put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/** The 4 bytes at p, big-endian. */
static inline uint32_t log_get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/** Bytes of a part's header. */
#define LOG_PART_HEADER 16u

/**
 * Part index (0-based) of count of data, whose slice is payload (len bytes):
 * a malloc'd entry of LOG_PART_HEADER + len bytes (the caller's), or NULL.
 */
void *log_part_make(uint32_t index, uint32_t count, const void *payload, size_t len);

/**
 * True when value (len bytes) is a part: *index, *count, and its slice
 * (*payload, pointing into value, *payload_len). A malformed header (count 0,
 * index past it) is not a part.
 */
bool log_part_parse(const void *value, size_t len, uint32_t *index, uint32_t *count,
                    const void **payload, size_t *payload_len);

/** The changeset being put back together from parts, by a follower. */
struct log_part_buf {
	unsigned char *data; /**< the slices so far (malloc'd, owned here) */
	size_t len, cap;
	uint32_t next;  /**< the index expected next; 0 when none is under way */
	uint32_t count; /**< parts of the change under way */
};

/**
 * Adds a part to b. Returns 1 when it completed the change (b->data, b->len
 * hold it until log_part_reset()), 0 when more are to come, -EPROTO when it
 * does not continue the change under way (which is dropped; a part 0 starts
 * a new one instead), or -ENOMEM.
 */
int log_part_add(struct log_part_buf *b, uint32_t index, uint32_t count, const void *payload,
                 size_t len);

/** Drops what b holds; it can take a new change. */
void log_part_reset(struct log_part_buf *b);

#endif
