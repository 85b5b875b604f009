/*
 * The recorded RDMA source: an inventory captured as JSON (the form of
 * GET /v1/rdma/devices, so a real host's view can be saved and replayed) and
 * an event script played on one libevent timer. It lets the agent, its tests
 * and demos run on machines without RDMA hardware, through exactly the code
 * paths the verbs source uses.
 */
#include "rdma.h"

#include <errno.h>
#include <event2/event.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define SCRIPT_MAX_BYTES  (1024 * 1024)
#define SCRIPT_MAX_EVENTS 100000
#define SCRIPT_MAX_MS     (7u * 24 * 3600 * 1000) /* a week: longer is a typo */

struct recorded_source {
	struct rdma_source src;
	struct rdma_inventory inv; /* the recorded state, changed by the script */
	struct rdma_script_event *script;
	size_t nscript;
	size_t next; /* first event not played yet */
	struct event *timer;
	struct timespec t0;
	rdma_event_fn cb;
	void *arg;
};

static int parse_uint_word(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Splits line in place into at most max whitespace-separated words; returns their count. */
static size_t split_words(char *line, char **words, size_t max)
{
	size_t n = 0;
	char *save = NULL;
	for (char *w = strtok_r(line, " \t\r", &save); w; w = strtok_r(NULL, " \t\r", &save)) {
		if (n == max)
			return max + 1;
		words[n++] = w;
	}
	return n;
}

int rdma_script_parse(const char *text, const char *name, const struct rdma_inventory *inv,
                      struct rdma_script_event **out, size_t *n, char *err, size_t errlen)
{
	static const enum rdma_event_kind kinds[] = { RDMA_EV_PORT_ERR, RDMA_EV_PORT_ACTIVE,
		                                      RDMA_EV_DEVICE_FATAL };
	struct rdma_script_event *v = NULL;
	size_t nv = 0, cap = 0;
	unsigned lineno = 0;
	char *copy = strdup(text);
	int rc = -ENOMEM;

	*out = NULL;
	*n = 0;
	if (!copy) {
		snprintf(err, errlen, "%s: out of memory", name);
		return -ENOMEM;
	}
	/* strsep keeps empty lines, so line numbers stay right. */
	for (char *rest = copy, *line; (line = strsep(&rest, "\n"));) {
		char *words[4];
		unsigned long at, port;
		lineno++;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		size_t nw = split_words(line, words, 4);
		if (nw == 0)
			continue;
		if (nw != 4) {
			snprintf(err, errlen, "%s:%u: expected DELAY_MS DEVICE PORT EVENT", name,
			         lineno);
			goto bad;
		}
		if (parse_uint_word(words[0], SCRIPT_MAX_MS, &at) < 0) {
			snprintf(err, errlen, "%s:%u: DELAY_MS must be milliseconds from 0 to %u",
			         name, lineno, SCRIPT_MAX_MS);
			goto bad;
		}
		if (nv && at < v[nv - 1].at_ms) {
			snprintf(
			    err, errlen,
			    "%s:%u: DELAY_MS %lu is before the previous line's %u (times count "
			    "from the start)",
			    name, lineno, at, v[nv - 1].at_ms);
			goto bad;
		}
		const struct rdma_device *dev = rdma_inventory_device(inv, words[1]);
		if (!dev) {
			snprintf(err, errlen, "%s:%u: no device %.64s in the recorded inventory",
			         name, lineno, words[1]);
			goto bad;
		}
		if (parse_uint_word(words[2], RDMA_MAX_PORTS, &port) < 0) {
			snprintf(err, errlen, "%s:%u: PORT must be a number from 0 to %d", name,
			         lineno, RDMA_MAX_PORTS);
			goto bad;
		}
		int kind = -1;
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
			if (strcmp(words[3], rdma_event_name(kinds[k])) == 0)
				kind = (int)kinds[k];
		if (kind < 0) {
			snprintf(err, errlen,
			         "%s:%u: EVENT must be port_err, port_active or device_fatal, not "
			         "\"%.32s\"",
			         name, lineno, words[3]);
			goto bad;
		}
		if (kind != RDMA_EV_DEVICE_FATAL && !rdma_device_port(dev, (unsigned)port)) {
			snprintf(err, errlen, "%s:%u: device %s has no port %lu", name, lineno,
			         dev->name, port);
			goto bad;
		}
		if (nv == SCRIPT_MAX_EVENTS) {
			snprintf(err, errlen, "%s:%u: more than %d events", name, lineno,
			         SCRIPT_MAX_EVENTS);
			goto bad;
		}
		if (nv == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct rdma_script_event *nvp = realloc(v, ncap * sizeof(*v));
			if (!nvp) {
				snprintf(err, errlen, "%s: out of memory", name);
				goto out;
			}
			v = nvp;
			cap = ncap;
		}
		struct rdma_script_event *e = &v[nv++];
		memset(e, 0, sizeof(*e));
		e->at_ms = (uint32_t)at;
		snprintf(e->device, sizeof(e->device), "%s", dev->name);
		e->port = kind == RDMA_EV_DEVICE_FATAL ? 0 : (uint8_t)port;
		e->kind = (enum rdma_event_kind)kind;
	}
	*out = v;
	*n = nv;
	v = NULL;
	rc = 0;
	goto out;
bad:
	rc = -EINVAL;
out:
	free(v);
	free(copy);
	return rc;
}

static void port_set(struct rdma_port *p, bool up)
{
	p->state = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	p->phys_state = up ? 5 : 2; /* LinkUp, Polling */
}

int rdma_script_apply(struct rdma_inventory *inv, const struct rdma_script_event *ev)
{
	struct rdma_device *dev = rdma_inventory_device(inv, ev->device);
	if (!dev)
		return -ENOENT;
	if (ev->kind == RDMA_EV_DEVICE_FATAL) {
		dev->fatal = true;
		for (size_t i = 0; i < dev->nports; i++)
			port_set(&dev->ports[i], false);
		return 0;
	}
	struct rdma_port *p = rdma_device_port(dev, ev->port);
	if (!p)
		return -ENOENT;
	port_set(p, ev->kind == RDMA_EV_PORT_ACTIVE);
	if (ev->kind == RDMA_EV_PORT_ACTIVE)
		dev->fatal = false;
	return 0;
}

static uint64_t elapsed_ms(const struct recorded_source *rs)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)(now.tv_sec - rs->t0.tv_sec) * 1000 +
	       (uint64_t)((now.tv_nsec - rs->t0.tv_nsec) / 1000000);
}

