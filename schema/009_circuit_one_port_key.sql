-- 009: a circuit row kept three B-trees besides its table, two of them keyed
-- by unit first (UNIQUE (ocs_id, a_ocs_port) and (ocs_id, b_ocs_port)). A
-- 64-server fabric spreads its 2,016 circuits over 64 units, so each of those
-- took one or two leaf pages per unit: about 130 of the 190 pages a fabric's
-- create or delete commits, every page one more write into the WAL inside
-- the request. Both go, and so does circuit_by_pair (fabric_id, a_pos,
-- b_pos): every reader of circuits reads a whole fabric (pairs are looked up
-- in memory, topo_fabric_circuits()), which its primary key serves as
-- well. A circuit is now its table row and one index entry.
--
-- What they guarded holds without them: plan_verify refuses an OCS port used
-- twice in a fabric (on either end, which they did not catch), a fabric's ends
-- are its members' cables, a cable's OCS port is unique (UNIQUE (ocs_id,
-- ocs_port)) and a server is in one fabric (fabric_server.server_id UNIQUE).
--
-- What read by unit (the audit, GET of a unit's desired list) reads through
-- the primary key (fabric_id, ocs_id, a_ocs_port, b_ocs_port), fabric by fabric: a new fabric's entries go to the
-- end of it, a deleted fabric's come off in one run. Deleting an OCS unit now
-- checks its circuits (foreign key) by a scan; units that carry circuits are
-- refused before that (topo_apply.c).
--
-- The one index is the table's PRIMARY KEY: SQLite's session extension, which
-- turns a write transaction into the changeset a cluster replicates
-- (docs/ha.md), leaves out tables without one.
--
-- SQLite drops a table constraint only by building the table anew.

CREATE TABLE circuit_new (
	fabric_id INTEGER NOT NULL REFERENCES fabric(id) ON DELETE CASCADE,
	plane INTEGER NOT NULL,
	a_pos INTEGER NOT NULL, a_device INTEGER NOT NULL, a_port INTEGER NOT NULL,
	b_pos INTEGER NOT NULL, b_device INTEGER NOT NULL, b_port INTEGER NOT NULL,
	ocs_id INTEGER NOT NULL REFERENCES ocs(id),
	a_ocs_port INTEGER NOT NULL,
	b_ocs_port INTEGER NOT NULL,
	-- A fabric's circuits (and the cascade of its delete); covers what the
	-- per-unit readers select.
	PRIMARY KEY (fabric_id, ocs_id, a_ocs_port, b_ocs_port)
);
INSERT INTO circuit_new(rowid, fabric_id, plane, a_pos, a_device, a_port, b_pos, b_device,
                        b_port, ocs_id, a_ocs_port, b_ocs_port)
	SELECT rowid, fabric_id, plane, a_pos, a_device, a_port, b_pos, b_device, b_port, ocs_id,
	       a_ocs_port, b_ocs_port FROM circuit;
DROP TABLE circuit;
ALTER TABLE circuit_new RENAME TO circuit;
