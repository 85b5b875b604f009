#include "events.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "decimal.h"

struct events_sub {
	unsigned mask;
	events_fn fn;
	void *arg;
	bool gone; /* unsubscribed during a delivery: freed after it */
	struct events_sub *next;
};

/* A public event kept for replay. */
struct kept {
	enum events_kind kind;
	char instance[EVENTS_INSTANCE_MAX];
	unsigned long long id;
	json_t *data; /* reference held by the ring */
};

struct events {
	struct events_sub *subs; /* in subscription order */
	char instance[EVENTS_INSTANCE_MAX];
	struct kept ring[EVENTS_HISTORY]; /* the n-th event kept lives at n % EVENTS_HISTORY */
	unsigned long long kept;          /* events kept so far */
	unsigned long long next_id;
	unsigned own;   /* kinds published without an id (events_set_own) */
	int delivering; /* > 0 while callbacks run: unsubscribing only marks */
	bool has_gone;
};

/* What subscribers see, with the lazily built JSON text. */
struct msg {
	struct events_msg pub;
	char *json;
};

static const char *const kind_names[EVENTS_KIND_COUNT] = {
	[EVENTS_FABRIC_STATE] = "fabric_state",
	[EVENTS_OPERATION] = "operation",
	[EVENTS_OCS_CONNECTION] = "ocs_connection",
	[EVENTS_PORT_STATE] = "port_state",
	[EVENTS_DRIFT] = "drift",
	[EVENTS_ISOLATION_VIOLATION] = "isolation_violation",
	[EVENTS_DEVICE_STATE] = "device_state",
	[EVENTS_CLUSTER_ROLE] = "cluster_role",
	[EVENTS_FABRIC] = "fabric",
	[EVENTS_TOPOLOGY] = "topology",
	[EVENTS_SETTLED] = "settled",
};

const char *events_kind_name(enum events_kind kind)
{
	return (unsigned)kind < EVENTS_KIND_COUNT ? kind_names[kind] : "unknown";
}

