-- 004: capabilities the collective cost model reads from the topology (documents 003, 004).

-- Electrical switches that servers' NICs reach. An aggregating switch (document 004) sums
-- message i of every member and returns the aggregate as the acknowledgement; it buffers B
-- messages per job and every member keeps at most W outstanding, so W <= B. An offload
-- switch (document 003) runs the reduction tree of offloaded collectives.
CREATE TABLE switch (
	id INTEGER PRIMARY KEY,
	name TEXT NOT NULL UNIQUE,
	aggregating INTEGER NOT NULL DEFAULT 0,
	offload INTEGER NOT NULL DEFAULT 0,
	buffer INTEGER CHECK (buffer BETWEEN 1 AND 1048576),   -- B, messages; NULL: not given
	window INTEGER CHECK (window BETWEEN 1 AND 1048576),   -- W, messages; NULL: not given
	CHECK (aggregating = 0 OR (buffer IS NOT NULL AND window IS NOT NULL)),
	CHECK (window IS NULL OR buffer IS NULL OR window <= buffer)
);

-- Its RDMA NIC can offload collectives (document 003).
ALTER TABLE server ADD COLUMN offload INTEGER NOT NULL DEFAULT 0;
-- The switch its NIC reaches, NULL when none. The handlers refuse to delete a switch in use.
ALTER TABLE server ADD COLUMN switch TEXT REFERENCES switch(name);
