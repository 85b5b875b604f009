/*
 * Logging to stderr with a level and a subsystem tag, so journald keeps both.
 * Under systemd (JOURNAL_STREAM set) lines carry the "<N>" syslog priority
 * prefix that journald parses; in a terminal they carry a timestamp instead.
 * Loop thread only (the level is a plain global).
 */
#ifndef OFCD_LOG_H
#define OFCD_LOG_H

#include "cfgtab.h"

/** Levels, most severe first; values are syslog priorities. */
enum log_level {
	LOG_LVL_ERROR = 3,
	LOG_LVL_WARN = 4,
	LOG_LVL_INFO = 6,
	LOG_LVL_DEBUG = 7,
};

/** Sets the most verbose level that is printed. */
void log_set_level(enum log_level level);

/** Current level. */
enum log_level log_get_level(void);

/** The levels by name ("error", "warn", "info", "debug"), for [log] level rows of config tables. */
extern const struct cfgtab_choice log_level_choices[];

/** Name of a level ("warn"...). */
const char *log_level_name(enum log_level level);

/** Prints one line "level subsystem: message". Never pass secrets. */
void log_msg(enum log_level level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_error(sub, ...) log_msg(LOG_LVL_ERROR, sub, __VA_ARGS__)
#define log_warn(sub, ...)  log_msg(LOG_LVL_WARN, sub, __VA_ARGS__)
#define log_info(sub, ...)  log_msg(LOG_LVL_INFO, sub, __VA_ARGS__)
#define log_debug(sub, ...) log_msg(LOG_LVL_DEBUG, sub, __VA_ARGS__)

#endif
