-- 012: a circuit or a cable names a port its unit has (1 to ports, a whole number).
-- The daemon's own writes never do otherwise, but a change of the replicated log is
-- applied row by row as it comes: one naming port 2^46 + 17 went in, and the readers
-- that hold a port in 32 bits (the desired mirror, the drivers) took it for port 17.
-- Such a row is now refused, which aborts the change (the member then copies a
-- snapshot). A unit that does not exist is the foreign key's to refuse.

CREATE TRIGGER circuit_ports_fit BEFORE INSERT ON circuit
WHEN typeof(NEW.a_ocs_port) <> 'integer' OR typeof(NEW.b_ocs_port) <> 'integer'
     OR NEW.a_ocs_port < 1 OR NEW.b_ocs_port < 1
     OR NEW.a_ocs_port > (SELECT ports FROM ocs WHERE id = NEW.ocs_id)
     OR NEW.b_ocs_port > (SELECT ports FROM ocs WHERE id = NEW.ocs_id)
BEGIN
	SELECT RAISE(ABORT, 'a circuit names a port its OCS unit does not have');
END;

CREATE TRIGGER circuit_ports_fit_update BEFORE UPDATE OF ocs_id, a_ocs_port, b_ocs_port ON circuit
WHEN typeof(NEW.a_ocs_port) <> 'integer' OR typeof(NEW.b_ocs_port) <> 'integer'
     OR NEW.a_ocs_port < 1 OR NEW.b_ocs_port < 1
     OR NEW.a_ocs_port > (SELECT ports FROM ocs WHERE id = NEW.ocs_id)
     OR NEW.b_ocs_port > (SELECT ports FROM ocs WHERE id = NEW.ocs_id)
BEGIN
	SELECT RAISE(ABORT, 'a circuit names a port its OCS unit does not have');
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
