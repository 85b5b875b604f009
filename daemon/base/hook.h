/*
 * Typed notification hooks with any number of listeners, after FRR's
 * lib/hook.h. Whoever has news to give keeps a struct hook per kind of news
 * (in its own object: two stores in one process have two hooks), declares
 * the listener's type once with HOOK_TYPE(), and listeners add and remove
 * themselves with NAME_hook_add() / NAME_hook_del(). NAME_hook_call() calls
 * them in order of priority (lower first; equal ones in the order they were
 * added). A listener may remove itself or another from inside a call: a
 * removed listener is never called again. The event bus (events.h) is for
 * what clients follow; hooks are how the daemon's parts hear each other.
 *
 * Loop thread only.
 */
#ifndef OFCD_HOOK_H
#define OFCD_HOOK_H

#include <stdbool.h>

/* Any listener, stored as this type and cast back to its own before the call. */
typedef void (*hook_fn)(void);

/** One listener of a hook. Owned by the hook. */
struct hook_entry {
	hook_fn fn;              /**< the listener, as its HOOK_TYPE's NAME_hook_fn */
	void *arg;               /**< passed back first */
	int prio;                /**< lower is called first */
	bool dead;               /**< removed during a call: freed when the call ends */
	struct hook_entry *next; /**< next listener in call order */
};

/** The listeners of one kind of news. Zero-initialised is empty. */
struct hook {
	struct hook_entry *head; /**< listeners in call order */
	unsigned calling;        /**< calls running now (a listener may call again) */
	bool dirty;              /**< listeners were removed during a call */
};

/** Adds a listener (fn, arg) at priority prio. Returns 0 or -ENOMEM. */
int hook_add(struct hook *h, hook_fn fn, void *arg, int prio);

/** Removes the listener (fn, arg); nothing when it is not there. */
void hook_del(struct hook *h, hook_fn fn, void *arg);

/** True when nobody listens (a news that costs something to make can be skipped). */
bool hook_empty(const struct hook *h);

/** Removes every listener (the owner is going away). */
void hook_clear(struct hook *h);

/** For NAME_hook_call(): brackets a walk of the listeners. */
void hook_call_begin(struct hook *h);
/** For NAME_hook_call(): ends the walk, freeing listeners removed meanwhile. */
void hook_call_end(struct hook *h);

#define HOOK_UNPAREN(...) __VA_ARGS__

/**
 * Declares the typed functions of a kind of news: NAME_hook_fn, the
 * listener's type, void (*)(void *arg, PARAMS); NAME_hook_add(h, fn, arg),
 * NAME_hook_add_prio(h, fn, arg, prio), NAME_hook_del(h, fn, arg) and
 * NAME_hook_call(h, PARAMS). params and args are parenthesised lists, the
 * declaration and the names: HOOK_TYPE(store_txn_end, (struct store *s, bool
 * committed), (s, committed)). At least one parameter.
 */
#define HOOK_TYPE(name, params, args)                                                              \
	typedef void (*name##_hook_fn)(void *hook_arg, HOOK_UNPAREN params);                       \
	static inline int name##_hook_add_prio(struct hook *h, name##_hook_fn fn, void *arg,       \
	                                       int prio)                                           \
	{                                                                                          \
		return hook_add(h, (hook_fn)fn, arg, prio);                                        \
	}                                                                                          \
	static inline int name##_hook_add(struct hook *h, name##_hook_fn fn, void *arg)            \
	{                                                                                          \
		return hook_add(h, (hook_fn)fn, arg, 0);                                           \
	}                                                                                          \
	static inline void name##_hook_del(struct hook *h, name##_hook_fn fn, void *arg)           \
	{                                                                                          \
		hook_del(h, (hook_fn)fn, arg);                                                     \
	}                                                                                          \
	static inline void name##_hook_call(struct hook *h, HOOK_UNPAREN params)                   \
	{                                                                                          \
		hook_call_begin(h);                                                                \
		for (struct hook_entry *hook_e = h->head; hook_e; hook_e = hook_e->next)           \
			if (!hook_e->dead)                                                         \
				((name##_hook_fn)hook_e->fn)(hook_e->arg, HOOK_UNPAREN args);      \
		hook_call_end(h);                                                                  \
	}

#endif
