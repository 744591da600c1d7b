-- Queue configuration: segment retention. (Retention's procedure, and the
-- push taking each watermark's window, are in pgstore/routines/.)

-- Segment retention per queue: 0 keeps messages forever. It never touches
-- log_txns, which only the window governs.
ALTER TABLE queen.queues
    ADD COLUMN retention_seconds integer NOT NULL DEFAULT 0 CHECK (retention_seconds >= 0);

