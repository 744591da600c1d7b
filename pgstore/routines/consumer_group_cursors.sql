-- consumer_group_cursors gives every new consumer group a cursor on each
-- partition of its queue, whoever inserts the group: ensure_group, or a
-- gateway of the release before cursors were made ahead of pops (which
-- inserted groups itself; without this, such a group would find nothing
-- to pop, ever). A partition without messages gets its cursor parked
-- (consumer_choose): nothing to walk until a push wakes it.
--
-- Lock order (LOCKS.md): the queue row FOR UPDATE (ensure_group holds it
-- already), then the cursors, in partition id order. Creating a partition
-- holds the queue row FOR KEY SHARE until it commits, so one of the two
-- waits for the other, and the later one's next statement sees what the
-- first made: a group made while a partition is made gets its cursor
-- either way.
CREATE OR REPLACE FUNCTION queen.consumer_group_cursors()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM queen.queues q WHERE q.id = NEW.queue_id FOR UPDATE;
    -- A statement after the lock: it sees every partition committed before.
    INSERT INTO queen.consumer_cursors (group_id, partition_id, parked)
    SELECT NEW.id, p.id, p.last_offset < 0 FROM queen.log_partitions p
     WHERE p.queue_id = NEW.queue_id
     ORDER BY p.id;
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER consumer_group_cursors AFTER INSERT ON queen.consumer_groups
    FOR EACH ROW EXECUTE FUNCTION queen.consumer_group_cursors();
