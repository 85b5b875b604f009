-- 019: the log key of the change applied last, beside its revision
-- (replica_state.applied_revision, 010): a member that starts again checks
-- that the log still holds that very entry there (daemon/cluster/replica.c).
-- An etcd restored from a backup numbers its revisions again from the
-- backup's, so another entry may stand at the same revision; its key tells
-- them apart. NULL on a store that applied nothing since this migration.

ALTER TABLE replica_state ADD COLUMN applied_key TEXT;
