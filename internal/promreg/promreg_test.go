package promreg_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/queengate/queengate/internal/promreg"
)

func counter(name string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: name})
}

func TestRegisterAllRegistersEveryCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := promreg.RegisterAll(reg, counter("a_total"), counter("b_total")); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil || len(families) != 2 || families[0].GetName() != "a_total" || families[1].GetName() != "b_total" {
		t.Errorf("gathered %v, %v; want a_total and b_total", families, err)
	}
}

func TestRegisterAllStopsAtTheFirstError(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := promreg.RegisterAll(reg, counter("a_total"), counter("a_total"), counter("c_total")); err == nil {
		t.Fatal("registering a_total twice: no error")
	}
	if families, _ := reg.Gather(); len(families) != 1 || families[0].GetName() != "a_total" {
		t.Errorf("gathered %v; want a_total alone (nothing after the failed one)", families)
	}
}

func TestRegisterAllWithoutARegistererDoesNothing(t *testing.T) {
	if err := promreg.RegisterAll(nil, counter("a_total")); err != nil {
		t.Errorf("nil registerer: %v", err)
	}
}
