/*
 * Every route handler, declared for the route table (routes.c). Each handler
 * is documented in docs/api.md; they run on the loop thread.
 */
#ifndef OFCD_API_HANDLERS_H
#define OFCD_API_HANDLERS_H

#include "api.h"

/* api_core.c */
void api_health(struct api_req *req);
void api_metrics(struct api_req *req);

#endif
