-- 017: named parameter sets of the collective cost model, fitted by
-- POST /v1/cost/calibrate from measured runs (daemon/domain/cost_set.c). At
-- most one is active: selections price with it over the [cost] section.
-- params: JSON object of the terms (docs/cost-model.md, "Calibration").
-- fit: the fit's quality, each term's state and every run's residual.
-- provenance: where the runs came from, as the client said.
-- At most one row has active = 1: cost_set_activate() clears the others in the
-- same transaction. No unique index says so, because a cluster member applies a
-- changeset's rows in no set order and would meet the new active row first.

CREATE TABLE cost_param_set (
	name TEXT PRIMARY KEY NOT NULL,
	params TEXT NOT NULL,
	fit TEXT NOT NULL,
	provenance TEXT NOT NULL,
	active INTEGER NOT NULL DEFAULT 0 CHECK (active IN (0, 1)),
	created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
