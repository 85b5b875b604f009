/*
 * A Server-Sent Events parser (the text/event-stream format of GET
 * /v1/events): bytes in, whole events out. Lines end in LF, CRLF or CR; a
 * blank line ends an event; comment lines (": ...") are skipped; several
 * data lines join with LF. Pure: no I/O; one parser per stream and thread.
 */
#ifndef OFCCTL_SSE_H
#define OFCCTL_SSE_H

#include <stdbool.h>
#include <stddef.h>

/** A line or an event's data past this size stops the parse (a broken stream). */
#define SSE_MAX 1048576

/** One event; the strings belong to the parser and live until the callback returns. */
struct sse_event {
	const char *id;    /**< the last id the stream set ("" when none yet) */
	const char *event; /**< the event type ("message" when the event names none) */
	const char *data;  /**< the data lines joined with LF */
};

/** Called once per complete event, in stream order. */
typedef void (*sse_event_fn)(const struct sse_event *ev, void *arg);

/** A growing string; the parser's own. */
struct sse_buf {
	char *s;    /**< NUL-terminated text, or NULL while empty */
	size_t len; /**< its length */
	size_t cap; /**< bytes allocated */
};

/** Parser state; set it up with sse_init. */
struct sse {
	sse_event_fn cb;      /**< called for each event */
	void *arg;            /**< passed to cb */
	struct sse_buf line;  /**< the line being read */
	struct sse_buf id;    /**< last event id */
	struct sse_buf event; /**< type of the event being read */
	struct sse_buf data;  /**< data of the event being read */
	bool has_data;        /**< the event being read has a data line */
	bool after_cr;        /**< the last byte was a CR (a following LF ends nothing) */
};

/** Starts a parser that reports each event to cb(ev, arg). */
void sse_init(struct sse *p, sse_event_fn cb, void *arg);

/** Feeds n bytes; 0, or -E2BIG past SSE_MAX, -ENOMEM. Events are reported as they complete. */
int sse_feed(struct sse *p, const char *buf, size_t n);

/** Frees the parser's buffers; an event without its closing blank line is dropped. */
void sse_free(struct sse *p);

#endif
