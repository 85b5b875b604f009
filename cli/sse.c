#include "sse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void sse_init(struct sse *p, sse_event_fn cb, void *arg)
{
	memset(p, 0, sizeof(*p));
	p->cb = cb;
	p->arg = arg;
}

static int buf_add(struct sse_buf *b, const char *s, size_t n)
{
	if (b->len + n > SSE_MAX)
		return -E2BIG;
	if (b->len + n + 1 > b->cap) {
		size_t cap = (b->len + n + 1) * 2;
		char *ns = realloc(b->s, cap);
		if (!ns)
			return -ENOMEM;
		b->s = ns;
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
	return 0;
}

static void buf_clear(struct sse_buf *b)
{
	b->len = 0;
	if (b->s)
		b->s[0] = '\0';
}

/* A blank line: report the event if it had data, then start the next one. */
static void dispatch(struct sse *p)
{
	if (p->has_data) {
		struct sse_event ev = {
			.id = p->id.s ? p->id.s : "",
			.event = p->event.len ? p->event.s : "message",
			.data = p->data.s ? p->data.s : "",
		};
		p->cb(&ev, p->arg);
	}
	buf_clear(&p->event);
	buf_clear(&p->data);
	p->has_data = false;
}

/* One complete line (without its end). Unknown fields are ignored, as the format asks. */
static int process_line(struct sse *p, const char *line, size_t len)
{
	if (len == 0) {
		dispatch(p);
		return 0;
	}
	if (line[0] == ':')
		return 0;
	const char *colon = memchr(line, ':', len);
	size_t flen = colon ? (size_t)(colon - line) : len;
	const char *value = colon ? colon + 1 : line + len;
	size_t vlen = (size_t)(line + len - value);
	if (vlen && value[0] == ' ') {
		value++;
		vlen--;
	}
	if (flen == 4 && memcmp(line, "data", 4) == 0) {
		int rc = p->has_data ? buf_add(&p->data, "\n", 1) : 0;
		p->has_data = true;
		return rc ? rc : buf_add(&p->data, value, vlen);
	}
	struct sse_buf *field = NULL;
	if (flen == 5 && memcmp(line, "event", 5) == 0)
		field = &p->event;
	else if (flen == 2 && memcmp(line, "id", 2) == 0)
		field = &p->id;
	if (!field)
		return 0;
	buf_clear(field);
	return buf_add(field, value, vlen);
}

int sse_feed(struct sse *p, const char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = buf[i];
		int rc;
		if (c == '\n' && p->after_cr) {
			p->after_cr = false;
			continue;
		}
		p->after_cr = c == '\r';
		if (c != '\n' && c != '\r') {
			/* Copy the rest of the line at once rather than byte by byte. */
			size_t j = i;
			while (j < n && buf[j] != '\n' && buf[j] != '\r')
				j++;
			rc = buf_add(&p->line, buf + i, j - i);
			if (rc)
				return rc;
			i = j - 1;
			continue;
		}
		rc = process_line(p, p->line.s ? p->line.s : "", p->line.len);
		buf_clear(&p->line);
		if (rc)
			return rc;
	}
	return 0;
}

void sse_free(struct sse *p)
{
	free(p->line.s);
	free(p->id.s);
	free(p->event.s);
	free(p->data.s);
	memset(p, 0, sizeof(*p));
}
