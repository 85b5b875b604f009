-- 016: a rule's cabling too large to insert in one turn of the event loop
-- (PUT /v1/topology or /v1/wiring adding more than 8,192 cables; 2.1 million
-- at 32,768 servers) is inserted over several transactions
-- (daemon/domain/topo_wiring.c, struct topo_cables). Until it is whole,
-- partial is 1: the wiring views say so, and a start-up, or the write after
-- a failing store, applies the rule again to finish it.

ALTER TABLE wiring ADD COLUMN partial INTEGER NOT NULL DEFAULT 0 CHECK (partial IN (0, 1));
