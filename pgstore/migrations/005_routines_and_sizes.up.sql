-- Routines (functions and procedures) leave the migrations: each is one
-- file of pgstore/routines, applied after the migrations whenever their
-- text changes (routines.go), so that today's log_push_bundle is read in
-- one place. This row records the text applied (a checksum of all files).
CREATE TABLE queen.routines (
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- What a partition holds, for operators: the bytes of message data as
-- sent, per frame and per partition. The partition's figure moves with
-- the allocator (pushes) and with segment retention, both under the
-- partition's row lock, so reading it costs one row.
ALTER TABLE queen.log_segments ADD COLUMN data_bytes bigint;
UPDATE queen.log_segments s
   SET data_bytes = (SELECT coalesce(sum(octet_length(d::text)), 0) FROM unnest(s.data) AS d);
ALTER TABLE queen.log_segments ALTER COLUMN data_bytes SET NOT NULL;

ALTER TABLE queen.log_partitions ADD COLUMN stored_bytes bigint NOT NULL DEFAULT 0;
UPDATE queen.log_partitions p
   SET stored_bytes = (SELECT coalesce(sum(s.data_bytes), 0) FROM queen.log_segments s WHERE s.partition_id = p.id);
