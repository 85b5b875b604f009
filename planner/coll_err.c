/*
 * The error setter every planner/coll*.c file uses; a module of its own below all of them, so
 * that using it makes no link cycle.
 */
#include "coll_internal.h"

#include <stdarg.h>
#include <stdio.h>

void coll_err_set(struct coll_error *err, const char *field, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	err->field = field;
	va_start(ap, fmt);
	vsnprintf(err->reason, sizeof(err->reason), fmt, ap);
	va_end(ap);
}
