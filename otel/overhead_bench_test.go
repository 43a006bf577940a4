package dlockotel_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/memstore"
	dlockotel "example.com/dlock/otel"
	"example.com/dlock/redisstore"
)

// BenchmarkLockRelease measures an uncontended Lock+Release without an
// observer and with the OTel observer on the SDK (a manual reader, spans
// to a no-op exporter), on memstore (the observer's own cost) and on a
// Redis server (against a round trip).
func BenchmarkLockRelease(b *testing.B) {
	stores := []struct {
		name string
		new  func(b *testing.B) driver.Mutex
	}{
		{"memstore", func(*testing.B) driver.Mutex { return memstore.New(nil) }},
		{"redis", func(b *testing.B) driver.Mutex {
			srv := redisserver.Start(b)
			rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			b.Cleanup(func() { rc.Close() })
			s, err := redisstore.New(rc, nil)
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	for _, st := range stores {
		store := st.new(b)
		b.Run(st.name+"/off", func(b *testing.B) { lockRelease(b, store) })
		b.Run(st.name+"/otel", func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			obs, err := dlockotel.NewObserver(dlockotel.WithMeterProvider(mp), dlockotel.WithTracerProvider(tp))
			if err != nil {
				b.Fatal(err)
			}
			lockRelease(b, store, dlock.WithObserver(obs))
		})
		b.Run(st.name+"/otel-metrics", func(b *testing.B) {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			obs, err := dlockotel.NewObserver(dlockotel.WithMeterProvider(mp), dlockotel.WithTracerProvider(noop.NewTracerProvider()))
			if err != nil {
				b.Fatal(err)
			}
			lockRelease(b, store, dlock.WithObserver(obs))
		})
	}
}

func lockRelease(b *testing.B, store driver.Mutex, opts ...dlock.Option) {
	c, err := dlock.New(store, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.Lock(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
