/*
 * Named parameter sets of the collective cost model (table cost_param_set, migration 017):
 * what POST /v1/cost/calibrate fits and stores, and the one active set that every selection
 * prices with over the [cost] section (docs/cost-model.md, "Calibration").
 *
 * Event-loop thread only (the store is not shared). JSON returned is a new reference the
 * caller owns; JSON passed in is borrowed.
 */
#ifndef OFCD_COST_SET_H
#define OFCD_COST_SET_H

#include <stdbool.h>

#include <jansson.h>

#include "base/errors.h"
#include "coll.h"
#include "state/store.h"

/**
 * The terms a set holds, from @p: every calibration term ("alpha_us", ...; a per-algorithm
 * launch "launch_us.ring" only when not 0), "relay", and "sync" when not "barrier".
 */
json_t *cost_set_params_json(const struct coll_params *p);

/**
 * Puts the terms of @params (an object as cost_set_params_json() makes; a term it lacks is
 * left alone) into @p. Returns 0, or -EINVAL with *bad naming the first member that is not a
 * term or has no valid value (the result is then partly applied).
 */
int cost_set_params_apply(json_t *params, struct coll_params *p, const char **bad);

/**
 * Puts set @name's terms (NULL: the active set's) into @p. Returns 1 when applied, 0 when
 * there is no such set (or none is active), -EIO when the store fails or the set does not
 * read as valid terms (then @p is left as it was).
 */
int cost_set_load(struct store *s, const char *name, struct coll_params *p);

/**
 * Stores a new set (the caller's transaction). -EEXIST (409 conflict) when @name is taken,
 * -EIO. With @activate it becomes the active set.
 */
int cost_set_add(struct store *s, const char *name, json_t *params, json_t *fit, json_t *provenance,
                 bool activate, struct ofcd_error *e);

/** Makes @name the active set (NULL: none). -ENOENT (404), -EIO. */
int cost_set_activate(struct store *s, const char *name, struct ofcd_error *e);

/** Deletes set @name. -ENOENT (404), -EBUSY (409 in_use) when it is the active set, -EIO. */
int cost_set_remove(struct store *s, const char *name, struct ofcd_error *e);

/**
 * Set @name as JSON: name, active, created, params, provenance and its fit (with every run's
 * residual when @whole, else the fit's summary alone). NULL when there is no such set.
 */
json_t *cost_set_json(struct store *s, const char *name, bool whole);

/** Every set's summary (cost_set_json(..., false)), by name. */
json_t *cost_set_list(struct store *s);

/** Name of the active set into @buf, or "" when none. Returns 0 or -EIO. */
int cost_set_active_name(struct store *s, char *buf, size_t len);

#endif
