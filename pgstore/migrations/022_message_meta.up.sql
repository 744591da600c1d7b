-- A message's meta: its headers and the encoding of its data, as the
-- JSON members its answers carry beside the data (docs/design.md, "A
-- message's meta"): {"headers":{…},"dataEncoding":"base64"}. It is
-- text, not json: the gateway writes it, so PostgreSQL need not parse it
-- again (as json[], parsing each element on insert cost a third of
-- PostgreSQL's CPU for three headers a message). meta[i] is
-- message i's (NULL for a message with neither); the column is NULL for
-- a frame where no message has any, which costs a push without headers
-- nothing. Binary data is kept in data as the JSON string of its base64,
-- marked by dataEncoding: reads hand the stored text out as it is.
ALTER TABLE queen.log_segments ADD COLUMN IF NOT EXISTS meta text[];
-- Producers repeat their headers message after message: lz4 keeps a
-- frame's meta small, and costs far less than the default pglz.
ALTER TABLE queen.log_segments ALTER COLUMN meta SET STATISTICS 0, ALTER COLUMN meta SET COMPRESSION lz4;
-- A timer's message, fired through the same push.
ALTER TABLE queen.timers ADD COLUMN IF NOT EXISTS meta text;
ALTER TABLE queen.timers ALTER COLUMN meta SET STATISTICS 0, ALTER COLUMN meta SET COMPRESSION lz4;
