-- 011: a fabric's id is never given to another fabric. SQLite gives a new row
-- the largest id in use plus one, so the fabric created after the newest one
-- was deleted took its id again; a change that still named the old fabric by
-- that id (the leader's fabric states reach followers late, and a cluster's
-- log may hold both) then landed on the new one. The last id given is kept
-- here and replicated with the fabric it went to.

CREATE TABLE id_seq (
	name TEXT PRIMARY KEY,
	last INTEGER NOT NULL
);

INSERT INTO id_seq(name, last) SELECT 'fabric', coalesce(max(id), 0) FROM fabric;
