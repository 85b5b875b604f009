#include "hook.h"

#include <errno.h>
#include <stdlib.h>

int hook_add(struct hook *h, hook_fn fn, void *arg, int prio)
{
	struct hook_entry *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->fn = fn;
	e->arg = arg;
	e->prio = prio;
	struct hook_entry **pp = &h->head;
	while (*pp && (*pp)->prio <= prio)
		pp = &(*pp)->next;
	e->next = *pp;
	*pp = e;
	return 0;
}

/* Frees the entries removed while a call walked the list. */
static void sweep(struct hook *h)
{
	for (struct hook_entry **pp = &h->head; *pp;) {
		struct hook_entry *e = *pp;
		if (e->dead) {
			*pp = e->next;
			free(e);
		} else {
			pp = &e->next;
		}
	}
	h->dirty = false;
}

void hook_del(struct hook *h, hook_fn fn, void *arg)
{
	for (struct hook_entry *e = h->head; e; e = e->next) {
		if (e->dead || e->fn != fn || e->arg != arg)
			continue;
		e->dead = true;
		h->dirty = true;
		break;
	}
	/* A walk in progress holds a pointer into the list: it frees the entry at its end. */
	if (!h->calling)
		sweep(h);
}

bool hook_empty(const struct hook *h)
{
	for (const struct hook_entry *e = h->head; e; e = e->next)
		if (!e->dead)
			return false;
	return true;
}

void hook_clear(struct hook *h)
{
	for (struct hook_entry *e = h->head; e; e = e->next)
		e->dead = true;
	h->dirty = true;
	if (!h->calling)
		sweep(h);
}

void hook_call_begin(struct hook *h)
{
	h->calling++;
}

void hook_call_end(struct hook *h)
{
	if (--h->calling == 0 && h->dirty)
		sweep(h);
}
