-- 015: the cable table is clustered on its key (WITHOUT ROWID). As a rowid
-- table every cable was three B-trees (rows, primary key, unit port), and a
-- unit's cables read by port (the audit, a unit's owners) looked each row up
-- again by rowid: at 32,770 servers (2.1 million cables) that lookup was half
-- of the audit's time, and the third B-tree a third of PUT /v1/topology's.
-- Now the unit-port index carries the key, so a unit's cables are read from
-- the index alone. The triggers go with the old table and are made again.

CREATE TABLE cable_new (
	server_id INTEGER NOT NULL REFERENCES server(id) ON DELETE CASCADE,
	device INTEGER NOT NULL,
	port INTEGER NOT NULL,
	ocs_id INTEGER NOT NULL REFERENCES ocs(id) ON DELETE CASCADE,
	ocs_port INTEGER NOT NULL,
	PRIMARY KEY (server_id, device, port),
	UNIQUE (ocs_id, ocs_port)
) WITHOUT ROWID;
INSERT INTO cable_new SELECT server_id, device, port, ocs_id, ocs_port FROM cable;
DROP TABLE cable;
ALTER TABLE cable_new RENAME TO cable;
CREATE TRIGGER cable_added AFTER INSERT ON cable
WHEN NOT EXISTS (SELECT 1 FROM replica_state WHERE applying)
BEGIN
	UPDATE server SET revision = revision + 1 WHERE id = NEW.server_id;
END;
CREATE TRIGGER cable_removed AFTER DELETE ON cable
WHEN NOT EXISTS (SELECT 1 FROM replica_state WHERE applying)
BEGIN
	UPDATE server SET revision = revision + 1 WHERE id = OLD.server_id;
END;
CREATE TRIGGER cable_port_fits BEFORE INSERT ON cable
WHEN typeof(NEW.ocs_port) <> 'integer' OR NEW.ocs_port < 1
     OR NEW.ocs_port > (SELECT ports FROM ocs WHERE id = NEW.ocs_id)
BEGIN
	SELECT RAISE(ABORT, 'a cable names a port its OCS unit does not have');
END;
CREATE TRIGGER cable_port_fits_update BEFORE UPDATE OF ocs_id, ocs_port ON cable
WHEN typeof(NEW.ocs_port) <> 'integer' OR NEW.ocs_port < 1
     OR NEW.ocs_port > (SELECT ports FROM ocs WHERE id = NEW.ocs_id)
BEGIN
	SELECT RAISE(ABORT, 'a cable names a port its OCS unit does not have');
END;
