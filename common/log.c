#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static enum log_level log_level = LOG_LVL_INFO;

const struct cfgtab_choice log_level_choices[] = {
	{ "error", LOG_LVL_ERROR },
	{ "warn", LOG_LVL_WARN },
	{ "info", LOG_LVL_INFO },
	{ "debug", LOG_LVL_DEBUG },
	{ NULL, 0 },
};

void log_set_level(enum log_level level)
{
	log_level = level;
}

enum log_level log_get_level(void)
{
	return log_level;
}

const char *log_level_name(enum log_level level)
{
	for (size_t i = 0; log_level_choices[i].name; i++)
		if (log_level_choices[i].value == (int)level)
			return log_level_choices[i].name;
	return "?";
}

void log_msg(enum log_level level, const char *subsys, const char *fmt, ...)
{
	if (level > log_level)
		return;

	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	/* journald reads the priority from a "<N>" prefix; a terminal wants a time. */
	if (getenv("JOURNAL_STREAM")) {
		fprintf(stderr, "<%d>%s %s: %s\n", (int)level, log_level_name(level), subsys, msg);
		return;
	}
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s: %s\n", tm.tm_year + 1900,
	        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
	        log_level_name(level), subsys, msg);
}
