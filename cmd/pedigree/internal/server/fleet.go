package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pedigree-ai/pedigree"
)

// fleet registers a fleet node's gauges and counters: its place in the
// stream, its lag, the records it applied and refused (a rate of applies
// is rate(pedigree_fleet_applied_records_total[1m])), and whether it is
// connected.
func (m *metrics) fleet(e *pedigree.Engine) {
	if _, ok := e.Fleet().Status(); !ok {
		return
	}
	status := func(f func(pedigree.FleetStatus) float64) func() float64 {
		return func() float64 { s, _ := e.Fleet().Status(); return f(s) }
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pedigree_fleet_lag_records", Help: "Records in the fleet's stream this node has not applied yet."},
			status(func(s pedigree.FleetStatus) float64 { return float64(s.Lag) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pedigree_fleet_applied_seq", Help: "Stream sequence of the last record this node applied."},
			status(func(s pedigree.FleetStatus) float64 { return float64(s.Applied) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pedigree_fleet_stream_seq", Help: "Last stream sequence this node knows of."},
			status(func(s pedigree.FleetStatus) float64 { return float64(s.Last) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pedigree_fleet_applied_records_total", Help: "Records this node applied since it started."},
			status(func(s pedigree.FleetStatus) float64 { return float64(s.Applies) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pedigree_fleet_refused_records_total", Help: "Records this node refused (not valid: reported, never applied)."},
			status(func(s pedigree.FleetStatus) float64 { return float64(s.Refused) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pedigree_fleet_connected", Help: "1 when connected to the fleet's NATS servers."},
			status(func(s pedigree.FleetStatus) float64 {
				if s.Connected {
					return 1
				}
				return 0
			})),
	)
}
