package auth_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/palisade-auth/palisade/internal/argon2"
	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/password"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/testdb"
)

// The flows are measured next to the cryptography they cannot avoid, in one
// run, so the ratios show what the flows cost above it:
//   refresh on PostgreSQL  >= 60% of raw RSA-2048 signing
//   login                  >= 85% of raw argon2id hashing (same parallelism)
//
// Raw signing and hashing are pure CPU: GOMAXPROCS goroutines saturate the
// machine. A refresh is mostly waiting on the database, and a server
// overlaps those waits across concurrent requests; so the refresh benchmark
// runs flowClients goroutines per CPU, as a loaded server would, and
// measures throughput. Login runs at the same parallelism as raw hashing
// (GOMAXPROCS clients, a GOMAXPROCS-wide hashing pool): more clients only
// queue at the pool, and on a small machine the database then competes with
// the hashes for the same cores.

func opsPerSec(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func BenchmarkRawRSA2048Sign(b *testing.B) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	digest := sha256.Sum256([]byte("header.payload"))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	opsPerSec(b)
}

func BenchmarkRawArgon2id(b *testing.B) {
	p := password.DefaultParams
	salt := make([]byte, p.SaltLen)
	b.RunParallel(func(pb *testing.PB) {
		var m argon2.Memory // as each of the hasher's slots keeps one
		for pb.Next() {
			m.IDKey([]byte(pw), salt, p.Time, p.Memory, p.Threads, p.KeyLen)
		}
	})
	opsPerSec(b)
}

func benchDBs(b *testing.B, fn func(b *testing.B, dbURL string)) {
	b.Run("sqlite", func(b *testing.B) { fn(b, testdb.SQLite(b)) })
	b.Run("postgres", func(b *testing.B) { fn(b, testdb.Postgres(b)) })
}

func BenchmarkLogin(b *testing.B) {
	benchDBs(b, func(b *testing.B, dbURL string) {
		f := newFixtureWith(b, dbURL, 0, password.DefaultParams)
		f.user(b, "bench@example.com")
		ctx := context.Background()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := f.svc.Login(ctx, auth.LoginInput{Email: "bench@example.com", Password: pw}, auth.Meta{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		opsPerSec(b)
	})
}

// flowClients is the number of concurrent clients per CPU in the flow
// benchmarks.
const flowClients = 4

func BenchmarkRefresh(b *testing.B) {
	benchDBs(b, func(b *testing.B, dbURL string) {
		benchRefresh(b, newFixtureWith(b, dbURL, 0, cheap))
	})
}

// BenchmarkRefreshSubscribed is BenchmarkRefresh/postgres with one enabled
// webhook endpoint subscribed to every event ("*"): each refresh's audit
// entry then also writes a delivery in its transaction. Compared with
// BenchmarkRefresh/postgres of the same run, it is what a subscription
// costs; without one the outbox adds nothing but an index probe.
func BenchmarkRefreshSubscribed(b *testing.B) {
	f := newFixtureWith(b, testdb.Postgres(b), 0, cheap)
	now := f.clock.Now()
	if err := f.st.CreateWebhookEndpoint(context.Background(), store.WebhookEndpoint{
		ID: "0190c0de-0000-7000-8000-000000000001", URL: "https://receiver.example.com/hook", Events: []string{"*"},
		Format: store.WebhookFormatSeed, Status: store.WebhookEnabled, Secret: []byte("sealed"), CreatedAt: now, UpdatedAt: now,
	}); err != nil {
		b.Fatal(err)
	}
	benchRefresh(b, f)
	b.StopTimer()
	ds, err := f.st.ListWebhookDeliveries(context.Background(), store.WebhookDeliveryFilter{EndpointID: "0190c0de-0000-7000-8000-000000000001", Limit: 1})
	if err != nil || len(ds) == 0 {
		b.Fatalf("deliveries after the refreshes = %d (%v), want some: the subscription was not exercised", len(ds), err)
	}
}

func benchRefresh(b *testing.B, f *fixture) {
	ctx := context.Background()
	var client atomic.Int64
	b.SetParallelism(flowClients)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		// Each client is a user of its own refreshing its session's
		// chain, as in real traffic: refreshes of one user queue on
		// that user's row (see RotateRefreshToken).
		email := fmt.Sprintf("bench-%d@example.com", client.Add(1))
		f.user(b, email)
		tok := f.login(b, email, "laptop").RefreshToken
		for pb.Next() {
			p, err := f.svc.Refresh(ctx, tok, auth.Meta{})
			if err != nil {
				b.Error(err)
				return
			}
			tok = p.RefreshToken
		}
	})
	opsPerSec(b)
}
