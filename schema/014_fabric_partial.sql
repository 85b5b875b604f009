-- 014: a fabric too large to create or delete in one turn of the event loop is
-- written over several transactions (daemon/domain/fabric.c, struct
-- fabric_parts). Until it is whole, or gone, partial is 1: reads and the
-- reconciler's state derivation pass over it, and a start-up drops it (a
-- create its client was never told of, or a removal it was).

ALTER TABLE fabric ADD COLUMN partial INTEGER NOT NULL DEFAULT 0 CHECK (partial IN (0, 1));

-- Checked before every write while none is under way: found in its index, not a scan.
CREATE INDEX fabric_partial ON fabric(id) WHERE partial;
