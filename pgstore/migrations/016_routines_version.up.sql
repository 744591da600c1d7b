-- The routine set is versioned and only moves forward (routines.go,
-- RoutinesVersion): a build installs its routines only over a lower
-- version, and refuses to start over a higher one, as over a newer
-- schema. An old gateway restarting in the middle of a rolling upgrade
-- can then no longer put its routines back under the new gateways.
-- The set recorded before this column came is version 0: any build that
-- has the column installs over it.
ALTER TABLE queen.routines ADD COLUMN version integer NOT NULL DEFAULT 0;
