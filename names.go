package queengate

import "fmt"

// checkPlace refuses names a subject cannot carry: a dot would name
// another queue or partition.
func checkPlace(queue, partition string) error {
	if !ValidName(queue) || !ValidName(partition) {
		return fmt.Errorf("queengate: bad queue or partition name %q/%q: %s", queue, partition, NameRule)
	}
	return nil
}
