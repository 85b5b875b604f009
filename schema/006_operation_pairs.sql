-- 006: an operation's lists of cross-connects move to a table of their own,
-- written once when the batch starts. The operation row is updated when the
-- batch ends, and SQLite rewrites a whole row (overflow pages included) on
-- every update: with thousands of pairs inline, that update cost more than
-- the batch itself.

CREATE TABLE operation_xc (
	operation_id INTEGER PRIMARY KEY REFERENCES operation(id) ON DELETE CASCADE,
	adds TEXT NOT NULL,                -- JSON [[a, b], ...]
	deletes TEXT NOT NULL              -- JSON [[a, b], ...]
);
INSERT INTO operation_xc(operation_id, adds, deletes) SELECT id, adds, deletes FROM operation;
ALTER TABLE operation DROP COLUMN adds;
ALTER TABLE operation DROP COLUMN deletes;
