-- log_push_write finishes a frame whose stored duplicates are known
-- (p_dup_idx/p_dup_off from log_probe, NULL for none): it resolves repeats
-- within the frame when deduplication is on, then writes the new messages
-- at p_last + 1, .... p_bytes is the frame's data size as sent. The caller
-- holds the partition's row lock and read p_last under it.
CREATE OR REPLACE FUNCTION queen.log_push_write(
    p_pid      bigint,
    p_last     bigint,
    p_now      timestamptz,
    p_dedup    boolean,
    p_txn_ids  text[],
    p_hashes   uuid[],
    p_data     json[],
    p_dup_idx  integer[],
    p_dup_off  bigint[],
    p_bytes    bigint,
    OUT base_offset bigint,
    OUT last_offset bigint,
    OUT dup_idx     integer[],
    OUT dup_off     bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    v_n       integer := cardinality(p_hashes);
    v_unique  boolean := true;
    v_new_idx integer[];
    v_k       integer;
BEGIN
    IF p_dedup AND v_n > 1 THEN
        SELECT count(DISTINCT u.h) = v_n INTO v_unique FROM unnest(p_hashes) AS u(h);
    END IF;

    IF p_dup_idx IS NULL AND v_unique THEN
        -- Common case: everything is new and is written as sent.
        v_k := v_n;
    ELSE
        -- Classify each position: a stored duplicate keeps the stored offset;
        -- a repeat of an earlier position inherits that leader's result; the
        -- remaining leaders are new and take contiguous offsets in input order.
        WITH inc AS (
            SELECT u.idx::integer AS idx, u.h,
                   min(u.idx::integer) OVER (PARTITION BY u.h) AS leader
              FROM unnest(p_hashes) WITH ORDINALITY AS u(h, idx)
        ), cls AS (
            SELECT inc.idx, inc.leader, st.off AS stored
              FROM inc LEFT JOIN unnest(p_dup_idx, p_dup_off) AS st(idx, off) ON st.idx = inc.idx
        ), fresh AS (
            SELECT cls.idx, p_last + row_number() OVER (ORDER BY cls.idx) AS off
              FROM cls WHERE cls.stored IS NULL AND cls.leader = cls.idx
        ), res AS (
            SELECT cls.idx, fresh_self.idx IS NOT NULL AS is_new,
                   COALESCE(cls.stored, fresh_leader.off) AS off
              FROM cls
              LEFT JOIN fresh AS fresh_self ON fresh_self.idx = cls.idx
              LEFT JOIN fresh AS fresh_leader ON fresh_leader.idx = cls.leader
        )
        SELECT array_agg(res.idx ORDER BY res.idx) FILTER (WHERE NOT res.is_new),
               array_agg(res.off ORDER BY res.idx) FILTER (WHERE NOT res.is_new),
               array_agg(res.idx ORDER BY res.idx) FILTER (WHERE res.is_new)
          INTO dup_idx, dup_off, v_new_idx
          FROM res;

        v_k := coalesce(cardinality(v_new_idx), 0);
        IF v_k = 0 THEN
            -- A duplicate writes nothing: no allocator bump, no segment, no
            -- log_txns row. So it needs no rollback and no savepoint.
            last_offset := p_last;
            RETURN;
        END IF;
        SELECT array_agg(p_txn_ids[i] ORDER BY i), array_agg(p_hashes[i] ORDER BY i),
               array_agg(p_data[i] ORDER BY i), sum(octet_length(p_data[i]::text))::bigint
          INTO p_txn_ids, p_hashes, p_data, p_bytes
          FROM unnest(v_new_idx) AS i;
    END IF;

    base_offset := p_last + 1;
    last_offset := p_last + v_k;
    UPDATE queen.log_partitions
       SET last_offset = log_push_write.last_offset, stored_bytes = stored_bytes + p_bytes
     WHERE id = p_pid;
    INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, created_at, txn_ids, data, data_bytes)
        VALUES (p_pid, log_push_write.base_offset, log_push_write.last_offset, p_now, p_txn_ids, p_data, p_bytes);
    -- Written whatever the window: ack-by-transactionId resolves through it.
    INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, created_at, hashes)
        VALUES (p_pid, log_push_write.base_offset, log_push_write.last_offset, p_now, p_hashes);
END
$$;
