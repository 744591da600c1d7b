package gateway

import (
	"github.com/queengate/queengate/internal/natsembed"
	"github.com/queengate/queengate/internal/storewatch"
)

// The embedded nats-server and the store watch live in internal/natsembed
// and internal/storewatch; the gateway's tests keep their names for them.
type (
	EmbeddedNATS     = natsembed.Config
	StoreWatchConfig = storewatch.Config
)

var (
	StartEmbeddedNATS = natsembed.Start
	NewStoreWatch     = storewatch.New
)
