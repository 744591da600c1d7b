package queengate_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/natsembed"
)

// connectWith connects to url with auth's options.
func connectWith(t *testing.T, url string, auth queengate.NATSAuth) error {
	t.Helper()
	opts, err := auth.Options()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, opts...)
	if err == nil {
		nc.Close()
	}
	return err
}

// TestNATSAuthPassesCredentials: a server requiring a password, a token
// or an nkey accepts the matching NATSAuth and refuses another.
func TestNATSAuthPassesCredentials(t *testing.T) {
	t.Parallel()
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	public, _ := user.PublicKey()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name         string
		server       natsembed.Config
		right, wrong queengate.NATSAuth
	}{
		{"password", natsembed.Config{User: "app", Password: "s3cret"},
			queengate.NATSAuth{User: "app", Password: "s3cret"}, queengate.NATSAuth{User: "app", Password: "guess"}},
		{"token", natsembed.Config{Token: "t0ken"}, queengate.NATSAuth{Token: "t0ken"}, queengate.NATSAuth{Token: "other"}},
		{"nkey", natsembed.Config{NKey: public}, queengate.NATSAuth{NKeyFile: seedFile}, queengate.NATSAuth{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.server.Port = -1
			ns, err := natsembed.Start(c.server)
			if err != nil {
				t.Fatal(err)
			}
			defer ns.Shutdown()
			if err := connectWith(t, ns.ClientURL(), c.right); err != nil {
				t.Errorf("refused the right credentials: %v", err)
			}
			if err := connectWith(t, ns.ClientURL(), c.wrong); err == nil {
				t.Error("accepted the wrong credentials")
			}
		})
	}
}

// TestNATSAuthNamesABadSeed: a file that is not an nkey seed fails when
// the options are built, not at connect.
func TestNATSAuthNamesABadSeed(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "bad.nk")
	if err := os.WriteFile(bad, []byte("not a seed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (queengate.NATSAuth{NKeyFile: bad}).Options(); err == nil {
		t.Error("Options accepted a file with no seed")
	}
}
