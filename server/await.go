package server

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"
)

// permanent is an error retry gives up on at once.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// retry calls attempt until it succeeds, fails for good (permanent) or
// ctx ends, waiting 250 ms, doubled up to 5 s, between attempts.
func retry(ctx context.Context, log zerolog.Logger, what string, attempt func() error) error {
	const first, most = 250 * time.Millisecond, 5 * time.Second
	wait := first
	for {
		err := attempt()
		var p permanent
		switch {
		case err == nil:
			return nil
		case errors.As(err, &p):
			return p.error
		}
		log.Warn().Err(err).Dur("retry_in_ms", wait).Msg("waiting for " + what)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, most)
	}
}
