-- 003: the actual side. Batches sent to OCS units (operations), the
-- cross-connects last read back from each unit, and port link states.

ALTER TABLE fabric ADD COLUMN error TEXT;  -- why the fabric is failed, if it is

CREATE TABLE operation (
	id INTEGER PRIMARY KEY,
	ocs TEXT NOT NULL,                 -- unit name (kept after the unit is deleted)
	trigger TEXT NOT NULL,             -- change | connect | audit | retry | startup
	adds TEXT NOT NULL,                -- JSON [[a, b], ...]
	deletes TEXT NOT NULL,             -- JSON [[a, b], ...]
	nadds INTEGER NOT NULL,
	ndeletes INTEGER NOT NULL,
	status TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'interrupted')),
	error TEXT,
	started TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
	ended TEXT
);

-- Which fabrics' circuits a batch touched (names, so history survives deletion).
CREATE TABLE operation_fabric (
	operation_id INTEGER NOT NULL REFERENCES operation(id) ON DELETE CASCADE,
	fabric TEXT NOT NULL,
	PRIMARY KEY (operation_id, fabric)
);
CREATE INDEX operation_fabric_by_name ON operation_fabric(fabric, operation_id);

CREATE TABLE actual_xc (
	ocs_id INTEGER NOT NULL REFERENCES ocs(id) ON DELETE CASCADE,
	a INTEGER NOT NULL,
	b INTEGER NOT NULL,
	PRIMARY KEY (ocs_id, a, b)
);

CREATE TABLE ocs_port_down (
	ocs_id INTEGER NOT NULL REFERENCES ocs(id) ON DELETE CASCADE,
	port INTEGER NOT NULL,
	PRIMARY KEY (ocs_id, port)
);

-- Pipeline pricing looks circuits up by the pair of server positions.
CREATE INDEX circuit_by_pair ON circuit(fabric_id, a_pos, b_pos);

-- The reconciler reads a unit's desired circuits and its ports' owners after
-- every change: covering indexes answer both without touching the tables.
CREATE INDEX circuit_by_ocs ON circuit(ocs_id, a_ocs_port, b_ocs_port, fabric_id);
CREATE INDEX cable_by_ocs ON cable(ocs_id, ocs_port, server_id);
