package main

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/internal/securitydoc"
)

// subjectMatches says whether subject (no wildcards) matches pattern.
func subjectMatches(pattern, subject string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, p := range pt {
		switch {
		case p == ">":
			return len(st) > i
		case i >= len(st):
			return false
		case p != "*" && p != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}

func allowedBy(perms *server.SubjectPermission, subject string) bool {
	if perms == nil {
		return true
	}
	allowed := len(perms.Allow) == 0
	for _, p := range perms.Allow {
		allowed = allowed || subjectMatches(p, subject)
	}
	for _, p := range perms.Deny {
		if subjectMatches(p, subject) {
			return false
		}
	}
	return allowed
}

// violations counts the publishes NATS refused a connection. NATS names
// the subject after the account's mappings (a push's routing shard), so
// a refusal is known by the count going up while its request waits.
type violations struct {
	mu sync.Mutex
	n  int
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), "Publish") {
		v.mu.Lock()
		v.n++
		v.mu.Unlock()
	}
}

func (v *violations) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.n
}

// TestSecurityDocBlock runs the daemon's embedded nats-server with the
// authorization block of docs/security.md and checks every user of it
// against every subject the gateway serves, for the document's queue and
// another: a subject the user's permissions allow is answered by the
// gateway; any other is refused by NATS. The operator requests answer 401
// without the admin token and are served with it; the data-plane ones
// need none.
func TestSecurityDocBlock(t *testing.T) {
	t.Parallel()
	confFile := securitydoc.File(t, "../..")
	opts, err := server.ProcessConfigFile(confFile)
	if err != nil {
		t.Fatalf("the block of docs/security.md: %v", err)
	}
	users := map[string]*server.User{}
	for _, u := range opts.Users {
		users[u.Username] = u
	}
	for _, name := range []string{"queengate", "orders-producer", "orders-consumer", "operator"} {
		if users[name] == nil {
			t.Fatalf("docs/security.md's block has no user %q", name)
		}
	}
	d := startDaemon(t, "", "QUEEN_PG_URL="+pgtest.NewDB(t), "QUEEN_NATS_CONFIG="+confFile,
		"QUEEN_NATS_USER=queengate", "QUEEN_NATS_PASSWORD="+users["queengate"].Password, "QUEEN_ADMIN_TOKEN=op-token")

	if nc, err := nats.Connect(d.natsURL, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected")
	}
	var subjects []string
	for _, q := range []string{"orders", "payments"} {
		subjects = append(subjects, "queen.push."+q, "queen.push."+q+".p", "queen.jetstream."+q+".p", "queen.timer."+q+".p",
			"queen.consume.pop."+q, "queen.consume.pop."+q+".p", "queen.consume.ack."+q+".p",
			"queen.consume.renew."+q+".p", "queen.consume.release."+q+".p", "queen.consume.groups."+q,
			"queen.read."+q+".p", "queen.explain."+q+".p", "queen.queues.get."+q,
			"queen.dlq.list."+q, "queen.dlq.redrive."+q, "queen.queues.delete."+q, "queen.queues.purge."+q)
	}
	subjects = append(subjects, "queen.timer.cancel", "queen.configure", "queen.queues.list",
		"queen.status", "queen.overview", "queen.message.get", "queen.timer.list", "$SRV.PING",
		// Between gateways: no client may publish these.
		"queen.committed.orders", "queen.gateways.heartbeat", "queen.queuedeleted.orders")
	operatorSubjects := map[string]bool{"queen.configure": true, "queen.queues.list": true, "queen.queues.get.orders": true,
		"queen.queues.get.payments": true, "queen.status": true, "queen.overview": true, "queen.message.get": true, "queen.timer.list": true,
		"queen.dlq.list.orders": true, "queen.dlq.list.payments": true, "queen.dlq.redrive.orders": true, "queen.dlq.redrive.payments": true,
		"queen.queues.delete.orders": true, "queen.queues.delete.payments": true, "queen.queues.purge.orders": true, "queen.queues.purge.payments": true}

	for name, u := range users {
		if name == "queengate" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			refused := &violations{}
			nc, err := nats.Connect(d.natsURL, nats.UserInfo(name, u.Password), nats.ErrorHandler(refused.handler))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			var allowedSome, refusedSome bool
			for _, subject := range subjects {
				allowed := allowedBy(u.Permissions.Publish, subject)
				reply, err := ask(t, nc, refused, subject, "")
				switch {
				case allowed && err != nil:
					t.Errorf("%s may publish %s by the document, but: %v", name, subject, err)
				case !allowed && err == nil:
					t.Errorf("%s may not publish %s by the document, but the gateway answered %s", name, subject, reply.Data)
				case allowed && operatorSubjects[subject]:
					if code := reply.Header.Get("Nats-Service-Error-Code"); code != "401" {
						t.Errorf("%s: %s without the token answered %q %s, want 401", name, subject, code, reply.Data)
					}
					if reply, err := ask(t, nc, refused, subject, "bearer op-token"); err != nil || reply.Header.Get("Nats-Service-Error-Code") == "401" {
						t.Errorf("%s: %s with the token: %v %v", name, subject, err, reply)
					}
				case allowed && strings.HasPrefix(subject, "queen."):
					if code := reply.Header.Get("Nats-Service-Error-Code"); code == "401" {
						t.Errorf("%s: %s answered 401: a data-plane subject needs no token", name, subject)
					}
				}
				allowedSome, refusedSome = allowedSome || allowed, refusedSome || !allowed
			}
			if !allowedSome || !refusedSome {
				t.Errorf("%s: allowed some subjects %v, refused some %v: the document's permissions are not what this test checks", name, allowedSome, refusedSome)
			}
		})
	}
}

// ask publishes a request on subject and waits for the gateway's answer
// or NATS's refusal, whichever comes; "no responders" is an error too.
func ask(t *testing.T, nc *nats.Conn, refused *violations, subject, authorization string) (*nats.Msg, error) {
	t.Helper()
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	m := nats.NewMsg(subject)
	m.Reply, m.Data = inbox, []byte(`{}`)
	if authorization != "" {
		m.Header.Set("Authorization", authorization)
	}
	before := refused.count()
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	var reply *nats.Msg
	checkfor.Check(t, 30*time.Second, func() error {
		if refused.count() > before {
			return nil
		}
		var err error
		reply, err = sub.NextMsg(10 * time.Millisecond)
		if err == nil {
			return nil
		}
		return fmt.Errorf("no answer to %s and no refusal: %w", subject, err)
	})
	if reply == nil {
		return nil, errors.New("refused by NATS permissions")
	}
	if reply.Header.Get("Status") == "503" {
		return nil, errors.New("no responders")
	}
	return reply, nil
}
