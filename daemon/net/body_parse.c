#include "body_parse.h"

#include <stdlib.h>

#include "base/worker.h"

struct body_parser {
	struct worker *w;
};

struct body_job {
	struct worker_job *job;
	char *buf; /* the body, freed once parsed */
	size_t len, flags;
	const struct api_prepare *prepare;
	struct body_parsed r; /* the result, the loop's once delivered */
	body_parsed_fn done;
	void *arg;
};

static void parse(void *arg)
{
	struct body_job *j = arg;
	j->r.value = json_loadb(j->buf, j->len, j->flags, &j->r.err);
	free(j->buf);
	j->buf = NULL;
	if (j->r.value && j->prepare)
		j->r.prepared = j->prepare->read(j->r.value, &j->r.refusal);
}

static void deliver(void *arg)
{
	struct body_job *j = arg;
	j->done(j->arg, &j->r);
	j->r.value = NULL;
	j->r.prepared = NULL;
}

static void job_free(void *arg)
{
	struct body_job *j = arg;
	free(j->buf);
	/* What is prepared may point into the value. */
	if (j->r.prepared)
		j->prepare->free(j->r.prepared);
	json_decref(j->r.value);
	ofcd_error_clear(&j->r.refusal);
	free(j);
}

struct body_parser *body_parser_new(struct event_base *base)
{
	struct body_parser *p = calloc(1, sizeof(*p));
	if (p && !(p->w = worker_new(base, "ofcd-bodies", 0))) {
		free(p);
		p = NULL;
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
	*j = (struct body_job){
		.buf = buf, .len = len, .flags = flags, .prepare = prepare, .done = done, .arg = arg
	};
	if (!(j->job = worker_submit(p->w, parse, deliver, job_free, j))) {
		free(j); /* buf is still the caller's */
		return NULL;
	}
	return j;
}

void body_parser_cancel(struct body_job *j)
{
	worker_cancel(j->job);
}

void body_parser_free(struct body_parser *p)
{
	if (!p)
		return;
	worker_free(p->w);
	free(p);
}
