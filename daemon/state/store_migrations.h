/* The SQL migrations compiled into the binary (build/gen/migrations.c, from schema/NNN_*.sql). */
#ifndef OFCD_STORE_MIGRATIONS_H
#define OFCD_STORE_MIGRATIONS_H

/** One migration: applied once, in order, when PRAGMA user_version < version. */
struct store_migration {
	int version;      /**< NNN of the file name; versions run 1, 2, 3, ... */
	const char *name; /**< file name, for logs */
	const char *sql;  /**< the whole file */
};

/** All migrations, in version order. */
extern const struct store_migration store_migrations[];
/** Number of entries in store_migrations (the schema version this binary writes). */
extern const int store_migrations_count;

#endif
