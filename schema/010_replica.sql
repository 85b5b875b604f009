-- 010: the etcd revision of the last replicated change a follower applied
-- (docs/ha.md). Written in the transaction that applies it, so that after a
-- crash a member resumes the log exactly where its store stands. Absent on a
-- store that never followed.

CREATE TABLE replica_state (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	applied_revision INTEGER NOT NULL
);
