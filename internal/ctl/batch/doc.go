// Package batch is what queenctl push sends: messages from arguments
// (valid JSON as is, anything else as a JSON string) or from JSON lines,
// every line checked before anything is sent, each message's data byte
// for byte; and those messages cut into request bodies of at most a
// count and the NATS max payload.
package batch
