package dlockotel

import (
	"errors"

	"go.opentelemetry.io/otel/metric"
)

// The metric names.
const (
	MetricWaitDuration  = "dlock.wait.duration"
	MetricHoldDuration  = "dlock.hold.duration"
	MetricHeld          = "dlock.held"
	MetricLost          = "dlock.lost"
	MetricRenewFailures = "dlock.renew.failures"
	MetricRenewLag      = "dlock.renew.lag"

	MetricLimitDecisions     = "dlock.limit.decisions"     // a Limiter's decisions, by outcome
	MetricIdempotencyResults = "dlock.idempotency.results" // a Guard's calls, by outcome
)

// durationBuckets are the histogram boundaries, in seconds, of waits and
// holds: from half a millisecond (an uncontended acquisition on a local
// store) to a minute. The SDK's default boundaries (0 to 10000) are made
// for milliseconds.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// lagBuckets are the boundaries, in seconds, of renewal round trips.
var lagBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// instruments are the Observer's metrics.
type instruments struct {
	waitDuration  metric.Float64Histogram
	holdDuration  metric.Float64Histogram
	held          metric.Int64UpDownCounter
	lost          metric.Int64Counter
	renewFailures metric.Int64Counter
	renewLag      metric.Float64Histogram
	decisions     metric.Int64Counter
	results       metric.Int64Counter
}

// newInstruments creates the instruments with m.
func newInstruments(m metric.Meter) (instruments, error) {
	var in instruments
	var err, e error
	in.waitDuration, e = m.Float64Histogram(MetricWaitDuration, metric.WithUnit("s"),
		metric.WithDescription("Time a call waited for a lock, permit, read-write holding or a rate limiter's admission, by how the wait ended."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	err = errors.Join(err, e)
	in.holdDuration, e = m.Float64Histogram(MetricHoldDuration, metric.WithUnit("s"),
		metric.WithDescription("Time a holding was held, from its grant to its release, handoff or loss."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	err = errors.Join(err, e)
	in.held, e = m.Int64UpDownCounter(MetricHeld, metric.WithUnit("{holding}"),
		metric.WithDescription("Holdings granted and not yet released, handed off or lost."))
	err = errors.Join(err, e)
	in.lost, e = m.Int64Counter(MetricLost, metric.WithUnit("{holding}"),
		metric.WithDescription("Holdings that ended without a release, by cause."))
	err = errors.Join(err, e)
	in.renewFailures, e = m.Int64Counter(MetricRenewFailures, metric.WithUnit("{renewal}"),
		metric.WithDescription("Automatic renewals that failed (each is retried sooner)."))
	err = errors.Join(err, e)
	in.renewLag, e = m.Float64Histogram(MetricRenewLag, metric.WithUnit("s"),
		metric.WithDescription("Round trip of the automatic renewals that succeeded."),
		metric.WithExplicitBucketBoundaries(lagBuckets...))
	err = errors.Join(err, e)
	in.decisions, e = m.Int64Counter(MetricLimitDecisions, metric.WithUnit("{decision}"),
		metric.WithDescription("Decisions of a rate limiter (each try of a wait too), by outcome: allowed, denied, or why none was made."))
	err = errors.Join(err, e)
	in.results, e = m.Int64Counter(MetricIdempotencyResults, metric.WithUnit("{call}"),
		metric.WithDescription("Calls of an idempotency guard, by outcome: executed, replayed, in_flight, mismatch, took_over, stale, failed, …"))
	err = errors.Join(err, e)
	return in, err
}
