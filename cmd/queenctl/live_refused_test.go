package main

import (
	"testing"

	"github.com/queengate/queengate/internal/securitydoc"
)

// TestLiveNATSRefusal runs a gateway whose embedded NATS has the users of
// docs/security.md. A producer pushing to a queue it may not, or a
// consumer consuming one, is told at once that NATS refused the subject
// (exit 4), not that the gateway did not answer; the consumer may list
// its own queue's groups.
func TestLiveNATSRefusal(t *testing.T) {
	t.Parallel()
	conf := securitydoc.File(t, "../..")
	g := startGateway(t, "QUEEN_NATS_CONFIG="+conf, "QUEEN_NATS_USER=queengate", "QUEEN_NATS_PASSWORD=gateway-secret")
	producer := []string{"--nats", g.natsURL, "--nats-user", "orders-producer", "--nats-password", "producer-secret"}
	consumer := []string{"--nats", g.natsURL, "--nats-user", "orders-consumer", "--nats-password", "consumer-secret"}

	ctl(t, "", flags(producer, "push", "orders", "p", `{"a":1}`)...).expect(t, exitOK, "queued")
	ctl(t, "", flags(consumer, "consume", "orders", "--group", "g", "--count", "1")...).expect(t, exitOK, `"a":1`)
	ctl(t, "", flags(consumer, "get", "groups", "orders")...).expect(t, exitOK, "GROUP", "g ", "p ")

	ctl(t, "", flags(producer, "push", "other", "p", `{"a":1}`)...).
		expect(t, exitRefused, "NATS refused: permissions violation for publish to", "other")
	ctl(t, "", flags(consumer, "consume", "other", "--group", "g", "--count", "1")...).
		expect(t, exitRefused, `NATS refused: permissions violation for publish to "queen.consume.pop.other"`)
	ctl(t, "", flags(consumer, "get", "groups", "other")...).
		expect(t, exitRefused, `NATS refused: permissions violation for publish to "queen.consume.groups.other"`)
}
