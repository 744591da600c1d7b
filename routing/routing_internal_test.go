package routing

import (
	"fmt"
	"testing"

	"github.com/queengate/queengate/internal/peers"
)

func TestRendezvousOwnersAreFairAndMoveOnlyTheLeaversShards(t *testing.T) {
	const shards = 64
	members := []string{"gw-a", "gw-b", "gw-c"}
	owned := map[string]int{}
	before := make([]string, shards)
	for k := range shards {
		before[k] = owner(k, members)
		owned[before[k]]++
	}
	for _, m := range members {
		// A fair share is 21; rendezvous hashing over 64 shards keeps
		// each member well within 10..32.
		if owned[m] < 10 || owned[m] > 32 {
			t.Errorf("%s owns %d of %d shards: %v", m, owned[m], shards, owned)
		}
	}
	remaining := []string{"gw-a", "gw-c"}
	for k := range shards {
		after := owner(k, remaining)
		if before[k] != "gw-b" && after != before[k] {
			t.Errorf("shard %d moved from %s to %s though its owner stayed", k, before[k], after)
		}
		if after == "gw-b" {
			t.Errorf("shard %d still owned by the member that left", k)
		}
	}
	if owner(0, nil) != "" {
		t.Error("no member must own nothing")
	}
}

func TestServingSetRoundTrips(t *testing.T) {
	for _, n := range []int{1, 63, 64, 65, 1024} {
		b := newBitset(n)
		for k := 0; k < n; k += 3 {
			b.set(k, true)
		}
		got, err := decodeBitset(b.encode(), n)
		if err != nil {
			t.Fatalf("%d shards: %v", n, err)
		}
		for k := range n {
			if got.has(k) != (k%3 == 0) {
				t.Fatalf("%d shards: shard %d came back %v", n, k, got.has(k))
			}
		}
		public, err := DecodeServing(b.encode(), n)
		if err != nil || len(public) != n || !public[0] || n > 1 && public[1] {
			t.Fatalf("%d shards: DecodeServing gave %v (%v)", n, public, err)
		}
		if _, err := decodeBitset(b.encode(), n+64); err == nil {
			t.Errorf("a set of %d shards decoded as one of %d", n, n+64)
		}
	}
}

func TestProbeSubjectsAreJudged(t *testing.T) {
	k := ShardOf(64, peers.ProbeQueue, "x1")
	for subject, want := range map[string]mappingState{
		"queen.push.$qgprobe.x1":                            mappingAbsent,
		fmt.Sprintf("queen.shard.%d.$qgprobe.x1", k):        mappingPresent,
		fmt.Sprintf("queen.shard.%d.$qgprobe.x1", k+64):     "",
		fmt.Sprintf("queen.shard.%d.$qgprobe.x1", (k+1)%64): "",
	} {
		got, err := judgeProbe("queen", 64, subject)
		if want == "" {
			if err == nil {
				t.Errorf("%s: judged %s, want a mismatch error", subject, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s: judged %s (%v), want %s", subject, got, err, want)
		}
	}
}
