/*
 * WAL checkpoints off the loop. SQLite folds the write-ahead log back into
 * the database file once it passes 1000 pages, inside whichever COMMIT
 * crosses that line: at 8,192 servers that is a few megabytes of scattered
 * writes and an fsync, 50 to 250 ms during which the loop (every request,
 * every read-back) waits. Here a thread of its own, with a connection of its
 * own, runs those checkpoints (PASSIVE: it never waits for the loop's
 * connection, nor makes it wait) when the loop's commits say the log has grown.
 *
 * The only thread of the daemon: it touches nothing but its own connection
 * and a flag the loop's connection sets through SQLite's WAL hook.
 */
#ifndef OFCD_STORE_CHECKPOINT_H
#define OFCD_STORE_CHECKPOINT_H

#include <sqlite3.h>

struct store_checkpointer;

/** What the thread's checkpoints did so far. */
struct store_checkpoint_stats {
	unsigned long runs; /**< checkpoints run */
	int log_pages;      /**< the log's length at the last one; -1: it saw no log */
	int copied_pages;   /**< pages of it in the database file after it; -1 likewise */
};

/**
 * Opens a second connection to the database at path and starts the thread;
 * takes over db's WAL hook (so db no longer checkpoints by itself). Loop
 * thread. Returns 0 and the checkpointer in *out, or -errno (then db keeps
 * checkpointing by itself, as SQLite does by default).
 */
int store_checkpointer_start(sqlite3 *db, const char *path, struct store_checkpointer **out);

/**
 * Stops and joins the thread, closes its connection and gives db its own
 * checkpoints back. Loop thread. NULL is fine.
 */
void store_checkpointer_stop(struct store_checkpointer *c);

/** The counts of c's checkpoints so far. Any thread. */
struct store_checkpoint_stats store_checkpointer_stats(struct store_checkpointer *c);

#endif
