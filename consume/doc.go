// Package consume owns the consuming endpoints of docs/protocol.md
// ("Consuming"): pops with long polls woken by the commits every gateway
// announces, acks, ack-and-push, lease renewal and release, consumer
// groups (list, create, seek, delete), and their metrics: the consume.*
// subjects. Consumers is one table of entries (Operations) that a gateway
// serves on NATS and the admin HTTP server mounts for the groups; the
// store's row locks decide between gateways. A queue deleted or purged
// (package operator serves both) is forgotten here through QueueDeleted
// and QueuePurged.
package consume
