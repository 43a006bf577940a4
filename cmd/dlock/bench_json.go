package main

import (
	"io"
	"time"
)

// benchReport is the JSON of `dlock bench --json` (docs/cli.md, "JSON
// output").
type benchReport struct {
	Target     string              `json:"target"`
	DurationMs int64               `json:"duration_ms"` // of each scenario
	Scenarios  []benchScenarioJSON `json:"scenarios"`   // those that ran to the end
	Error      string              `json:"error,omitempty"`
}

// benchScenarioJSON is one scenario's line.
type benchScenarioJSON struct {
	Name             string  `json:"name"`
	Goroutines       int     `json:"goroutines"`
	OpsPerSec        float64 `json:"ops_per_sec"`
	P50us            int64   `json:"p50_us"`
	P99us            int64   `json:"p99_us"`
	MaxUs            int64   `json:"max_us"`
	Fairness         float64 `json:"fairness"`
	Counter          int64   `json:"counter"`           // the value only the lock protects
	CriticalSections int64   `json:"critical_sections"` // counted by the workers; equal to counter unless the lock failed
}

func (b *benchReport) add(name string, g int, r *benchResult) {
	us := func(d time.Duration) int64 { return d.Microseconds() }
	b.Scenarios = append(b.Scenarios, benchScenarioJSON{Name: name, Goroutines: g, OpsPerSec: r.perSec(),
		P50us: us(r.pct(0.5)), P99us: us(r.pct(0.99)), MaxUs: us(r.pct(1)), Fairness: r.fairness(),
		Counter: r.protected(), CriticalSections: r.total()})
}

// write prints the report with err's message, if any.
func (b *benchReport) write(w io.Writer, err error) {
	if err != nil {
		b.Error = unprefixed(err)
	}
	_ = writeJSON(w, b)
}
