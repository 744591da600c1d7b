package world

import (
	"fmt"
	"os"
	"testing"

	"github.com/queengate/queengate/internal/pgcluster"
)

// TestMain fails the run when a test left a PostgreSQL process behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := pgcluster.CheckLeftovers(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}
