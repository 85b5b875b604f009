#include "store_checkpoint.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

/* SQLite's own threshold for an automatic checkpoint, in WAL pages. */
#define CHECKPOINT_PAGES 1000

struct store_checkpointer {
	sqlite3 *main; /* the loop's connection (its WAL hook is ours) */
	sqlite3 *db;   /* the thread's own */
	pthread_t thread;
	pthread_mutex_t mu; /* guards due and stop */
	pthread_cond_t cv;
	bool due;  /* the log passed CHECKPOINT_PAGES since the last checkpoint */
	bool stop; /* the thread must end */
	struct store_checkpoint_stats stats; /* guarded by mu */
};

/* Called by SQLite on the loop thread after each commit, with the log's length. */
static int on_wal(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct store_checkpointer *c = arg;
	(void)db;
	(void)name;
	if (pages >= CHECKPOINT_PAGES) {
		pthread_mutex_lock(&c->mu);
		c->due = true;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
	}
	return SQLITE_OK;
}

static void *run(void *arg)
{
	struct store_checkpointer *c = arg;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->due && !c->stop)
			pthread_cond_wait(&c->cv, &c->mu);
		if (c->stop)
			break;
		c->due = false;
		pthread_mutex_unlock(&c->mu);
		/*
		 * Copies what no reader still needs; what it cannot copy now waits
		 * for the next commit that finds the log long. A failure leaves the
		 * log longer, never the data wrong: nothing to report from here.
		 */
		int log = -1, copied = -1;
		sqlite3_wal_checkpoint_v2(c->db, "main", SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
		pthread_mutex_lock(&c->mu);
		c->stats.runs++;
		c->stats.log_pages = log;
		c->stats.copied_pages = copied;
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int store_checkpointer_start(sqlite3 *db, const char *path, struct store_checkpointer **out)
{
	struct store_checkpointer *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->main = db;
	if (sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		sqlite3_close(c->db);
		free(c);
		return -EIO;
	}
	/*
	 * SQLite (3.40) opens a connection's WAL at its first read, and until then
	 * a checkpoint through it does nothing and says so only with -1 counts:
	 * the log then grew without end (hundreds of megabytes at 8,192 servers),
	 * never restarting. A read of the schema opens it now.
	 */
	if (sqlite3_exec(c->db, "SELECT count(*) FROM sqlite_schema", NULL, NULL, NULL) !=
	    SQLITE_OK) {
		sqlite3_close(c->db);
		free(c);
		return -EIO;
	}
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	if (pthread_create(&c->thread, NULL, run, c) != 0) {
		pthread_cond_destroy(&c->cv);
		pthread_mutex_destroy(&c->mu);
		sqlite3_close(c->db);
		free(c);
		return -EAGAIN;
	}
	sqlite3_wal_hook(db, on_wal, c);
	*out = c;
	return 0;
}

void store_checkpointer_stop(struct store_checkpointer *c)
{
	if (!c)
		return;
	sqlite3_wal_autocheckpoint(c->main, CHECKPOINT_PAGES);
	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->thread, NULL);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	sqlite3_close(c->db);
	free(c);
}

struct store_checkpoint_stats store_checkpointer_stats(struct store_checkpointer *c)
{
	pthread_mutex_lock(&c->mu);
	struct store_checkpoint_stats st = c->stats;
	pthread_mutex_unlock(&c->mu);
	return st;
}
