-- 001: daemon core. The audit trail of every write request.
CREATE TABLE audit (
	id INTEGER PRIMARY KEY,
	at TEXT NOT NULL,          -- UTC, ISO 8601 with milliseconds
	token TEXT,                -- token name; NULL when unauthenticated
	method TEXT NOT NULL,
	path TEXT NOT NULL,
	status INTEGER NOT NULL    -- HTTP status of the reply
);
