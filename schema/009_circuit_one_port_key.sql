-- 009: a circuit row kept three B-trees besides its table, and a 64-server
-- fabric spreads its 2,016 circuits over 64 units: each unit-keyed index took
-- one or two leaf pages per unit, about 130 of the 200 pages a fabric's
-- create or delete commits (every page one more write into the WAL).
-- UNIQUE (ocs_id, b_ocs_port) goes: no query reads by it, and what it guarded
-- holds without it (plan_verify refuses an OCS port used twice in a fabric,
-- on either end; a fabric's ends are its members' cables, a cable's OCS port
-- is unique and a server is in one fabric). UNIQUE (ocs_id, a_ocs_port)
-- stays: the audit, a unit's desired list and deleting a unit read by it.
-- SQLite drops a table constraint only by building the table anew.

CREATE TABLE circuit_new (
	fabric_id INTEGER NOT NULL REFERENCES fabric(id) ON DELETE CASCADE,
	plane INTEGER NOT NULL,
	a_pos INTEGER NOT NULL, a_device INTEGER NOT NULL, a_port INTEGER NOT NULL,
	b_pos INTEGER NOT NULL, b_device INTEGER NOT NULL, b_port INTEGER NOT NULL,
	ocs_id INTEGER NOT NULL REFERENCES ocs(id),
	a_ocs_port INTEGER NOT NULL,
	b_ocs_port INTEGER NOT NULL,
	UNIQUE (ocs_id, a_ocs_port)
);
INSERT INTO circuit_new(rowid, fabric_id, plane, a_pos, a_device, a_port, b_pos, b_device,
                        b_port, ocs_id, a_ocs_port, b_ocs_port)
	SELECT rowid, fabric_id, plane, a_pos, a_device, a_port, b_pos, b_device, b_port, ocs_id,
	       a_ocs_port, b_ocs_port FROM circuit;
DROP TABLE circuit;
ALTER TABLE circuit_new RENAME TO circuit;
CREATE INDEX circuit_by_pair ON circuit(fabric_id, a_pos, b_pos);
