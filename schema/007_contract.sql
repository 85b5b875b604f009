-- 007: what the REST contract needs of the store: the client's address in the
-- audit trail (GET /v1/audit), and a revision on every object a client can
-- name, the entity tag of its replies and what If-Match compares. A fabric
-- has had its revision since 002 (bumped by each re-plan).

ALTER TABLE audit ADD COLUMN client TEXT;  -- the client's IP address; NULL when unknown
CREATE INDEX audit_by_at ON audit(at);

ALTER TABLE ocs ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
ALTER TABLE server ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
ALTER TABLE switch ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;

-- Triggers bump the revisions, so no write path (nor an operator's sqlite3
-- shell) can change an object and leave its tag behind. An UPDATE that
-- writes the values already stored (PUT /v1/topology of the same topology)
-- changes nothing and bumps nothing. Each revision counts changes to what
-- GET shows of the object: an OCS unit's definition; a server's definition,
-- its devices' states, its cables and its fabric; a switch's definition and
-- which servers reach it.

CREATE TRIGGER ocs_revision AFTER UPDATE OF driver, ports, endpoint ON ocs
WHEN OLD.driver IS NOT NEW.driver OR OLD.ports IS NOT NEW.ports
     OR OLD.endpoint IS NOT NEW.endpoint
BEGIN
	UPDATE ocs SET revision = OLD.revision + 1 WHERE id = NEW.id;
END;

CREATE TRIGGER server_revision
AFTER UPDATE OF devices, ports_per_device, p2p, intra, offload, switch ON server
WHEN OLD.devices IS NOT NEW.devices OR OLD.ports_per_device IS NOT NEW.ports_per_device
     OR OLD.p2p IS NOT NEW.p2p OR OLD.intra IS NOT NEW.intra
     OR OLD.offload IS NOT NEW.offload OR OLD.switch IS NOT NEW.switch
BEGIN
	UPDATE server SET revision = OLD.revision + 1 WHERE id = NEW.id;
	UPDATE switch SET revision = revision + 1 WHERE name IN (OLD.switch, NEW.switch);
END;

CREATE TRIGGER server_switch_added AFTER INSERT ON server WHEN NEW.switch IS NOT NULL
BEGIN
	UPDATE switch SET revision = revision + 1 WHERE name = NEW.switch;
END;

CREATE TRIGGER server_switch_removed AFTER DELETE ON server WHEN OLD.switch IS NOT NULL
BEGIN
	UPDATE switch SET revision = revision + 1 WHERE name = OLD.switch;
END;

CREATE TRIGGER device_fault_added AFTER INSERT ON device_fault
BEGIN
	UPDATE server SET revision = revision + 1 WHERE id = NEW.server_id;
END;

CREATE TRIGGER device_fault_removed AFTER DELETE ON device_fault
BEGIN
	UPDATE server SET revision = revision + 1 WHERE id = OLD.server_id;
END;

CREATE TRIGGER cable_added AFTER INSERT ON cable
BEGIN
	UPDATE server SET revision = revision + 1 WHERE id = NEW.server_id;
END;

CREATE TRIGGER cable_removed AFTER DELETE ON cable
BEGIN
	UPDATE server SET revision = revision + 1 WHERE id = OLD.server_id;
END;

CREATE TRIGGER fabric_server_added AFTER INSERT ON fabric_server
BEGIN
	UPDATE server SET revision = revision + 1 WHERE id = NEW.server_id;
END;

CREATE TRIGGER fabric_server_removed AFTER DELETE ON fabric_server
BEGIN
	UPDATE server SET revision = revision + 1 WHERE id = OLD.server_id;
END;

CREATE TRIGGER switch_revision AFTER UPDATE OF aggregating, offload, buffer, window ON switch
WHEN OLD.aggregating IS NOT NEW.aggregating OR OLD.offload IS NOT NEW.offload
     OR OLD.buffer IS NOT NEW.buffer OR OLD.window IS NOT NEW.window
BEGIN
	UPDATE switch SET revision = OLD.revision + 1 WHERE id = NEW.id;
END;
