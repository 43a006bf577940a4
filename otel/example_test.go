package dlockotel_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"example.com/dlock"
	"example.com/dlock/memstore"
	dlockotel "example.com/dlock/otel"
)

// Export the metrics to Prometheus: an OTel Prometheus exporter as the
// MeterProvider's reader, its registry served on /metrics (here on a
// loopback test server, scraped once).
func Example_prometheus() {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutTargetInfo(), otelprom.WithoutScopeInfo())
	if err != nil {
		fmt.Println(err)
		return
	}
	obs, err := dlockotel.NewObserver(dlockotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))))
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := dlock.New(memstore.New(nil), dlock.WithObserver(obs))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(context.Background())
	_ = c.Do(context.Background(), "orders/42", func(ctx context.Context) error { return nil })

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "dlock_held") || strings.HasPrefix(line, "dlock_wait_duration_seconds_count") ||
			strings.HasPrefix(line, "dlock_hold_duration_seconds_count") || strings.HasPrefix(line, "# HELP dlock_wait") {
			fmt.Println(line)
		}
	}
	// Output:
	// dlock_held{dlock_kind="lock"} 0
	// dlock_hold_duration_seconds_count{dlock_kind="lock"} 1
	// # HELP dlock_wait_duration_seconds Time a call waited for a lock, permit, read-write holding or a rate limiter's admission, by how the wait ended.
	// dlock_wait_duration_seconds_count{dlock_kind="lock",dlock_outcome="acquired"} 1
}
