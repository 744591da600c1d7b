package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// heartbeat is a connection of its own for telling whether PostgreSQL
// answers: a pool full of pushes stalled on a frozen server must not make
// the check wait for a free connection, and a busy pool must not pass for
// a dead server.
type heartbeat struct {
	mu   sync.Mutex
	conn *pgx.Conn
}

// Heartbeat checks, on its own connection (made again after a failure),
// that PostgreSQL answers within ctx.
func (s *Store) Heartbeat(ctx context.Context) error {
	s.hb.mu.Lock()
	defer s.hb.mu.Unlock()
	if s.hb.conn == nil {
		conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
		if err != nil {
			return err
		}
		s.hb.conn = conn
	}
	if err := s.hb.conn.Ping(ctx); err != nil {
		s.hb.closeLocked()
		return err
	}
	return nil
}

func (h *heartbeat) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closeLocked()
}

func (h *heartbeat) closeLocked() {
	if h.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = h.conn.Close(ctx)
	h.conn = nil
}
