#include "console.h"

#include <string.h>

const struct console_file *console_find(const struct console_file *table, const char *name)
{
	for (const struct console_file *f = table; f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}
