-- log_push writes one frame to one partition, exactly.
CREATE OR REPLACE FUNCTION queen.log_push(
    p_pid      bigint,
    p_verified bigint,
    p_verified_window integer,
    p_txn_ids  text[],
    p_hashes   uuid[],
    p_data     json[],
    p_bytes    bigint,
    OUT base_offset bigint,
    OUT last_offset bigint,
    OUT probe_ran   boolean,
    OUT dup_idx     integer[],
    OUT dup_off     bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    v_n           integer := cardinality(p_hashes);
    v_last        bigint;
    v_txns_start  bigint;
    v_window      integer;
    v_now         timestamptz;
    v_from        bigint;
BEGIN
    IF v_n IS NULL OR v_n = 0 OR cardinality(p_txn_ids) IS DISTINCT FROM v_n
       OR cardinality(p_data) IS DISTINCT FROM v_n THEN
        RAISE EXCEPTION 'queen.log_push: txn_ids, hashes and data must be non-empty and of equal length'
            USING ERRCODE = '22023';
    END IF;

    -- The row lock is the per-partition write serializer. It is taken
    -- explicitly, before the probe, so that probe-then-allocate is race-free.
    SELECT p.last_offset, p.txns_start, q.dedup_window_seconds
      INTO v_last, v_txns_start, v_window
      FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
     WHERE p.id = p_pid
       FOR UPDATE OF p;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'queen.log_push: partition % does not exist', p_pid USING ERRCODE = 'QG404';
    END IF;

    v_now := clock_timestamp();
    probe_ran := false;
    IF v_window > 0 THEN
        -- A watermark vouched under a smaller window says nothing about
        -- the rest of this one.
        v_from := GREATEST(CASE WHEN v_window <= p_verified_window THEN COALESCE(p_verified, -1) ELSE -1 END,
                           v_txns_start - 1);
        IF v_last > v_from THEN
            probe_ran := true;
            SELECT pr.dup_idx, pr.dup_off INTO dup_idx, dup_off
              FROM queen.log_probe(p_pid, v_from, v_now, v_window, p_hashes) AS pr;
        END IF;
    END IF;

    SELECT w.base_offset, w.last_offset, w.dup_idx, w.dup_off
      INTO base_offset, last_offset, dup_idx, dup_off
      FROM queen.log_push_write(p_pid, v_last, v_now, v_window > 0, p_txn_ids, p_hashes, p_data,
                                dup_idx, dup_off, p_bytes) AS w;
END
$$;
