/*
 * Stable names of the cost model's enums. They are part of the REST API and
 * the configuration: never rename one, only add.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "cost.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const char *const method_names[] = {
	[COST_METHOD_INTRA_SERVER] = "intra-server",
	[COST_METHOD_SEND_BROADCAST] = "send-broadcast",
	[COST_METHOD_P2P_RELAY] = "p2p-relay",
	[COST_METHOD_ALLGATHER_SEND_SCATTER] = "allgather-send-scatter",
	[COST_METHOD_SWITCH_RELAY] = "switch-relay",
};

static const char *const policy_names[] = {
	[COST_POLICY_MIN_COST] = "min-cost",
	[COST_POLICY_PATENT] = "patent",
};

static const char *const aggregation_names[] = {
	[COST_AGG_ALLREDUCE] = "allreduce",
	[COST_AGG_ALLGATHER] = "allgather",
	[COST_AGG_NONE] = "none",
};

static const char *const intra_names[] = {
	[COST_INTRA_FULL_MESH] = "full-mesh",
	[COST_INTRA_TWO_GROUPS] = "two-groups",
};

static const char *const scope_names[] = {
	[COST_SCOPE_SOURCE] = "source",
	[COST_SCOPE_INTER] = "inter",
	[COST_SCOPE_TARGET] = "target",
};

static const char *const op_names[] = {
	[COST_OP_SEND] = "send",
	[COST_OP_BROADCAST] = "broadcast",
	[COST_OP_REDUCE] = "reduce",
	[COST_OP_GATHER] = "gather",
	[COST_OP_SCATTER] = "scatter",
	[COST_OP_ALLGATHER] = "allgather",
	[COST_OP_REDUCE_SCATTER] = "reduce-scatter",
	[COST_OP_P2P_RECV] = "p2p-recv",
	[COST_OP_P2P_SEND] = "p2p-send",
};

/* Spelled out so that callers get a static string without formatting. */
#define OPERATOR_ROW(o)                                                                            \
	{                                                                                          \
		o "@source", o "@inter", o "@target"                                               \
	}
static const char *const operator_names[][3] = {
	[COST_OP_SEND] = OPERATOR_ROW("send"),
	[COST_OP_BROADCAST] = OPERATOR_ROW("broadcast"),
	[COST_OP_REDUCE] = OPERATOR_ROW("reduce"),
	[COST_OP_GATHER] = OPERATOR_ROW("gather"),
	[COST_OP_SCATTER] = OPERATOR_ROW("scatter"),
	[COST_OP_ALLGATHER] = OPERATOR_ROW("allgather"),
	[COST_OP_REDUCE_SCATTER] = OPERATOR_ROW("reduce-scatter"),
	[COST_OP_P2P_RECV] = OPERATOR_ROW("p2p-recv"),
	[COST_OP_P2P_SEND] = OPERATOR_ROW("p2p-send"),
};

_Static_assert(ARRAY_SIZE(method_names) == COST_METHOD_COUNT, "a method has no name");
_Static_assert(ARRAY_SIZE(operator_names) == ARRAY_SIZE(op_names), "an operator has no row");
_Static_assert(ARRAY_SIZE(scope_names) == 3, "operator rows assume three scopes");

static const char *name_of(const char *const *names, size_t count, unsigned v)
{
	return v < count ? names[v] : NULL;
}

/* Returns the index of name in names, or -EINVAL. */
static int index_of(const char *const *names, size_t count, const char *name)
{
	size_t i;

	if (!name)
		return -EINVAL;
	for (i = 0; i < count; i++)
		if (strcmp(names[i], name) == 0)
			return (int)i;
	return -EINVAL;
}

const char *cost_method_name(enum cost_method m)
{
	return name_of(method_names, ARRAY_SIZE(method_names), (unsigned)m);
}

int cost_parse_method(const char *name, enum cost_method *out)
{
	int i = index_of(method_names, ARRAY_SIZE(method_names), name);

	if (i < 0)
		return i;
	*out = (enum cost_method)i;
	return 0;
}

const char *cost_policy_name(enum cost_policy p)
{
	return name_of(policy_names, ARRAY_SIZE(policy_names), (unsigned)p);
}

int cost_parse_policy(const char *name, enum cost_policy *out)
{
	int i = index_of(policy_names, ARRAY_SIZE(policy_names), name);

	if (i < 0)
		return i;
	*out = (enum cost_policy)i;
	return 0;
}

const char *cost_aggregation_name(enum cost_aggregation a)
{
	return name_of(aggregation_names, ARRAY_SIZE(aggregation_names), (unsigned)a);
}

int cost_parse_aggregation(const char *name, enum cost_aggregation *out)
{
	int i = index_of(aggregation_names, ARRAY_SIZE(aggregation_names), name);

	if (i < 0)
		return i;
	*out = (enum cost_aggregation)i;
	return 0;
}

const char *cost_intra_name(enum cost_intra i)
{
	return name_of(intra_names, ARRAY_SIZE(intra_names), (unsigned)i);
}

int cost_parse_intra(const char *name, enum cost_intra *out)
{
	int i = index_of(intra_names, ARRAY_SIZE(intra_names), name);

	if (i < 0)
		return i;
	*out = (enum cost_intra)i;
	return 0;
}

const char *cost_scope_name(enum cost_scope s)
{
	return name_of(scope_names, ARRAY_SIZE(scope_names), (unsigned)s);
}

const char *cost_op_name(enum cost_op op)
{
	return name_of(op_names, ARRAY_SIZE(op_names), (unsigned)op);
}

const char *cost_operator_name(enum cost_op op, enum cost_scope scope)
{
	if ((unsigned)op >= ARRAY_SIZE(operator_names) ||
	    (unsigned)scope >= ARRAY_SIZE(scope_names))
		return NULL;
	return operator_names[op][scope];
}
