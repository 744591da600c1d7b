package pgstore_test

import (
	"testing"

	"github.com/queengate/queengate/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Run(m) }
