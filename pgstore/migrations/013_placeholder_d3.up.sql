-- Placeholder on branch d3 only, so that 014 applies in its tests: migration
-- 013 belongs to another branch. Delete this file when merging.
SELECT 1;