static void arm(struct recorded_source *rs)
{
	if (rs->next >= rs->nscript)
		return;
	uint64_t now = elapsed_ms(rs), at = rs->script[rs->next].at_ms;
	uint64_t wait = at > now ? at - now : 0;
	struct timeval tv = { .tv_sec = (time_t)(wait / 1000),
		              .tv_usec = (suseconds_t)(wait % 1000 * 1000) };
	evtimer_add(rs->timer, &tv);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct recorded_source *rs = arg;
	(void)fd;
	(void)what;
	uint64_t now = elapsed_ms(rs);
	while (rs->next < rs->nscript && rs->script[rs->next].at_ms <= now) {
		struct rdma_script_event ev = rs->script[rs->next++];
		rdma_script_apply(&rs->inv, &ev);
		log_info("rdma", "recorded event at %u ms: %s port %u %s", ev.at_ms, ev.device,
		         ev.port, rdma_event_name(ev.kind));
		if (rs->cb)
			rs->cb(rs->arg, ev.device, ev.port, ev.kind);
	}
	arm(rs);
}

static char *read_file(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	buf = malloc(SCRIPT_MAX_BYTES + 1);
	if (buf)
		len = fread(buf, 1, SCRIPT_MAX_BYTES + 1, f);
	if (!buf || ferror(f) || len > SCRIPT_MAX_BYTES) {
		snprintf(err, errlen, "%s: %s", path,
		         !buf        ? "out of memory"
		         : ferror(f) ? "read error"
		                     : "larger than 1 MiB");
		free(buf);
		buf = NULL;
	} else {
		buf[len] = '\0';
	}
	fclose(f);
	return buf;
}

static void recorded_close(struct rdma_source *src)
{
	struct recorded_source *rs = (struct recorded_source *)src;
	if (!rs)
		return;
	if (rs->timer)
		event_free(rs->timer);
	rdma_inventory_free(&rs->inv);
	free(rs->script);
	free(rs);
}

static int recorded_open(struct event_base *base, const struct rdma_source_conf *conf,
                         rdma_event_fn cb, void *arg, struct rdma_source **out, char *err,
                         size_t errlen)
{
	struct recorded_source *rs = calloc(1, sizeof(*rs));
	json_error_t jerr;
	json_t *j = NULL;
	char *text = NULL;
	char field[192], why[256];
	int rc = -EINVAL;

	if (!rs) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rs->src.ops = &rdma_recorded_source;
	rs->cb = cb;
	rs->arg = arg;
	if (!conf || !conf->inventory_path) {
		snprintf(err, errlen, "the recorded source needs an inventory file");
		goto fail;
	}
	j = json_load_file(conf->inventory_path, JSON_REJECT_DUPLICATES, &jerr);
	if (!j) {
		snprintf(err, errlen, "%s:%d:%d: %s", conf->inventory_path, jerr.line, jerr.column,
		         jerr.text);
		goto fail;
	}
	if (rdma_inventory_from_json(j, 0, &rs->inv, NULL, field, sizeof(field), why, sizeof(why)) <
	    0) {
		snprintf(err, errlen, "%s: %s%s%s", conf->inventory_path, field,
		         field[0] ? ": " : "", why);
		goto fail;
	}
	if (conf->events_path) {
		text = read_file(conf->events_path, err, errlen);
		if (!text)
			goto fail;
		rc = rdma_script_parse(text, conf->events_path, &rs->inv, &rs->script, &rs->nscript,
		                       err, errlen);
		if (rc < 0)
			goto fail;
	}
	clock_gettime(CLOCK_MONOTONIC, &rs->t0);
	if (base && rs->nscript) {
		rs->timer = evtimer_new(base, on_timer, rs);
		if (!rs->timer) {
			snprintf(err, errlen, "cannot create the event script timer");
			rc = -ENOMEM;
			goto fail;
		}
		arm(rs);
	}
	json_decref(j);
	free(text);
	*out = &rs->src;
	return 0;
fail:
	json_decref(j);
	free(text);
	recorded_close(&rs->src);
	return rc;
}

static int recorded_query(struct rdma_source *src, struct rdma_inventory *out)
{
	struct recorded_source *rs = (struct recorded_source *)src;
	return rdma_inventory_copy(out, &rs->inv);
}

const struct rdma_source_ops rdma_recorded_source = {
	.name = "recorded",
	.open = recorded_open,
	.query = recorded_query,
	.close = recorded_close,
};
