// Package consume owns the consuming endpoints of docs/protocol.md
// ("Consuming"): pops with long polls woken by the commits every gateway
// announces, acks, ack-and-push, lease renewal and release, consumer
// groups (list, create, seek, delete), queue delete and purge, and their
// metrics. Consumers is one table of entries (Operations) that a gateway
// serves on NATS and the admin HTTP server mounts for the groups and the
// deletes; the store's row locks decide between gateways.
package consume
