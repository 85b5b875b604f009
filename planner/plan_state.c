#include "plan_state.h"

#include <errno.h>
#include <string.h>

static const char *const state_names[PLAN_STATE__COUNT] = {
	[PLAN_STATE_PENDING] = "pending", [PLAN_STATE_APPLYING] = "applying",
	[PLAN_STATE_APPLIED] = "applied", [PLAN_STATE_DEGRADED] = "degraded",
	[PLAN_STATE_FAILED] = "failed",
};

enum plan_state plan_state_next(const struct plan_state_input *in)
{
	if (in->all_held)
		return in->missing_pairs ? PLAN_STATE_DEGRADED : PLAN_STATE_APPLIED;
	if (in->unit_failing)
		return PLAN_STATE_FAILED;
	/* Nothing sent yet stays pending; anything else is on its way. */
	if (in->current == PLAN_STATE_PENDING && !in->busy)
		return PLAN_STATE_PENDING;
	return PLAN_STATE_APPLYING;
}

const char *plan_state_name(enum plan_state s)
{
	return (unsigned)s < PLAN_STATE__COUNT ? state_names[s] : "?";
}

int plan_state_parse(const char *name, enum plan_state *out)
{
	for (int i = 0; i < PLAN_STATE__COUNT; i++) {
		if (strcmp(name, state_names[i]) == 0) {
			*out = (enum plan_state)i;
			return 0;
		}
	}
	return -EINVAL;
}

bool plan_state_final(enum plan_state s)
{
	return s == PLAN_STATE_APPLIED || s == PLAN_STATE_DEGRADED || s == PLAN_STATE_FAILED;
}
