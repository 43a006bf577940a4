package payment

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/idemhttp"
	"example.com/dlock/redisstore"
)

// instanceConfig is what an instance of the payment service runs with.
type instanceConfig struct {
	name      string
	redisAddr string
	prefix    string        // the guard's key prefix in Redis
	lease     time.Duration // the guard's lease, renewed while a payment runs
	provider  *Provider
	// hang, when set, is called after each charge: the crash point. It
	// returns when the request is abandoned (its context ends, as it does
	// once the instance is killed: the handler reads the whole body, so
	// that net/http notices the closed connection).
	hang func(ctx context.Context, order string)
}

// instance is one instance of the payment service: an HTTP server on a
// loopback port with its own Redis connection and Guard.
type instance struct {
	url       string
	rdb       *redis.Client
	srv       *http.Server
	done      chan struct{}
	takeovers atomic.Int64
}

// startInstance serves the payment service on 127.0.0.1 and a free port:
//
//	POST /pay/{strategy}?order=ID   noguard, noguard-retry: charge with a
//	                                key of its own
//	                                guard, guard-crash: idemhttp, charged
//	                                with Execution.DownstreamKey
//	                                guard-fence-key: idemhttp, charged with
//	                                a key made of the order and the fence
//
// It answers 200 {"order", "instance", "charged"}; the guarded routes
// answer as idemhttp does (409 in flight, replays marked).
func startInstance(cfg instanceConfig) (*instance, error) {
	rdb := redis.NewClient(&redis.Options{Addr: cfg.redisAddr, MaxRetries: -1})
	in := &instance{rdb: rdb, done: make(chan struct{})}
	store, err := redisstore.New(rdb, &redisstore.Options{Prefix: cfg.prefix})
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	guard, err := dlock.NewGuard(store, time.Hour, dlock.WithAutoRenew(cfg.lease))
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	mw, err := idemhttp.New(guard, &idemhttp.Options{Required: true})
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /pay/"+NoGuard, in.pay(cfg, keyOwn))
	mux.Handle("POST /pay/"+NoGuardRetry, in.pay(cfg, keyOwn))
	mux.Handle("POST /pay/"+Guarded, mw(in.pay(cfg, keyDerived)))
	mux.Handle("POST /pay/"+GuardCrash, mw(in.pay(cfg, keyDerived)))
	mux.Handle("POST /pay/"+GuardFenceKey, mw(in.pay(cfg, keyFence)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	in.url = "http://" + ln.Addr().String()
	in.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = in.srv.Serve(ln); close(in.done) }()
	return in, nil
}

// How the service keys its charge at the provider.
const (
	keyOwn     = iota // a new key per request: no idempotency downstream
	keyDerived        // Execution.DownstreamKey("charge"): the same in every execution
	keyFence          // the order and the execution's fence: changes with a takeover
)

// pay is the payment handler: charge the order at the provider, keyed as
// keying says.
func (in *instance) pay(cfg instanceConfig, keying int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		order := r.URL.Query().Get("order")
		if _, err := io.Copy(io.Discard, io.LimitReader(r.Body, 1<<16)); err != nil || order == "" {
			http.Error(w, "order= missing or body unreadable", http.StatusBadRequest)
			return
		}
		key := ownKey()
		if e, ok := idemhttp.ExecutionFrom(r.Context()); ok {
			if e.TookOver {
				in.takeovers.Add(1)
			}
			key = e.DownstreamKey("charge")
			if keying == keyFence {
				key = fmt.Sprintf("%s/fence-%d", order, e.Fence)
			}
		}
		charged := cfg.provider.Charge(order, key)
		if cfg.hang != nil {
			cfg.hang(r.Context(), order)
		}
		if r.Context().Err() != nil { // abandoned: a 5xx is not stored
			http.Error(w, "abandoned", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"order": order, "instance": cfg.name, "charged": charged})
	})
}

// ownKey is a fresh charge key, as a service that passes no idempotency
// key downstream gets one minted per call.
func ownKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// kill ends the instance as a crash would, as far as the others can tell:
// its Redis connection is closed first (no renewal, completion or release
// reaches the store again), then its listener and connections (its clients
// see the connection drop).
func (in *instance) kill() {
	_ = in.rdb.Close()
	_ = in.srv.Close()
	<-in.done
}

// stop shuts the instance down, waiting up to 5 s for requests under way.
func (in *instance) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := in.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		_ = in.srv.Close()
	}
	<-in.done
	_ = in.rdb.Close()
}
