package verify_test

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/pkg/verify"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

func BenchmarkVerify(b *testing.B) {
	f := getFixture()
	v := newVerifier(b, verify.Config{ClockSkew: 30 * time.Second})
	tok := f.ks.Token(b, "user-1")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkRawRSAVerify is the floor: the RSA check alone on the same
// token, for comparison with BenchmarkVerify.
func BenchmarkRawRSAVerify(b *testing.B) {
	f := getFixture()
	tok := f.ks.Token(b, "user-1")
	i := strings.LastIndexByte(tok, '.')
	input := []byte(tok[:i])
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	if err != nil {
		b.Fatal(err)
	}
	pub := &f.ks.PrivateKey().PublicKey
	b.ReportAllocs()
	for b.Loop() {
		sum := sha256.Sum256(input)
		if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkVerifyCached verifies the same token again and again: after the
// first, every call is a cache hit.
func BenchmarkVerifyCached(b *testing.B) {
	f := getFixture()
	v := newVerifier(b, verify.Config{ClockSkew: 30 * time.Second, CacheSize: 10000})
	tok := f.ks.Token(b, "user-1")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkVerifyCachedParallel is the cached path under contention.
func BenchmarkVerifyCachedParallel(b *testing.B) {
	f := getFixture()
	v := newVerifier(b, verify.Config{ClockSkew: 30 * time.Second, CacheSize: 10000})
	toks := make([]string, 64)
	for i := range toks {
		toks[i] = f.ks.Token(b, "user-1")
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := v.Verify(ctx, toks[i%len(toks)]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkVerifyCachedRevocations is BenchmarkVerifyCached with a
// revocation list of 10000 sessions and 10 keys loaded: "off" does not
// consult it, "on" consults it on every call, in fail-closed mode (the
// costlier one). Compare the two sub-benchmarks, which share the heap.
func BenchmarkVerifyCachedRevocations(b *testing.B) {
	f := getFixture()
	feed := &verifytest.RevocationFeed{Now: clock}
	for i := range 10000 {
		feed.RevokeSession(fmt.Sprintf("revoked-%d", i), now.Add(time.Hour))
	}
	for i := range 10 {
		feed.RevokeKey(fmt.Sprintf("key-%d", i), now.Add(time.Hour))
	}
	srv := httptest.NewServer(feed)
	defer srv.Close()
	revs, err := verify.NewManualRevocationSource(context.Background(), srv.URL, verify.RevocationOptions{Now: clock, FailClosed: true})
	if err != nil {
		b.Fatal(err)
	}
	defer revs.Close()
	if err := revs.Refresh(context.Background()); err != nil {
		b.Fatal(err)
	}
	tok := f.ks.Token(b, "user-1")
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		revs *verify.RevocationSource
	}{{"off", nil}, {"on", revs}} {
		b.Run(bc.name, func(b *testing.B) {
			v := newVerifier(b, verify.Config{ClockSkew: 30 * time.Second, CacheSize: 10000, Revocations: bc.revs})
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}