int events_new(struct events **out)
{
	struct events *ev = calloc(1, sizeof(*ev));
	struct timespec ts;
	if (!ev)
		return -ENOMEM;
	ev->next_id = 1;
	/* Nanoseconds and the pid: two runs never share it, even in a crash loop. */
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(ev->instance, sizeof(ev->instance), "%llx",
	         (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec +
	             ((unsigned long long)getpid() << 48));
	*out = ev;
	return 0;
}

const char *events_instance(const struct events *ev)
{
	return ev->instance;
}

void events_set_instance(struct events *ev, const char *instance)
{
	snprintf(ev->instance, sizeof(ev->instance), "%s", instance);
	ev->next_id = 1;
}

void events_set_own(struct events *ev, unsigned mask)
{
	ev->own = mask;
}

enum events_kind events_kind_of(const char *name)
{
	for (int k = 0; k < EVENTS_KIND_COUNT; k++)
		if (strcmp(kind_names[k], name) == 0)
			return (enum events_kind)k;
	return EVENTS_KIND_COUNT;
}

int events_replay(struct events *ev, const char *last, unsigned mask, events_fn fn, void *arg)
{
	/* "INSTANCE-ID": the instance is hex or "g" and digits, never a '-'. */
	const char *dash = strrchr(last, '-');
	uint64_t after;
	if (!dash || dash == last || (size_t)(dash - last) >= EVENTS_INSTANCE_MAX ||
	    !decimal_u64(dash + 1, UINT64_MAX, &after))
		return -ERANGE;
	unsigned long long oldest = ev->kept > EVENTS_HISTORY ? ev->kept - EVENTS_HISTORY : 0;
	unsigned long long n = ev->kept;
	/* The newest first: a client that reconnects is usually close behind. */
	while (n > oldest) {
		const struct kept *k = &ev->ring[(n - 1) % EVENTS_HISTORY];
		if (k->id == after && strlen(k->instance) == (size_t)(dash - last) &&
		    strncmp(k->instance, last, (size_t)(dash - last)) == 0)
			break;
		n--;
	}
	if (n == oldest)
		return -ERANGE;
	for (; n < ev->kept; n++) {
		struct kept *k = &ev->ring[n % EVENTS_HISTORY];
		if (!(mask & EVENTS_BIT(k->kind)))
			continue;
		struct msg m = { .pub = { .kind = k->kind,
			                  .name = events_kind_name(k->kind),
			                  .id = k->id,
			                  .instance = k->instance,
			                  .data = k->data } };
		fn(arg, &m.pub);
		free(m.json);
	}
	return 0;
}

void events_free(struct events *ev)
{
	if (!ev)
		return;
	while (ev->subs) {
		struct events_sub *s = ev->subs;
		ev->subs = s->next;
		free(s);
	}
	for (size_t i = 0; i < EVENTS_HISTORY; i++)
		json_decref(ev->ring[i].data);
	free(ev);
}

struct events_sub *events_subscribe(struct events *ev, unsigned mask, events_fn fn, void *arg)
{
	struct events_sub *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->mask = mask;
	s->fn = fn;
	s->arg = arg;
	struct events_sub **p = &ev->subs;
	while (*p)
		p = &(*p)->next;
	*p = s;
	return s;
}

static void sweep(struct events *ev)
{
	for (struct events_sub **p = &ev->subs; *p;) {
		struct events_sub *s = *p;
		if (s->gone) {
			*p = s->next;
			free(s);
		} else {
			p = &s->next;
		}
	}
	ev->has_gone = false;
}

void events_unsubscribe(struct events *ev, struct events_sub *sub)
{
	if (!sub)
		return;
	sub->gone = true;
	ev->has_gone = true;
	if (!ev->delivering)
		sweep(ev);
}

const char *events_msg_json(const struct events_msg *msg)
{
	struct msg *m = (struct msg *)msg;
	if (!m->json)
		m->json = json_dumps(m->pub.data, JSON_COMPACT);
	return m->json ? m->json : "{}";
}

static void add_time(json_t *data)
{
	char when[64];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
	         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	json_object_set_new(data, "time", json_string(when));
}

/* Keeps an event with an id for replay and delivers it; data stolen. */
static void deliver(struct events *ev, enum events_kind kind, const char *instance,
                    unsigned long long id, json_t *data)
{
	struct msg m = { .pub = { .kind = kind,
		                  .name = events_kind_name(kind),
		                  .id = id,
		                  .instance = id ? instance : "",
		                  .data = data } };
	if (id) {
		struct kept *k = &ev->ring[ev->kept++ % EVENTS_HISTORY];
		json_decref(k->data);
		*k = (struct kept){ .kind = kind, .id = id, .data = json_incref(data) };
		snprintf(k->instance, sizeof(k->instance), "%s", instance);
		m.pub.instance = k->instance;
	}
	ev->delivering++;
	for (struct events_sub *s = ev->subs; s; s = s->next)
		if (!s->gone && s->mask & EVENTS_BIT(kind))
			s->fn(s->arg, &m.pub);
	ev->delivering--;
	if (!ev->delivering && ev->has_gone)
		sweep(ev);
	free(m.json);
	json_decref(data);
}

void events_publish(struct events *ev, enum events_kind kind, json_t *data)
{
	if (!data)
		data = json_object();
	add_time(data);
	/* Internal and own kinds take no id and are not kept: a stream's ids stay without gaps. */
	bool numbered = EVENTS_BIT(kind) & EVENTS_PUBLIC & ~ev->own;
	deliver(ev, kind, ev->instance, numbered ? ev->next_id++ : 0, data);
}

void events_publish_as(struct events *ev, enum events_kind kind, const char *instance,
                       unsigned long long id, json_t *data)
{
	deliver(ev, kind, instance, id, data ? data : json_object());
}
