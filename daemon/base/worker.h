/*
 * A thread that does work too long for one loop turn, in the order it is
 * given, and hands each result back on the loop. Reading a 3 MB body or
 * pricing a 4,096-stage pipeline takes hundreds of milliseconds; on the loop
 * that would hold every client, the units and a leader's lease renewals. A
 * job's work touches nothing but its own argument: copies of what it reads,
 * never the store, the desired state, metrics or the event bus (log_*() is
 * fine: each line is one locked write). jansson is safe on values no other
 * thread holds once its hash seed is set, which the loop's first value does.
 */
#ifndef OFCD_WORKER_H
#define OFCD_WORKER_H

#include <stddef.h>

#include <event2/event.h>

struct worker;
struct worker_job;

/** A job's work, on the worker thread: arg is the job's alone while it runs. */
typedef void (*worker_work_fn)(void *arg);

/** A finished job's delivery, on the loop thread; arg is freed (free_arg) after it returns. */
typedef void (*worker_done_fn)(void *arg);

/** Frees a job's arg, on the loop thread (or in worker_free()); NULL: nothing to free. */
typedef void (*worker_free_fn)(void *arg);

/**
 * Starts a worker whose results are delivered on base, after at most
 * max_queued jobs waiting or running (0: no bound). name (static) names the
 * thread for top -H and log lines. NULL when it cannot start. Loop thread.
 */
struct worker *worker_new(struct event_base *base, const char *name, size_t max_queued);

/**
 * Queues work(arg); once it has run, done(arg) then free_arg(arg) on the loop
 * thread. Returns the job, for worker_cancel() until done is called, or NULL
 * when it was not queued (out of memory, or max_queued jobs already in hand):
 * arg is then still the caller's. Loop thread.
 */
struct worker_job *worker_submit(struct worker *w, worker_work_fn work, worker_done_fn done,
                                 worker_free_fn free_arg, void *arg);

/**
 * The job's requester is gone: done is never called, and free_arg(arg) is,
 * at once when the work has not started, else once it ends. Loop thread.
 */
void worker_cancel(struct worker_job *j);

/**
 * Frees p (malloc'd on the worker's thread) on that thread, after the jobs
 * before it. glibc gathers an arena's small free blocks when a large block
 * is freed into it: a pipeline's 7 MB reply, freed on the loop into the
 * arena of the worker that wrote it, held the loop 50-100 ms. Not counted
 * against max_queued; freed at once when there is no memory. Loop thread.
 */
void worker_free_later(struct worker *w, void *p);

/** Jobs waiting or running now, worker_free_later()'s apart. Loop thread. */
size_t worker_queued(const struct worker *w);

/**
 * Waits for the running job, then stops the thread and frees every job left
 * with free_arg, never done. NULL is fine. Loop thread.
 */
void worker_free(struct worker *w);

#endif
