-- 005: RDMA inventories reported by the host agents (ofcd agent).

-- The last inventory of each server, as its agent (or an admin) sent it.
CREATE TABLE inventory (
	server_id INTEGER PRIMARY KEY REFERENCES server(id) ON DELETE CASCADE,
	body TEXT NOT NULL,                -- JSON {"rdma", "reason", "devices"}, as validated
	heartbeat TEXT NOT NULL,           -- UTC time of the report, ISO 8601 with milliseconds
	interval INTEGER NOT NULL CHECK (interval BETWEEN 1 AND 86400)  -- the agent's heartbeat, s
);

-- Devices the last inventory showed down or missing. A report changes a device's state
-- only when it differs from the previous report, so a state an admin set by hand stays
-- until the agent sees that device change.
CREATE TABLE inventory_fault (
	server_id INTEGER NOT NULL REFERENCES server(id) ON DELETE CASCADE,
	device INTEGER NOT NULL,
	PRIMARY KEY (server_id, device)
);
