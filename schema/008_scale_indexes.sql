-- 008: the reconciler keeps every unit's desired circuits and port owners in
-- memory (daemon/desired.c) and no longer reads them unit by unit, so the
-- covering indexes it used only cost each fabric and topology write a B-tree
-- more (a 64-server fabric at 8,192 servers: a third of its insert time).
-- circuit_by_fabric repeats the first column of circuit_by_pair.
DROP INDEX circuit_by_ocs;
DROP INDEX cable_by_ocs;
DROP INDEX circuit_by_fabric;
