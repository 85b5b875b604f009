-- 002: topology (OCS units, servers, cabling), fabrics and their plans.
-- Server positions in a fabric are the policy's server indices.

CREATE TABLE ocs (
	id INTEGER PRIMARY KEY,
	name TEXT NOT NULL UNIQUE,
	driver TEXT NOT NULL,
	ports INTEGER NOT NULL CHECK (ports BETWEEN 1 AND 65536),
	endpoint TEXT NOT NULL DEFAULT ''
);

CREATE TABLE server (
	id INTEGER PRIMARY KEY,          -- creation order: the "server order" of cabling rules
	name TEXT NOT NULL UNIQUE,
	devices INTEGER NOT NULL CHECK (devices BETWEEN 1 AND 1024),
	ports_per_device INTEGER NOT NULL CHECK (ports_per_device BETWEEN 1 AND 1024),
	p2p INTEGER NOT NULL DEFAULT 0,
	intra TEXT NOT NULL DEFAULT 'full-mesh' CHECK (intra IN ('full-mesh', 'two-groups'))
);

-- Devices marked failed (absent = ok).
CREATE TABLE device_fault (
	server_id INTEGER NOT NULL REFERENCES server(id) ON DELETE CASCADE,
	device INTEGER NOT NULL,
	PRIMARY KEY (server_id, device)
);

-- One row per cabled device port.
CREATE TABLE cable (
	server_id INTEGER NOT NULL REFERENCES server(id) ON DELETE CASCADE,
	device INTEGER NOT NULL,
	port INTEGER NOT NULL,
	ocs_id INTEGER NOT NULL REFERENCES ocs(id) ON DELETE CASCADE,
	ocs_port INTEGER NOT NULL,
	PRIMARY KEY (server_id, device, port),
	UNIQUE (ocs_id, ocs_port)
);

-- The wiring as it was given (rule or explicit), for GET /v1/wiring.
CREATE TABLE wiring (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	rule TEXT                         -- 'plane-per-ocs', or NULL for explicit links
);

CREATE TABLE fabric (
	id INTEGER PRIMARY KEY,
	name TEXT NOT NULL UNIQUE,
	state TEXT NOT NULL,
	revision INTEGER NOT NULL DEFAULT 1,
	formula INTEGER NOT NULL,
	planes INTEGER NOT NULL,
	min_devices INTEGER NOT NULL,
	created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
	updated TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE fabric_server (
	fabric_id INTEGER NOT NULL REFERENCES fabric(id) ON DELETE CASCADE,
	position INTEGER NOT NULL,
	server_id INTEGER NOT NULL UNIQUE REFERENCES server(id),  -- fabrics are disjoint
	PRIMARY KEY (fabric_id, position)
);

CREATE TABLE circuit (
	fabric_id INTEGER NOT NULL REFERENCES fabric(id) ON DELETE CASCADE,
	plane INTEGER NOT NULL,
	a_pos INTEGER NOT NULL, a_device INTEGER NOT NULL, a_port INTEGER NOT NULL,
	b_pos INTEGER NOT NULL, b_device INTEGER NOT NULL, b_port INTEGER NOT NULL,
	ocs_id INTEGER NOT NULL REFERENCES ocs(id),
	a_ocs_port INTEGER NOT NULL,
	b_ocs_port INTEGER NOT NULL,
	UNIQUE (ocs_id, a_ocs_port),
	UNIQUE (ocs_id, b_ocs_port)
);
CREATE INDEX circuit_by_fabric ON circuit(fabric_id);

CREATE TABLE missing_pair (
	fabric_id INTEGER NOT NULL REFERENCES fabric(id) ON DELETE CASCADE,
	a_pos INTEGER NOT NULL,
	b_pos INTEGER NOT NULL,
	PRIMARY KEY (fabric_id, a_pos, b_pos)
);
