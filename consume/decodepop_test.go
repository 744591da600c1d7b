package consume

import (
	"encoding/json"
	"testing"

	queengate "github.com/queengate/queengate"
)

// popWithAck is a pop carrying the ack of a batch of n, as Consume sends it.
func popWithAck(n int) []byte {
	ack := &queengate.PopAck{Partition: "p3", LeaseID: "5f0c2a9e-3b1d-4c6e-9a8f-0123456789ab"}
	for i := range n {
		off := int64(1000000 + i)
		ack.Items = append(ack.Items, queengate.AckItem{Offset: &off, Status: queengate.AckCompleted})
	}
	b, _ := json.Marshal(queengate.PopRequest{Group: "g", Consumer: "c1", Max: 100, LeaseMs: 30000, WaitMs: 5000, Ack: ack})
	return b
}

// BenchmarkDecodePopWithAck: decoding a pop that carries a batch's ack
// was a fifth of the gateway's CPU per consumed message.
func BenchmarkDecodePopWithAck(b *testing.B) {
	body := popWithAck(100)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, werr := decodePop(body); werr != nil {
			b.Fatal(werr)
		}
	}
}

// TestAPopsAckDecodesWithFewAllocationsPerItem: allocations were most of
// decoding a pop carrying an ack (16 per item: a closure per field, each
// key and string copied, a regexp per number). An item now takes its
// fields' array, its status and its offset.
func TestAPopsAckDecodesWithFewAllocationsPerItem(t *testing.T) {
	const items = 100
	body := popWithAck(items)
	allocs := testing.AllocsPerRun(20, func() {
		if _, werr := decodePop(body); werr != nil {
			t.Fatal(werr)
		}
	})
	if perItem := allocs / items; perItem > 4 {
		t.Fatalf("decoding a pop with an ack of %d items allocates %.0f times, %.1f per item; want at most 4", items, allocs, perItem)
	}
}
