package consume

import "github.com/queengate/queengate/model"

// KnownGroupID is the id this gateway has cached for queue's group name.
func (c *Consumers) KnownGroupID(queue, name string) (int64, bool) {
	g, ok := c.knownGroups.Load(queue + "/" + name)
	if !ok {
		return 0, false
	}
	return g.(model.Group).ID, true
}
