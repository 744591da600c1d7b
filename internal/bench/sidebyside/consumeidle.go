package sidebyside

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/bench/proc"
)

// cpuMeter reads the CPU time of the processes serving one side: given
// processes, and a PostgreSQL server's whole process tree when postmaster
// is set; own adds this process's (the load generator's).
type cpuMeter struct {
	pids       []int
	postmaster int
	own        bool
}

// newQueengateMeter meters the gateways, their NATS server and, when its
// processes can be read here, PostgreSQL (the returned error says why
// not; the meter is usable without it).
func newQueengateMeter(ctx context.Context, env *proc.Self) (cpuMeter, error) {
	m := cpuMeter{pids: env.PIDs()}
	var err error
	m.postmaster, err = proc.PostmasterPID(ctx, env.PGURL)
	return m, err
}

// seconds is the processes' CPU time so far.
func (m cpuMeter) seconds() (float64, error) {
	total := 0.0
	for _, pid := range m.pids {
		cpu, err := proc.CPUSeconds(pid)
		if err != nil {
			return 0, err
		}
		total += cpu
	}
	if m.postmaster > 0 {
		cpu, err := proc.TreeCPUSeconds(m.postmaster)
		if err != nil {
			return 0, err
		}
		total += cpu
	}
	if m.own {
		cpu, err := proc.OwnCPUSeconds()
		if err != nil {
			return 0, err
		}
		total += cpu
	}
	return total, nil
}

// perMessage runs f and gives the CPU it took per message of n, in µs.
func (m cpuMeter) perMessage(n int64, f func() error) (float64, error) {
	before, err := m.seconds()
	if err != nil {
		return 0, err
	}
	if err := f(); err != nil {
		return 0, err
	}
	return m.perMessageSince(before, n)
}

// perMessageSince is the CPU taken since the reading before per message
// of n, in µs.
func (m cpuMeter) perMessageSince(before float64, n int64) (float64, error) {
	after, err := m.seconds()
	if err != nil {
		return 0, err
	}
	return (after - before) / float64(max(n, 1)) * 1e6, nil
}

// consumeIdleReport is what long polls cost while nothing arrives, over a
// window with no pollers (the baseline: the gateway's own background
// work) and one with them.
type consumeIdleReport struct {
	Pollers int     `json:"pollers"`
	Seconds float64 `json:"seconds"` // each window
	// Statements per second: PostgreSQL transactions committed or rolled
	// back in the gateways' database (pg_stat_database), each statement
	// outside an explicit transaction counting one.
	BaselineStatementsPerSecond float64 `json:"baselineStatementsPerSecond"`
	StatementsPerSecond         float64 `json:"statementsPerSecond"`
	// CPU as a share of one core.
	BaselineGatewayCPUPercent float64 `json:"baselineGatewayCpuPercent"`
	GatewayCPUPercent         float64 `json:"gatewayCpuPercent"`
	PostgresCPUPercent        float64 `json:"postgresCpuPercent"` // -1 if not counted
	// PollsAnswered counts long polls answered within the window (a poll
	// that times out is answered empty and made again); PollErrors the
	// pollers that stopped on an error.
	PollsAnswered int64 `json:"pollsAnswered"`
	PollErrors    int64 `json:"pollErrors"`
	Delivered     int64 `json:"delivered"` // should stay 0: nothing arrives
}

// consumeIdle measures a window without pollers, then starts
// co.IdlePollers consumers of group, each long-polling queue (drained by
// group) for as long as the protocol allows, waits co.IdleSettle for
// their first pops to be served, and measures a window with them.
func consumeIdle(ctx context.Context, s *sideBySide, queue, group string, co ConsumeOptions, qg cpuMeter, logf func(string, ...any)) (*consumeIdleReport, error) {
	conn, err := pgx.Connect(ctx, s.env.PGURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rep := &consumeIdleReport{Pollers: co.IdlePollers, Seconds: co.IdleTime.Seconds()}
	gateways := cpuMeter{pids: s.env.GatewayPIDs()}
	postgres := cpuMeter{postmaster: qg.postmaster}
	logf("idle: %v without pollers", co.IdleTime)
	base, err := idleWindow(ctx, conn, gateways, postgres, co.IdleTime)
	if err != nil {
		return nil, err
	}
	rep.BaselineStatementsPerSecond, rep.BaselineGatewayCPUPercent = base.statements, base.gatewayCPU

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var answered, failed, delivered atomic.Int64
	var wg sync.WaitGroup
	for i := range co.IdlePollers {
		wg.Go(func() {
			for pctx.Err() == nil {
				a, err := s.client.Pop(pctx, queue, "", queengate.PopRequest{Group: group, Consumer: fmt.Sprint("idle-", i),
					WaitMs: queengate.MaxWaitMs})
				switch {
				case pctx.Err() != nil:
				case err != nil:
					failed.Add(1)
					return
				default:
					answered.Add(1)
					delivered.Add(int64(len(a.Messages)))
				}
			}
		})
	}
	logf("idle: %d long polls, %v to settle, then %v measured", co.IdlePollers, co.IdleSettle, co.IdleTime)
	time.Sleep(co.IdleSettle)
	answeredBefore := answered.Load()
	busy, err := idleWindow(ctx, conn, gateways, postgres, co.IdleTime)
	rep.PollsAnswered = answered.Load() - answeredBefore
	cancel()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	rep.StatementsPerSecond, rep.GatewayCPUPercent, rep.PostgresCPUPercent = busy.statements, busy.gatewayCPU, busy.postgresCPU
	rep.PollErrors, rep.Delivered = failed.Load(), delivered.Load()
	logf("idle: %.1f statements/s (%.1f without pollers), gateway CPU %.1f%% (%.1f%%), %d polls answered, %d failed",
		rep.StatementsPerSecond, rep.BaselineStatementsPerSecond, rep.GatewayCPUPercent, rep.BaselineGatewayCPUPercent, rep.PollsAnswered, rep.PollErrors)
	return rep, nil
}

// idleFigures are an idle window's rates; postgresCPU is -1 when
// PostgreSQL's processes are not metered.
type idleFigures struct{ statements, gatewayCPU, postgresCPU float64 }

// idleWindow measures for d: PostgreSQL's transactions per second in
// conn's database, and the CPU of gateways and postgres as a share of one
// core.
func idleWindow(ctx context.Context, conn *pgx.Conn, gateways, postgres cpuMeter, d time.Duration) (idleFigures, error) {
	type reading struct {
		at                      time.Time
		xacts                   int64
		gatewayCPU, postgresCPU float64
	}
	read := func() (r reading, err error) {
		if err = conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&r.xacts); err != nil {
			return r, err
		}
		if r.gatewayCPU, err = gateways.seconds(); err != nil {
			return r, err
		}
		r.postgresCPU, err = postgres.seconds()
		r.at = time.Now()
		return r, err
	}
	before, err := read()
	if err != nil {
		return idleFigures{}, err
	}
	time.Sleep(d)
	after, err := read()
	if err != nil {
		return idleFigures{}, err
	}
	secs := after.at.Sub(before.at).Seconds()
	f := idleFigures{statements: float64(after.xacts-before.xacts) / secs, gatewayCPU: (after.gatewayCPU - before.gatewayCPU) / secs * 100,
		postgresCPU: -1}
	if postgres.postmaster > 0 {
		f.postgresCPU = (after.postgresCPU - before.postgresCPU) / secs * 100
	}
	return f, nil
}
