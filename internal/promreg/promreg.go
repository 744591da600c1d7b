// Package promreg registers a service's Prometheus collectors, once for
// every package that exports metrics.
package promreg

import "github.com/prometheus/client_golang/prometheus"

// RegisterAll registers cs in order and stops at the first error; a nil
// reg (metrics off, as in most tests) registers nothing.
func RegisterAll(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
