-- ensure_partition returns the partition, creating the queue (with the
-- defaults) and the partition if they do not exist. Concurrent callers are
-- safe: ON CONFLICT waits for a racing insert and then reads its row. A
-- created partition gets a cursor for every group of its queue, as in
-- ensure_partitions (and in its lock order).
CREATE OR REPLACE FUNCTION queen.ensure_partition(p_queue text, p_partition text,
    OUT partition_id bigint, OUT queue_id bigint, OUT dedup_window_seconds integer, OUT last_offset bigint,
    OUT on_conflict text)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT p.id, q.id, q.dedup_window_seconds, p.last_offset, q.on_conflict
      INTO partition_id, queue_id, dedup_window_seconds, last_offset, on_conflict
      FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id
     WHERE q.name = p_queue AND p.name = p_partition;
    IF FOUND THEN
        RETURN;
    END IF;
    INSERT INTO queen.queues (name) VALUES (p_queue) ON CONFLICT (name) DO NOTHING;
    PERFORM 1 FROM queen.queues q WHERE q.name = p_queue FOR KEY SHARE; -- as ensure_partitions
    INSERT INTO queen.log_partitions (queue_id, name)
        SELECT q.id, p_partition FROM queen.queues q WHERE q.name = p_queue
        ON CONFLICT ON CONSTRAINT log_partitions_queue_id_name_key DO NOTHING
        RETURNING id INTO partition_id;
    INSERT INTO queen.consumer_cursors (group_id, partition_id, parked)
    SELECT g.id, p.id, true
      FROM queen.log_partitions p JOIN queen.consumer_groups g ON g.queue_id = p.queue_id
     WHERE p.id = partition_id
     ORDER BY 1;
    SELECT p.id, q.id, q.dedup_window_seconds, p.last_offset, q.on_conflict
      INTO STRICT partition_id, queue_id, dedup_window_seconds, last_offset, on_conflict
      FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id
     WHERE q.name = p_queue AND p.name = p_partition;
END
$$;
