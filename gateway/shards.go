package gateway

// shardSubscriber puts the router's shard subscriptions on the push
// endpoint (routing.Subscriber).
type shardSubscriber struct{ push *endpoint }

func (s shardSubscriber) Subscribe(subject string) error { return s.push.subscribe(subject) }
func (s shardSubscriber) Unsubscribe(subject string)     { s.push.unsubscribe(subject) }
