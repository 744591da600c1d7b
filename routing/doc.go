// Package routing owns the routing shards that give partitions affinity to
// gateways: the NATS subject mappings that spread pushes onto shards
// (ShardMappings, ShardOf), the heartbeats by which gateways learn each
// other, the rendezvous hashing that names each shard's owner, the
// make-before-break handovers, and the probe that checks where NATS really
// delivers pushes. It subscribes shards on the push endpoint through
// Subscriber and knows nothing else of the gateway, so the load and chaos
// tools use ShardMappings without linking the server.
package routing
