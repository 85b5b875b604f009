/*
 * The RDMA source registry: the one module that knows every source, so the
 * model (rdma.c) that the sources build on knows none of them.
 */
#include "rdma.h"

#include <string.h>

const struct rdma_source_ops *rdma_source_find(const char *name)
{
	static const struct rdma_source_ops *const sources[] = { &rdma_verbs_source,
		                                                 &rdma_recorded_source };
	for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++)
		if (strcmp(sources[i]->name, name) == 0)
			return sources[i];
	return NULL;
}
