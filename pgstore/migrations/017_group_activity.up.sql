-- Idle groups (docs/protocol.md, "Idle groups and retention"): a group is
-- idle when nothing of it is heard, not only when nothing is leased. Pops
-- that deliver nothing (long polls answered empty, a partition held by a
-- failure's delay) write no cursor, so the gateways note every pop, ack,
-- renewal and release in memory and write the latest per group here, in
-- one statement per tick for all the groups they heard from.
-- NULL: nothing noted since this column came.
ALTER TABLE queen.consumer_groups ADD COLUMN active_at timestamptz;
