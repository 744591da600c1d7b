package queengate

import "github.com/nats-io/nats.go"

// NATSAuth is how a connection to NATS proves who it is and checks the
// server: the options queengate and queenctl share (QUEEN_NATS_USER,
// QUEEN_NATS_PASSWORD, QUEEN_NATS_TOKEN, QUEEN_NATS_NKEY, QUEEN_NATS_CREDS,
// QUEEN_NATS_TLS_CA, QUEEN_NATS_TLS_CERT, QUEEN_NATS_TLS_KEY). Every field
// is optional; set ones are all given to the server.
type NATSAuth struct {
	User, Password string
	Token          string
	// NKeyFile is a file holding a user's nkey seed.
	NKeyFile string
	// CredsFile is a credentials file (JWT and seed).
	CredsFile string
	// TLSCA verifies the server's certificate; TLSCert and TLSKey are the
	// client's own.
	TLSCA, TLSCert, TLSKey string
}

// Options are a's nats.Connect options. The error is NKeyFile's (not
// readable, or not a seed), for the caller to name the setting.
func (a NATSAuth) Options() ([]nats.Option, error) {
	var opts []nats.Option
	if a.User != "" {
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	}
	if a.Token != "" {
		opts = append(opts, nats.Token(a.Token))
	}
	if a.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(a.CredsFile))
	}
	if a.NKeyFile != "" {
		opt, err := nats.NkeyOptionFromSeed(a.NKeyFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, opt)
	}
	if a.TLSCA != "" {
		opts = append(opts, nats.RootCAs(a.TLSCA))
	}
	if a.TLSCert != "" || a.TLSKey != "" {
		opts = append(opts, nats.ClientCert(a.TLSCert, a.TLSKey))
	}
	return opts, nil
}
