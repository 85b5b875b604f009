#include "body_parse.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"

struct body_job {
	struct body_parser *p;
	char *buf; /* the body, freed once parsed */
	size_t len, flags;
	const struct api_prepare *prepare;
	struct body_parsed r; /* the result, the loop's once delivered */
	body_parsed_fn done;
	void *arg;
	bool cancelled; /* loop thread only */
	struct body_job *next;
};

/* A queue of jobs, oldest first. */
struct job_queue {
	struct body_job *head, *tail;
};

struct body_parser {
	pthread_t thread;
	pthread_mutex_t mu; /* guards queued, finished and stop */
	pthread_cond_t cv;
	struct job_queue queued, finished;
	bool stop;
	int efd;          /* written by the worker once a job is finished */
	struct event *ev; /* reads efd on the loop */
};

static void push(struct job_queue *q, struct body_job *j)
{
	j->next = NULL;
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
}

static struct body_job *pop(struct job_queue *q)
{
	struct body_job *j = q->head;
	if (j) {
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
	}
	return j;
}

static void job_free(struct body_job *j)
{
	free(j->buf);
	/* What is prepared may point into the value. */
	if (j->r.prepared)
		j->prepare->free(j->r.prepared);
	json_decref(j->r.value);
	ofcd_error_clear(&j->r.refusal);
	free(j);
}

static void *run(void *arg)
{
	struct body_parser *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->queued.head && !p->stop)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop)
			break;
		struct body_job *j = pop(&p->queued);
		pthread_mutex_unlock(&p->mu);
		j->r.value = json_loadb(j->buf, j->len, j->flags, &j->r.err);
		free(j->buf);
		j->buf = NULL;
		if (j->r.value && j->prepare)
			j->r.prepared = j->prepare->read(j->r.value, &j->r.refusal);
		pthread_mutex_lock(&p->mu);
		push(&p->finished, j);
		uint64_t one = 1;
		/* Only a counter at its maximum refuses, and then the loop has a wake-up due. */
		ssize_t n = write(p->efd, &one, sizeof(one));
		(void)n;
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* On the loop: every finished job to its requester, in the order they were given. */
static void on_finished(evutil_socket_t fd, short what, void *arg)
{
	struct body_parser *p = arg;
	uint64_t n;
	(void)what;
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_error("http", "cannot read the parser's wake-up: %m");
	pthread_mutex_lock(&p->mu);
	struct job_queue q = p->finished;
	p->finished = (struct job_queue){ 0 };
	pthread_mutex_unlock(&p->mu);
	for (struct body_job *j; (j = pop(&q));) {
		if (!j->cancelled) {
			j->done(j->arg, &j->r);
			j->r.value = NULL;
			j->r.prepared = NULL;
		}
		job_free(j);
	}
}

struct body_parser *body_parser_new(struct event_base *base)
{
	struct body_parser *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	p->ev = p->efd >= 0 ? event_new(base, p->efd, EV_READ | EV_PERSIST, on_finished, p) : NULL;
	if (!p->ev || event_add(p->ev, NULL) < 0) {
		if (p->ev)
			event_free(p->ev);
		if (p->efd >= 0)
			close(p->efd);
		free(p);
		return NULL;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	if (pthread_create(&p->thread, NULL, run, p) != 0) {
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		event_free(p->ev);
		close(p->efd);
		free(p);
		return NULL;
	}
	return p;
}

struct body_job *body_parser_submit(struct body_parser *p, char *buf, size_t len, size_t flags,
                                    const struct api_prepare *prepare, body_parsed_fn done,
                                    void *arg)
{
	struct body_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	*j = (struct body_job){ .p = p,
		                .buf = buf,
		                .len = len,
		                .flags = flags,
		                .prepare = prepare,
		                .done = done,
		                .arg = arg };
	pthread_mutex_lock(&p->mu);
	push(&p->queued, j);
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return j;
}

void body_parser_cancel(struct body_job *j)
{
	struct body_parser *p = j->p;
	bool waiting = false;
	pthread_mutex_lock(&p->mu);
	/* Not parsed yet: not parsed at all. */
	for (struct body_job **at = &p->queued.head, *prev = NULL; *at;
	     prev = *at, at = &(*at)->next)
		if (*at == j) {
			*at = j->next;
			if (p->queued.tail == j)
				p->queued.tail = prev;
			waiting = true;
			break;
		}
	pthread_mutex_unlock(&p->mu);
	if (waiting)
		job_free(j);
	else
		j->cancelled = true;
}

void body_parser_free(struct body_parser *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	for (struct body_job *j; (j = pop(&p->queued)) || (j = pop(&p->finished));)
		job_free(j);
	event_free(p->ev);
	close(p->efd);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}
