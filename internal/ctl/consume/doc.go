// Package consume is queenctl's consume command at work: it consumes a
// group's messages with the client's Consume, prints each as a JSON line
// (its data byte for byte as pushed), acknowledges it once printed, and
// ends with an error at the first ack the gateway did not apply or line
// it could not print; an interrupt drains what is in hand. The command
// line and its checks stay in cmd/queenctl.
package consume
