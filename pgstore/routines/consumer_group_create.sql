-- consumer_group_create creates queue p_queue_id's consumer group p_name
-- with start position p_start (its canonical JSON), as ensure_group does
-- (its insert's trigger, consumer_group_cursors, gives it a cursor on
-- every partition, at the partition's start), and answers its id,
-- whether this call created it, and the start it was created with: a
-- group that exists is left as it is, whatever p_start says (the caller
-- answers a different start as a conflict). The caller moves a new
-- group's cursors to p_start (consumer_group_seek) in the same
-- transaction, so no pop sees the group before they are there; a
-- partition created afterwards gets a cursor at its offset 0, which is
-- right for every start (its messages are all pushed after the group's
-- creation, and at or after any time that was already past).
--
-- Lock order (LOCKS.md): the queue row FOR UPDATE, as ensure_group.
CREATE OR REPLACE FUNCTION queen.consumer_group_create(p_queue_id bigint, p_name text, p_start text,
    OUT group_id bigint, OUT created boolean, OUT start text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM 1 FROM queen.queues q WHERE q.id = p_queue_id FOR UPDATE;
    INSERT INTO queen.consumer_groups (queue_id, name, start) VALUES (p_queue_id, p_name, p_start)
    ON CONFLICT (queue_id, name) DO NOTHING
    RETURNING id INTO group_id;
    created := group_id IS NOT NULL;
    SELECT g.id, g.start INTO STRICT group_id, start
      FROM queen.consumer_groups g WHERE g.queue_id = p_queue_id AND g.name = p_name;
END
$$;
