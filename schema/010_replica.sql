-- 010: where a member stands in the cluster's replication log (docs/ha.md).
-- applied_revision is the etcd revision of the last change it applied,
-- written in the transaction that applies it, so that after a crash a member
-- resumes the log exactly where its store stands. applying is 1 only inside
-- that transaction: a changeset already holds what the leader's triggers
-- did, so the triggers stand aside while one is applied. Absent on a store
-- that never followed.

CREATE TABLE replica_state (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	applied_revision INTEGER NOT NULL,
	applying INTEGER NOT NULL DEFAULT 0
);

DROP TRIGGER ocs_revision;
CREATE TRIGGER ocs_revision AFTER UPDATE OF driver, ports, endpoint ON ocs
WHEN (OLD.driver IS NOT NEW.driver OR OLD.ports IS NOT NEW.ports
     OR OLD.endpoint IS NOT NEW.endpoint)
     AND NOT EXISTS (SELECT 1 FROM replica_state WHERE applying)
BEGIN
	UPDATE ocs SET revision = OLD.revision + 1 WHERE id = NEW.id;
END;

DROP TRIGGER server_revision;
CREATE TRIGGER server_revision
AFTER UPDATE OF devices, ports_per_device, p2p, intra, offload, switch ON server
WHEN (OLD.devices IS NOT NEW.devices OR OLD.ports_per_device IS NOT NEW.ports_per_device
     OR OLD.p2p IS NOT NEW.p2p OR OLD.intra IS NOT NEW.intra
     OR OLD.offload IS NOT NEW.offload OR OLD.switch IS NOT NEW.switch)
     AND NOT EXISTS (SELECT 1 FROM replica_state WHERE applying)
BEGIN
	UPDATE server SET revision = OLD.revision + 1 WHERE id = NEW.id;
	UPDATE switch SET revision = revision + 1 WHERE name IN (OLD.switch, NEW.switch);
END;

DROP TRIGGER server_switch_added;
CREATE TRIGGER server_switch_added AFTER INSERT ON server WHEN (NEW.switch IS NOT NULL)
     AND NOT EXISTS (SELECT 1 FROM replica_state WHERE applying)
BEGIN
	UPDATE switch SET revision = revision + 1 WHERE name = NEW.switch;
END;

DROP TRIGGER server_switch_removed;
CREATE TRIGGER server_switch_removed AFTER DELETE ON server WHEN (OLD.switch IS NOT NULL)
     AND NOT EXISTS (SELECT 1 FROM replica_state WHERE applying)
BEGIN
	UPDATE switch SET revision = revision + 1 WHERE name = OLD.switch;
END;

DROP TRIGGER device_fault_added;
CREATE TRIGGER device_fault_added AFTER INSERT ON device_fault
WHEN NOT EXISTS (SELECT 1 FROM replica_state WHERE applying)
BEGIN
	UPDATE server SET revision = revision + 1 WHERE id = NEW.server_id;
END;

DROP TRIGGER device_fault_removed;
CREATE TRIGGER device_fault_removed AFTER DELETE ON device_fault
WHEN NOT EXISTS (SELECT 1 FROM replica_state WHERE applying)
BEGIN
	UPDATE server SET revision = revision + 1 WHERE id = OLD.server_id;
END;

DROP TRIGGER cable_added;
CREATE TRIGGER cable_added AFTER INSERT ON cable
WHEN NOT EXISTS (SELECT 1 FROM replica_state WHERE applying)
BEGIN
	UPDATE server SET revision = revision + 1 WHERE id = NEW.server_id;
END;

DROP TRIGGER cable_removed;
CREATE TRIGGER cable_removed AFTER DELETE ON cable
WHEN NOT EXISTS (SELECT 1 FROM replica_state WHERE applying)
BEGIN
	UPDATE server SET revision = revision + 1 WHERE id = OLD.server_id;
END;

DROP TRIGGER fabric_server_added;
CREATE TRIGGER fabric_server_added AFTER INSERT ON fabric_server
WHEN NOT EXISTS (SELECT 1 FROM replica_state WHERE applying)
BEGIN
	UPDATE server SET revision = revision + 1 WHERE id = NEW.server_id;
END;

DROP TRIGGER fabric_server_removed;
CREATE TRIGGER fabric_server_removed AFTER DELETE ON fabric_server
WHEN NOT EXISTS (SELECT 1 FROM replica_state WHERE applying)
BEGIN
	UPDATE server SET revision = revision + 1 WHERE id = OLD.server_id;
END;

DROP TRIGGER switch_revision;
CREATE TRIGGER switch_revision AFTER UPDATE OF aggregating, offload, buffer, window ON switch
WHEN (OLD.aggregating IS NOT NEW.aggregating OR OLD.offload IS NOT NEW.offload
     OR OLD.buffer IS NOT NEW.buffer OR OLD.window IS NOT NEW.window)
     AND NOT EXISTS (SELECT 1 FROM replica_state WHERE applying)
BEGIN
	UPDATE switch SET revision = OLD.revision + 1 WHERE id = NEW.id;
END;
