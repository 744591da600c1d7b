-- ensure_group returns the id of queue p_queue_id's consumer group p_name,
-- creating it, with a cursor on every partition of the queue (its
-- insert's trigger, consumer_group_cursors, makes them), when it does not
-- exist.
--
-- Lock order (LOCKS.md): the queue row FOR UPDATE first. Creating a
-- partition holds the same row FOR KEY SHARE until it commits, so one of
-- the two waits for the other, and the later one's next statement sees
-- what the first made: a group made while a partition is made gets its
-- cursor either way. Racing creators of the same group wait on the queue
-- row; the second finds the group and makes nothing.
CREATE OR REPLACE FUNCTION queen.ensure_group(p_queue_id bigint, p_name text)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    PERFORM 1 FROM queen.queues q WHERE q.id = p_queue_id FOR UPDATE;
    INSERT INTO queen.consumer_groups (queue_id, name) VALUES (p_queue_id, p_name)
    ON CONFLICT (queue_id, name) DO NOTHING
    RETURNING id INTO v_id;
    IF v_id IS NULL THEN
        SELECT g.id INTO STRICT v_id FROM queen.consumer_groups g WHERE g.queue_id = p_queue_id AND g.name = p_name;
    END IF;
    -- The group's cursors were made by its insert's trigger
    -- (consumer_group_cursors), under the queue row held here.
    RETURN v_id;
END
$$;
