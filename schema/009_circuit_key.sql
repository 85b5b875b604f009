-- 009: circuit gets a primary key. SQLite's session extension, which turns a
-- write transaction into the changeset a cluster replicates (docs/ha.md),
-- leaves out tables without one. (ocs_id, a_ocs_port) was unique already: an
-- OCS port carries at most one circuit. Nothing references circuit, so it is
-- rebuilt in place, with the one index still read (008): pricing's pair lookup.

CREATE TABLE circuit_new (
	fabric_id INTEGER NOT NULL REFERENCES fabric(id) ON DELETE CASCADE,
	plane INTEGER NOT NULL,
	a_pos INTEGER NOT NULL, a_device INTEGER NOT NULL, a_port INTEGER NOT NULL,
	b_pos INTEGER NOT NULL, b_device INTEGER NOT NULL, b_port INTEGER NOT NULL,
	ocs_id INTEGER NOT NULL REFERENCES ocs(id),
	a_ocs_port INTEGER NOT NULL,
	b_ocs_port INTEGER NOT NULL,
	PRIMARY KEY (ocs_id, a_ocs_port),
	UNIQUE (ocs_id, b_ocs_port)
);
INSERT INTO circuit_new(fabric_id, plane, a_pos, a_device, a_port, b_pos, b_device, b_port,
                        ocs_id, a_ocs_port, b_ocs_port)
	SELECT fabric_id, plane, a_pos, a_device, a_port, b_pos, b_device, b_port,
	       ocs_id, a_ocs_port, b_ocs_port FROM circuit;
DROP TABLE circuit;
ALTER TABLE circuit_new RENAME TO circuit;
CREATE INDEX circuit_by_pair ON circuit(fabric_id, a_pos, b_pos);
