// Package wire is the gateway's one codec: the strict JSON decoder and the
// shapes of request bodies built on it, the encoders of answers (a push's
// reply, a read, a message, a pop, an ack) and their one string encoder,
// error bodies and headers, and the cutting of answers to what one NATS
// message carries. It holds no state and talks to nothing: every face of
// the gateway decodes and answers through it, so that all of them speak
// the same bytes.
package wire
