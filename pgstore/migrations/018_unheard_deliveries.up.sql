-- Poison messages (docs/protocol.md, "What an attempt is"): a lease that
-- runs out with its consumer never heard from costs no attempt, since its
-- answer may have been lost; but a message that kills its consumer before
-- it says a word would then be delivered without end. So the leases that
-- run out unheard from the same first offset are counted, and every
-- max_unheard_deliveries-th of them counts its attempts after all.

-- How many leases in a row, run out unheard from the same message, count
-- one attempt; 0: none ever does.
ALTER TABLE queen.queues
    ADD COLUMN max_unheard_deliveries integer NOT NULL DEFAULT 3 CHECK (max_unheard_deliveries >= 0);

-- The first offset of the cursor's last lease that ran out unheard, and
-- how many leases from that offset ran out unheard in all. A lease from
-- another offset starts the count again; a seek clears it.
ALTER TABLE queen.consumer_cursors
    ADD COLUMN unheard_from bigint,
    ADD COLUMN unheard integer NOT NULL DEFAULT 0;
