package server

import (
	"runtime"
	"runtime/debug"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/startstop"
	"github.com/queengate/queengate/internal/storewatch"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/operator"
	"github.com/queengate/queengate/pgstore"
	"github.com/queengate/queengate/retention"
	"github.com/queengate/queengate/routing"
	"github.com/queengate/queengate/timers"
)

// assembly is the gateway put together: its services, in start order.
type assembly struct {
	services []startstop.Service
	admin    *operator.Admin
}

// assemble builds every service and wires them together; nothing runs yet.
func assemble(cfg Config, store *pgstore.Store, nc *nats.Conn) (*assembly, error) {
	component := func(name string) zerolog.Logger { return cfg.Logger.With().Str("component", name).Logger() }
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	reg.MustRegister(buildInfo(cfg.Version), store.Collector(), newNATSCollector(nc))
	ing, err := ingest.New(store, cfg.Ingest, component("ingest"), reg)
	if err != nil {
		return nil, err
	}
	tsvc, err := timers.New(store, timers.Config{NoFire: cfg.NoTimerFire, OnFired: ing.LearnFired}, component("timers"), reg)
	if err != nil {
		return nil, err
	}
	durability := newDurabilityWatch(store, component("durability"), reg)
	pgWatch := watchStore(store, ing, durability, reg)
	d := &assembly{services: []startstop.Service{pgWatch, durability, ing, tsvc}}
	ops := operator.NewOps(operator.OpsConfig{Token: cfg.AdminToken, Version: cfg.Version, WantSchema: pgstore.LatestVersion(),
		Durability: durability.Current}, store, ing, nc)
	timerOps := timers.NewOps(tsvc, ops.AnswerBudget)
	consumers := consume.New(store)
	consumers.UseTail(ing.Tail(), false) // the same store: the tail's epochs are its
	ops.WatchQueues(consumers)
	gcfg := gateway.Config{Prefix: cfg.Prefix, MaxBatch: cfg.MaxBatch, Version: cfg.Version,
		Endpoints: []gateway.EndpointSet{ops, timerOps, consumers}}
	if cfg.RoutingShards > 0 {
		gcfg.Routing = &routing.Config{Shards: cfg.RoutingShards, Ready: pgWatch.Up}
	}
	gw, err := gateway.New(gcfg, nc, ing, component("gateway"), reg)
	if err != nil {
		return nil, err
	}
	ing.OnCommit(gw.PublishCommitted)
	if cfg.RetentionInterval > 0 {
		opts := model.DefaultRetainOptions()
		opts.Slack = cfg.RetentionSlack
		r, err := retention.NewRunner(store, cfg.RetentionInterval, opts, component("retention"), reg)
		if err != nil {
			return nil, err
		}
		d.services = append(d.services, r)
	}
	// Stopped after the gateway, which answers the waiting pops first:
	// its last write has what they did.
	d.services = append(d.services, consumers.ActivityFlusher(component("consume")))
	d.admin = operator.NewAdmin(cfg.AdminAddr, store, pgstore.LatestVersion(), nc, reg, component("admin"))
	d.admin.Mount(ops)
	d.admin.MountTimers(timerOps)
	d.admin.MountTable(consumers)
	d.admin.AddReadiness("gateway", gw.Serving)
	// The gateway last: it takes requests once everything behind it runs.
	d.services = append(d.services, gw)
	return d, nil
}

// watchStore makes a gateway cut off from PostgreSQL answer pushes at
// once (503, or failed for what it held) instead of letting them wait out
// the push timeout, and say so in its routing heartbeats: ready gateways
// take its shards until it is back. Back, it may be another server (a
// failover): what an acknowledgement means is read again.
func watchStore(store *pgstore.Store, ing *ingest.Ingester, durability *durabilityWatch, reg prometheus.Registerer) *storewatch.Watch {
	onChange := func(up bool) {
		ing.SetStoreReachable(up)
		if up {
			durability.Refresh()
		}
	}
	w := storewatch.New(store, storewatch.Config{OnChange: onChange, LastCommit: ing.LastCommit})
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "queengate_postgres_reachable",
		Help: "1 while this gateway's heartbeat to PostgreSQL is answered, 0 after two in a row were not (pushes are then refused with 503).",
	}, func() float64 {
		if w.Up() {
			return 1
		}
		return 0
	}))
	return w
}

// buildInfo is the queengate_build_info gauge: 1, labelled with what was
// built.
func buildInfo(version string) prometheus.Collector {
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "queengate_build_info",
		Help:        "Always 1; the labels say which build is running.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}
