/* The planner's refusals (plan_internal.h): one line into the caller's buffer. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "plan_internal.h"

int plan_refuse(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (why && len) {
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}
