-- 018: measured runs of collectives, collected for calibration
-- (POST /v1/servers/{name}/runs, usually from the server's agent; read by
-- GET /v1/cost/runs and by POST /v1/cost/calibrate's "collected";
-- daemon/domain/cost_run.c). Kept newest first up to a bound: the oldest go
-- when a post would exceed it.
-- collector: the server whose agent (or an administrator for it) sent the run.
-- fabric: the fabric the run was measured on, as named when it was sent
--   (NULL: not said); ports_per_device: that fabric's busiest device then,
--   the host-link fact its time depends on (NULL: not known).
-- batch: the sender's name for the post they came in (?batch=; NULL: none):
--   the same batch sent again by the same collector (a retry after an answer
--   was lost) adds nothing.
-- Ids come from id_seq ('cost_run') and are never given twice, so that a
-- cluster change that drops old runs and adds new ones never reuses a key.

CREATE TABLE cost_run (
	id INTEGER PRIMARY KEY,
	collector TEXT NOT NULL,
	batch TEXT,
	fabric TEXT,
	ports_per_device INTEGER CHECK (ports_per_device IS NULL OR ports_per_device >= 1),
	collective TEXT NOT NULL,
	algorithm TEXT NOT NULL,
	servers INTEGER NOT NULL CHECK (servers >= 2),
	devices INTEGER NOT NULL CHECK (devices >= 1),
	bytes INTEGER NOT NULL CHECK (bytes >= 1),
	measured_us REAL NOT NULL CHECK (measured_us > 0),
	collected TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
