package consumer

// DrainBegun reports whether Drain was called: no pop starts after it.
func (cs *Consumer) DrainBegun() bool {
	select {
	case <-cs.draining:
		return true
	default:
		return false
	}
}
