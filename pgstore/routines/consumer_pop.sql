-- consumer_pop leases a partition of queue p_queue_id (p_partition_id, or
-- any with work when NULL) to consumer p_consumer of group p_group_id,
-- and returns up to p_max messages from the group's cursor, in offset
-- order, skipping what is already done. Bytes bound them too: a message
-- takes at most its data's octets, six per octet of its transactionId and
-- last error (each escaped at worst as \u00XX), and p_envelope in the
-- answer; the messages delivered take at most p_max_bytes, or one message
-- alone more, and never more than p_room (so none when the first does not
-- fit in p_room). A message that takes more than p_max_delivery (when
-- above 0: what a pop's answer can carry for one message) can never be
-- delivered: it comes back dead, too_large, for the caller to move to
-- the dead-letter queue as below. A partition is leased to one
-- consumer of a group at a time: pops skip a partition whose lease is
-- running, and take the least recently leased of the others with work
-- (consumer_choose), skipping a cursor row another pop or ack holds
-- (SKIP LOCKED).
--
-- The answer is one row (none when no partition has work): the
-- partition, the lease, and the messages as arrays in offset order (one
-- row per message cost more to return and to read than the rest of the
-- pop): each one's offset, transactionId, data and created_at, and
-- attempts, its deliveries counting this one. A message delivered
-- maxAttempts times already is not delivered again: it comes back with
-- dead = true, not under the lease, and the caller moves it to
-- the dead-letter queue (consumer_dead_letter_pending, then
-- consumer_dead_lettered, in one transaction). Until that commits the
-- cursor stays below it, so a caller that dies before only leaves it to
-- the next pop.
--
-- A partition whose group's cursor a delay holds (consumer_free) is
-- not leased: a failure's delay (consumer_ack), or the delay after a
-- lease, heard from, ran out, which the lease records when the queue has
-- retry delays (p_lease_delay, by the highest attempt it delivers). The
-- pop that takes the cursor afterwards clears the failure's delay.
--
-- A lease found run out ends here: taken back as if never delivered
-- when nobody was heard from under it (consumer_take_back: its answer
-- was lost, so it costs no attempt and counts as unconfirmed) unless it
-- is one of the leases run out unheard that count
-- (consumer_ran_out_unheard), else its attempts count and what it left
-- unsettled says why (consumer_lease_ran_out). Messages retention
-- deleted from under the cursor are counted on it.
--
-- Flow control: under a limit, p_consumer_limit for p_consumer's running
-- leases, p_group_limit for the group's (0: none), the pop delivers no
-- more than the limit less what is delivered and not yet settled
-- (consumer_ack_pending), and at the limit nothing: one row, of NULLs
-- but held = true. Its lease is then counted by later pops under a limit
-- (lease_counted). Without a limit nothing is counted or locked for it.
--
-- Lock order (LOCKS.md): under a limit, the group row first, waited for
-- (pops under a limit of one group count one at a time); for a pop of
-- any partition, the group row when free (consumer_choose); then the
-- cursor row; partition rows are read, never locked.
CREATE OR REPLACE FUNCTION queen.consumer_pop(p_group_id bigint, p_queue_id bigint, p_partition_id bigint,
    p_max integer, p_lease_seconds double precision, p_consumer text, p_max_bytes bigint, p_room bigint,
    p_envelope integer, p_max_delivery bigint, p_consumer_limit integer, p_group_limit integer)
RETURNS TABLE (partition_id bigint, partition text, lease_id uuid, lease_until timestamptz, offs bigint[], txn_ids text[],
               data json[], created_at timestamptz[], attempts integer[], last_errors text[], dead boolean[], too_large boolean[],
               held boolean, meta text[])
LANGUAGE plpgsql
-- Planned once per session: re-planning each statement on every call
-- (what the default chooses for them) cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    c          queen.consumer_cursors%ROWTYPE;
    v_now      timestamptz := clock_timestamp();
    v_last     bigint;
    v_pname    text;
    v_first    bigint;
    v_max_att  integer;
    v_retry_ms bigint;    -- the queue's delay after a failure, and by attempt
    v_backoff  bigint[];
    v_lease_delay interval; -- how long the lease's expiry holds the cursor
    v_hi       bigint;
    v_marks    boolean;   -- the group has marks on the partition (usually not)
    v_lease    uuid;
    v_until    timestamptz;
    v_lo       bigint;    -- the lease's first and last offsets
    v_top      bigint;    -- the highest offset handed out, dead ones included
    a_off      bigint[];  -- what is handed out, in offset order
    a_txn      text[];
    a_data     json[];
    a_meta     text[];
    a_created  timestamptz[];
    a_att      integer[];
    a_err      text[];
    a_dead     boolean[];
    a_large    boolean[];
    v_counted  boolean := coalesce(p_consumer_limit > 0 OR p_group_limit > 0, false);
BEGIN
    IF v_counted THEN
        PERFORM 1 FROM queen.consumer_groups g WHERE g.id = p_group_id FOR NO KEY UPDATE;
        v_now := clock_timestamp(); -- after the wait: leases that ran out meanwhile count no more
        p_max := least(p_max,
            CASE WHEN p_consumer_limit > 0 THEN p_consumer_limit - queen.consumer_ack_pending(p_group_id, p_consumer, v_now) END,
            CASE WHEN p_group_limit > 0 THEN p_group_limit - queen.consumer_ack_pending(p_group_id, NULL, v_now) END);
        IF p_max <= 0 THEN
            RETURN QUERY SELECT NULL::bigint, NULL::text, NULL::uuid, NULL::timestamptz, NULL::bigint[], NULL::text[],
                NULL::json[], NULL::timestamptz[], NULL::integer[], NULL::text[], NULL::boolean[], NULL::boolean[], true, NULL::text[];
            RETURN;
        END IF;
    END IF;
    -- Every partition has the group's cursor (ensure_group,
    -- ensure_partitions): one row by key, or the first of an index.
    IF p_partition_id IS NOT NULL THEN
        SELECT cc.* INTO c FROM queen.consumer_cursors cc
         WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id
           AND queen.consumer_free(cc.lease_id, cc.lease_until, cc.lease_heard, cc.lease_delay, cc.delayed_until, v_now)
           AND cc.next_offset <= (SELECT p.last_offset FROM queen.log_partitions p
                                   WHERE p.id = cc.partition_id AND p.queue_id = p_queue_id)
           FOR UPDATE SKIP LOCKED;
    ELSE
        c := queen.consumer_choose(p_group_id, v_now);
    END IF;
    IF c.partition_id IS NULL THEN
        RETURN;
    END IF;
    IF c.parked THEN -- leased by name while parked: it has work again
        UPDATE queen.consumer_cursors cc SET parked = false
         WHERE cc.group_id = p_group_id AND cc.partition_id = c.partition_id;
    END IF;
    IF c.lease_id IS NOT NULL THEN -- it ran out: the usual lease ends by its acks
        IF c.lease_heard OR c.lease_delivered_before IS NULL THEN
            PERFORM queen.consumer_lease_ran_out(p_group_id, c.partition_id, 0);
        ELSIF queen.consumer_ran_out_unheard(p_group_id, c.partition_id) THEN
            c.delivered_to := c.lease_delivered_before;
        END IF;
    END IF;

    -- One statement for what the pop reads about the partition: each
    -- statement has a fixed cost that a batch of 100 notices.
    SELECT p.last_offset, p.name, q.max_attempts, q.retry_delay_ms, q.retry_backoff_ms,
           coalesce((SELECT s.base_offset FROM queen.log_segments s WHERE s.partition_id = c.partition_id
                      ORDER BY s.base_offset LIMIT 1), p.last_offset + 1),
           EXISTS (SELECT 1 FROM queen.consumer_marks m WHERE m.group_id = p_group_id AND m.partition_id = c.partition_id)
      INTO v_last, v_pname, v_max_att, v_retry_ms, v_backoff, v_first, v_marks
      FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
     WHERE p.id = c.partition_id;
    -- Retention may have deleted messages below the cursor: they are gone
    -- for this group too.
    IF c.next_offset < v_first THEN
        UPDATE queen.consumer_cursors cc
           SET next_offset = v_first,
               deleted_unconsumed = cc.deleted_unconsumed + (v_first - c.next_offset)
                   - (SELECT count(*) FROM queen.consumer_marks m
                       WHERE m.group_id = p_group_id AND m.partition_id = c.partition_id AND m.done
                         AND m.off >= c.next_offset AND m.off < v_first)
         WHERE cc.group_id = p_group_id AND cc.partition_id = c.partition_id;
        DELETE FROM queen.consumer_marks m
         WHERE m.group_id = p_group_id AND m.partition_id = c.partition_id AND m.off < v_first;
        -- past what retention deleted, the cursor moves over what is done
        c.next_offset := queen.consumer_advance(p_group_id, c.partition_id, '{}');
    END IF;
    -- Enough offsets to find p_max not done (done marks above the cursor
    -- are few: acknowledgements out of order).
    v_hi := least(v_last, c.next_offset + p_max - 1);
    IF v_marks THEN
        v_hi := least(v_last, v_hi + (SELECT count(*) FROM queen.consumer_marks m
                                       WHERE m.group_id = p_group_id AND m.partition_id = c.partition_id AND m.done));
    END IF;

    -- The usual pop delivers messages none of which was delivered before,
    -- from one frame or two, with room to spare: the frames' slices,
    -- unrolled nowhere, each message at its first attempt.
    IF NOT v_marks AND c.delivered_to < c.next_offset AND c.next_offset <= v_hi THEN
        SELECT x.offs, x.txn_ids, x.data, x.created_at, x.meta INTO a_off, a_txn, a_data, a_created, a_meta
          FROM queen.consumer_pop_slice(c.partition_id, c.next_offset, v_hi, p_envelope,
                   least(coalesce(p_room, 0), coalesce(p_max_bytes, 0),
                         CASE WHEN p_max_delivery > 0 THEN p_max_delivery ELSE p_room END)) AS x;
    END IF;
    IF a_off IS NOT NULL THEN
        a_att := array_fill(1, ARRAY[cardinality(a_off)]);
        a_err := array_fill(NULL::text, ARRAY[cardinality(a_off)]);
        a_dead := array_fill(false, ARRAY[cardinality(a_off)]);
        a_large := a_dead;
        v_lo := c.next_offset;
        v_top := v_hi;
    ELSE
        WITH picked AS (
            SELECT o.off, m.attempts AS marked, m.last_error
              FROM generate_series(c.next_offset, v_hi) AS o(off)
              LEFT JOIN queen.consumer_marks m -- usually there are none to look at
                ON v_marks AND m.group_id = p_group_id AND m.partition_id = c.partition_id AND m.off = o.off
             WHERE m.done IS NOT TRUE
             ORDER BY o.off
             LIMIT p_max
        ), span AS (
            SELECT min(picked.off) AS lo, max(picked.off) AS hi FROM picked
        ), msgs AS ( -- only the slices of the frames that hold them, each
                     -- detoasted once (a subscript per element would
                     -- decompress the whole frame every time)
            SELECT greatest(span.lo, s.base_offset) + u.k - 1 AS off, u.txn_id, u.data, u.meta, s.created_at
              FROM span, queen.log_segments s
             CROSS JOIN LATERAL unnest(s.txn_ids[greatest(span.lo - s.base_offset + 1, 1) : least(span.hi, s.end_offset) - s.base_offset + 1],
                                       s.data[greatest(span.lo - s.base_offset + 1, 1) : least(span.hi, s.end_offset) - s.base_offset + 1],
                                       -- NULL for a frame without meta: unnest pads it with NULLs
                                       s.meta[greatest(span.lo - s.base_offset + 1, 1) : least(span.hi, s.end_offset) - s.base_offset + 1])
                            WITH ORDINALITY AS u(txn_id, data, meta, k)
             WHERE s.partition_id = c.partition_id
               AND s.base_offset >= coalesce((SELECT max(b.base_offset) FROM queen.log_segments b
                                               WHERE b.partition_id = c.partition_id AND b.base_offset <= span.lo), span.lo)
               AND s.base_offset <= span.hi
        ), counted AS (
            SELECT picked.off, msgs.txn_id, msgs.data, msgs.meta, msgs.created_at, picked.last_error,
                   coalesce(picked.marked, CASE WHEN picked.off <= c.delivered_to THEN 1 ELSE 0 END) AS before
              FROM picked JOIN msgs ON msgs.off = picked.off
        )
        SELECT array_agg(x.off ORDER BY x.off), array_agg(x.txn_id ORDER BY x.off), array_agg(x.data ORDER BY x.off),
               array_agg(x.created_at ORDER BY x.off),
               CASE WHEN bool_or(x.meta IS NOT NULL) THEN array_agg(x.meta ORDER BY x.off) END,
               -- deliveries counting this one; for a dead letter, those it had
               array_agg(CASE WHEN x.dead THEN x.before ELSE x.before + 1 END ORDER BY x.off),
               array_agg(x.last_error ORDER BY x.off), array_agg(x.dead ORDER BY x.off), array_agg(x.too_large ORDER BY x.off),
               -- the lease's span, and the highest offset handed out, dead ones included
               min(x.off) FILTER (WHERE NOT x.dead), max(x.off) FILTER (WHERE NOT x.dead), max(x.off)
          INTO a_off, a_txn, a_data, a_created, a_meta, a_att, a_err, a_dead, a_large, v_lo, v_hi, v_top
          FROM (SELECT y.* FROM (
                  -- what the messages so far take in the answer (dead ones none)
                  SELECT d.*, sum(CASE WHEN d.dead THEN 0 ELSE d.size END) OVER w AS taken,
                         count(*) FILTER (WHERE NOT d.dead) OVER w AS nth
                    FROM (SELECT z.*, z.out_of_attempts OR z.too_large AS dead
                            FROM (SELECT s.*, v_max_att > 0 AND s.before >= v_max_att AS out_of_attempts,
                                         p_max_delivery > 0 AND s.size > p_max_delivery AS too_large
                                    FROM (SELECT counted.*, octet_length(counted.data::text) + p_envelope
                                                   + coalesce(octet_length(counted.meta::text), 0)
                                                   + 6 * (octet_length(counted.txn_id) + coalesce(octet_length(counted.last_error), 0)) AS size
                                            FROM counted) AS s) AS z) AS d
                  WINDOW w AS (ORDER BY d.off)) AS y
                 WHERE y.taken <= p_room AND (y.taken <= p_max_bytes OR y.nth <= 1)) AS x;
    END IF;

    -- A delivery after the first is counted where the next one can see it.
    IF c.delivered_to >= c.next_offset THEN -- only then can anything be redelivered
        INSERT INTO queen.consumer_marks AS m (group_id, partition_id, off, attempts)
        SELECT p_group_id, c.partition_id, x.off, x.att FROM unnest(a_off, a_att, a_dead) AS x(off, att, dead)
         WHERE x.att > 1 AND NOT x.dead
        ON CONFLICT (group_id, partition_id, off) DO UPDATE SET attempts = excluded.attempts;
    END IF;

    IF v_lo IS NOT NULL THEN
        v_lease := gen_random_uuid();
        v_until := v_now + make_interval(secs => p_lease_seconds);
        -- Its expiry counts as a failure at the highest attempt it delivers.
        IF v_retry_ms > 0 OR cardinality(v_backoff) > 0 THEN
            v_lease_delay := queen.consumer_retry_delay(v_retry_ms, v_backoff,
                                 (SELECT max(x.att) FROM unnest(a_att, a_dead) AS x(att, dead) WHERE NOT x.dead));
        END IF;
    END IF;
    UPDATE queen.consumer_cursors cc
       SET next_offset = c.next_offset, lease_id = v_lease, lease_consumer = p_consumer,
           lease_from = v_lo, lease_to = v_hi, lease_until = v_until,
           delivered_to = greatest(c.delivered_to, coalesce(v_top, -1)), leased_at = v_now,
           lease_heard = false, lease_delivered_before = c.delivered_to, lease_delay = v_lease_delay, delayed_until = NULL,
           lease_counted = v_counted AND v_lease IS NOT NULL
     WHERE cc.group_id = p_group_id AND cc.partition_id = c.partition_id;

    RETURN QUERY
        SELECT c.partition_id, v_pname, v_lease, v_until, a_off, a_txn, a_data, a_created, a_att, a_err, a_dead, a_large, false, a_meta;
END
$$;
