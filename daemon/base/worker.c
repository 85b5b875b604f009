#include "worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"

struct worker_job {
	struct worker *w;
	worker_work_fn work;
	worker_done_fn done;
	worker_free_fn free_arg;
	void *arg;
	bool cancelled; /* loop thread only */
	bool bounded;   /* counted in in_hand (not worker_free_later()'s) */
	struct worker_job *next;
};

/* A queue of jobs, oldest first. */
struct job_queue {
	struct worker_job *head, *tail;
};

struct worker {
	const char *name;
	pthread_t thread;
	pthread_mutex_t mu; /* guards queued, finished and stop */
	pthread_cond_t cv;
	struct job_queue queued, finished;
	bool stop;
	size_t in_hand, max_queued; /* loop thread only: bounded jobs not yet delivered */
	int efd;                    /* written by the worker once a job is finished */
	struct event *ev;           /* reads efd on the loop */
};

static void push(struct job_queue *q, struct worker_job *j)
{
	j->next = NULL;
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
}

static struct worker_job *pop(struct job_queue *q)
{
	struct worker_job *j = q->head;
	if (j) {
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
	}
	return j;
}

/* Takes j out of q; false when it is not there. */
static bool unlink_job(struct job_queue *q, struct worker_job *j)
{
	for (struct worker_job **at = &q->head, *prev = NULL; *at; prev = *at, at = &(*at)->next)
		if (*at == j) {
			*at = j->next;
			if (q->tail == j)
				q->tail = prev;
			return true;
		}
	return false;
}

static void job_free(struct worker_job *j)
{
	if (j->bounded)
		j->w->in_hand--;
	if (j->free_arg)
		j->free_arg(j->arg);
	free(j);
}

/* worker_free_later()'s work, and its free_arg should the work never run. */
static void free_here(void *p)
{
	free(p);
}

static void *run(void *arg)
{
	struct worker *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->queued.head && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->stop)
			break;
		struct worker_job *j = pop(&w->queued);
		pthread_mutex_unlock(&w->mu);
		j->work(j->arg);
		if (j->work == free_here)
			j->arg = NULL; /* freed here: its free_arg has nothing left to free */
		pthread_mutex_lock(&w->mu);
		push(&w->finished, j);
		uint64_t one = 1;
		/* Only a counter at its maximum refuses, and then the loop has a wake-up due. */
		ssize_t n = write(w->efd, &one, sizeof(one));
		(void)n;
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* On the loop: every finished job to its requester, in the order they were given. */
static void on_finished(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	uint64_t n;
	(void)what;
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_error("worker", "%s: cannot read the worker's wake-up: %m", w->name);
	pthread_mutex_lock(&w->mu);
	struct job_queue q = w->finished;
	w->finished = (struct job_queue){ 0 };
	pthread_mutex_unlock(&w->mu);
	for (struct worker_job *j; (j = pop(&q));) {
		if (!j->cancelled && j->done)
			j->done(j->arg);
		job_free(j);
	}
}

struct worker *worker_new(struct event_base *base, const char *name, size_t max_queued)
{
	struct worker *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->name = name;
	w->max_queued = max_queued;
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	w->ev = w->efd >= 0 ? event_new(base, w->efd, EV_READ | EV_PERSIST, on_finished, w) : NULL;
	if (!w->ev || event_add(w->ev, NULL) < 0) {
		if (w->ev)
			event_free(w->ev);
		if (w->efd >= 0)
			close(w->efd);
		free(w);
		return NULL;
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (pthread_create(&w->thread, NULL, run, w) != 0) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		event_free(w->ev);
		close(w->efd);
		free(w);
		return NULL;
	}
	/* At most 15 characters: longer names are refused, and the thread keeps its own. */
	pthread_setname_np(w->thread, name);
	return w;
}

/* Queues a job; bounded: refused past max_queued. */
static struct worker_job *submit(struct worker *w, bool bounded, worker_work_fn work,
                                 worker_done_fn done, worker_free_fn free_arg, void *arg)
{
	if (bounded && w->max_queued && w->in_hand >= w->max_queued)
		return NULL;
	struct worker_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	*j = (struct worker_job){ .w = w,
		                  .work = work,
		                  .done = done,
		                  .free_arg = free_arg,
		                  .arg = arg,
		                  .bounded = bounded };
	w->in_hand += bounded;
	pthread_mutex_lock(&w->mu);
	push(&w->queued, j);
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return j;
}

struct worker_job *worker_submit(struct worker *w, worker_work_fn work, worker_done_fn done,
                                 worker_free_fn free_arg, void *arg)
{
	return submit(w, true, work, done, free_arg, arg);
}

void worker_free_later(struct worker *w, void *p)
{
	if (!submit(w, false, free_here, NULL, free_here, p))
		free(p);
}

void worker_cancel(struct worker_job *j)
{
	struct worker *w = j->w;
	pthread_mutex_lock(&w->mu);
	bool waiting = unlink_job(&w->queued, j);
	pthread_mutex_unlock(&w->mu);
	if (waiting)
		job_free(j); /* never started */
	else
		j->cancelled = true; /* running or finished: freed on delivery */
}

size_t worker_queued(const struct worker *w)
{
	return w->in_hand;
}

void worker_free(struct worker *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	for (struct worker_job *j; (j = pop(&w->queued)) || (j = pop(&w->finished));)
		job_free(j);
	event_free(w->ev);
	close(w->efd);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
