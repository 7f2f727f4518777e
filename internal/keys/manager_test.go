package keys_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/palisade-auth/palisade/internal/clocktest"
	"github.com/palisade-auth/palisade/internal/keys"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/testdb"
	"github.com/palisade-auth/palisade/internal/token"
	"github.com/palisade-auth/palisade/pkg/verify"
)

const (
	issuer    = "https://issuer.test"
	audience  = "api"
	accessTTL = 15 * time.Minute
	skew      = 30 * time.Second
	reload    = 30 * time.Second
	// margin is how long a retired key stays published: the access-token
	// lifetime, the verifiers' clock skew and the reload interval.
	margin = accessTTL + skew + reload
)

var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// backend is a database the Manager tests run on; open returns a new
// handle on the same database each call, as another replica would have.
type backend struct {
	open func(t *testing.T) store.Store
}

// forEachBackend runs fn on a fresh SQLite and a fresh PostgreSQL database.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	for _, db := range []struct {
		name string
		url  func(testing.TB) string
	}{{"sqlite", testdb.SQLite}, {"postgres", testdb.Postgres}} {
		t.Run(db.name, func(t *testing.T) {
			url := db.url(t)
			fn(t, backend{open: func(t *testing.T) store.Store {
				t.Helper()
				return testdb.Store(t, url)
			}})
		})
	}
}

func newManager(st store.Store, sealer *keys.Sealer, clk *clocktest.Clock) *keys.Manager {
	return keys.NewManager(st, sealer, keys.Options{
		AccessTokenTTL: accessTTL, ClockSkew: skew, ReloadInterval: reload,
	}, clk.Now, rand.Reader)
}

// jwksKids parses a published key set with jwk.Parse and returns its kids,
// sorted.
func jwksKids(t *testing.T, m *keys.Manager) []string {
	t.Helper()
	raw, err := m.JWKS(context.Background())
	if err != nil {
		t.Fatalf("JWKS: %v", err)
	}
	set, err := jwk.Parse(raw)
	if err != nil {
		t.Fatalf("jwk.Parse(JWKS): %v", err)
	}
	var kids []string
	for i := range set.Len() {
		k, _ := set.Key(i)
		kids = append(kids, k.KeyID())
	}
	slices.Sort(kids)
	return kids
}

func signingKID(t *testing.T, m *keys.Manager) string {
	t.Helper()
	k, err := m.SigningKey(context.Background())
	if err != nil {
		t.Fatalf("SigningKey: %v", err)
	}
	return k.KeyID()
}

// states returns kid -> state from List.
func states(t *testing.T, m *keys.Manager) map[string]string {
	t.Helper()
	infos, err := m.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	out := make(map[string]string, len(infos))
	for _, in := range infos {
		out[in.KID] = in.State
	}
	return out
}

func sorted(s ...string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// EnsureKey refuses key-encryption keys that do not open the key signing
// now, or the next one published to sign, and accepts a keyring holding
// the key they were sealed with.
func TestEnsureKeyRefusesAnotherKEK(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.open(t)
		clk := clocktest.New(epoch)
		kekA, kekB := testKEK(t), testKEK(t)
		if err := newManager(st, newSealer(t, kekA), clk).EnsureKey(ctx); err != nil {
			t.Fatalf("EnsureKey under A: %v", err)
		}
		wrong := newManager(st, newSealer(t, kekB), clk)
		if err := wrong.EnsureKey(ctx); !errors.Is(err, keys.ErrSealed) {
			t.Fatalf("EnsureKey under B of a key sealed under A = %v, want ErrSealed", err)
		}
		if err := wrong.CanSign(ctx); !errors.Is(err, keys.ErrSealed) {
			t.Fatalf("CanSign under B of a key sealed under A = %v, want ErrSealed", err)
		}
		// A rotation under B would schedule a key no replica opens.
		if _, err := wrong.Rotate(ctx, 10*time.Minute, nil); !errors.Is(err, keys.ErrSealed) {
			t.Fatalf("Rotate under B while a key sealed under A signs = %v, want ErrSealed", err)
		}
		if ks, _ := st.SigningKeys(ctx, clk.Now()); len(ks) != 1 {
			t.Fatalf("a refused Rotate left %d keys, want the 1 there was", len(ks))
		}
		// Nor may a revocation of the key signing now, which would make
		// its successor under B.
		active := states(t, newManager(st, newSealer(t, kekA), clk))
		for kid := range active {
			if _, err := wrong.Revoke(ctx, kid, nil); !errors.Is(err, keys.ErrSealed) {
				t.Fatalf("Revoke under B of the key sealed under A, with no next key = %v, want ErrSealed", err)
			}
		}
		if got := states(t, newManager(st, newSealer(t, kekA), clk)); fmt.Sprint(got) != fmt.Sprint(active) {
			t.Fatalf("a refused Revoke changed the keys: %v, want %v", got, active)
		}
		ring, err := keys.NewKeyring([][]byte{kekB, kekA}, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		m := newManager(st, ring, clk)
		if err := m.EnsureKey(ctx); err != nil {
			t.Fatalf("EnsureKey under the keyring B, A: %v", err)
		}
		// The keyring seals the next key under B, which A alone cannot
		// open: the key signing now opens, the one to sign next does not.
		if _, err := m.Rotate(ctx, 10*time.Minute, nil); err != nil {
			t.Fatalf("Rotate: %v", err)
		}
		if err := newManager(st, newSealer(t, kekA), clk).EnsureKey(ctx); !errors.Is(err, keys.ErrSealed) {
			t.Fatalf("EnsureKey under A of a next key sealed under B = %v, want ErrSealed", err)
		}
		// Once the B key signs, A's key is retired: its private half is
		// never used again, and B alone suffices.
		clk.Advance(11 * time.Minute)
		if err := newManager(st, newSealer(t, kekB), clk).EnsureKey(ctx); err != nil {
			t.Fatalf("EnsureKey under B once its key signs: %v", err)
		}
	})
}

func TestEnsureKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.open(t)
		clk := clocktest.New(epoch)
		sealer := newSealer(t, testKEK(t))
		m := newManager(st, sealer, clk)

		if err := m.EnsureKey(ctx); err != nil {
			t.Fatalf("EnsureKey: %v", err)
		}
		ks, err := st.SigningKeys(ctx, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(ks) != 1 {
			t.Fatalf("EnsureKey on an empty store left %d keys, want 1", len(ks))
		}
		k := ks[0]
		if k.Algorithm != "RS256" || k.RetiresAt != nil || k.ExpiresAt != nil || k.ActivatesAt.After(clk.Now()) {
			t.Errorf("EnsureKey created %+v, want an RS256 key active now and never retired", k)
		}
		if got := states(t, m); len(got) != 1 || got[k.KID] != "active" {
			t.Errorf("List after EnsureKey = %v, want {%s: active}", got, k.KID)
		}

		// The private half is sealed at rest, bound to its kid.
		if _, err := x509.ParsePKCS8PrivateKey(k.PrivateSeal); err == nil {
			t.Errorf("the stored private key parses as plain PKCS#8; want it sealed")
		}
		der, err := sealer.Open(k.PrivateSeal, k.KID)
		if err != nil {
			t.Fatalf("Open(stored private key): %v", err)
		}
		priv, err := x509.ParsePKCS8PrivateKey(der)
		if err != nil {
			t.Fatalf("parse opened private key: %v", err)
		}
		if n := priv.(*rsa.PrivateKey).N.BitLen(); n != 2048 {
			t.Errorf("generated key has %d bits, want 2048", n)
		}

		// Idempotent, also once a next key exists.
		clk.Advance(time.Minute)
		if err := m.EnsureKey(ctx); err != nil {
			t.Fatalf("EnsureKey again: %v", err)
		}
		if _, err := m.Rotate(ctx, 10*time.Minute, nil); err != nil {
			t.Fatalf("Rotate: %v", err)
		}
		if err := m.EnsureKey(ctx); err != nil {
			t.Fatalf("EnsureKey after Rotate: %v", err)
		}
		if ks, _ := st.SigningKeys(ctx, clk.Now()); len(ks) != 2 {
			t.Errorf("EnsureKey twice and Rotate once left %d keys, want 2", len(ks))
		}
	})
}

func TestEnsureKeyConcurrent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clk := clocktest.New(epoch)
		sealer := newSealer(t, testKEK(t))
		const replicas = 4
		managers := make([]*keys.Manager, replicas)
		for i := range managers {
			managers[i] = newManager(b.open(t), sealer, clk) // one pool per replica
		}

		start := make(chan struct{})
		errs := make(chan error, replicas)
		var wg sync.WaitGroup
		for _, m := range managers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs <- m.EnsureKey(ctx)
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("EnsureKey: %v", err)
			}
		}

		ks, err := b.open(t).SigningKeys(ctx, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(ks) != 1 {
			t.Fatalf("%d concurrent EnsureKey calls left %d keys, want 1", replicas, len(ks))
		}
		for i, m := range managers {
			if got := signingKID(t, m); got != ks[0].KID {
				t.Errorf("replica %d signs with %s, want %s", i, got, ks[0].KID)
			}
		}
	})
}

func TestSigningKeyAndJWKS(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clk := clocktest.New(epoch)
		m := newManager(b.open(t), newSealer(t, testKEK(t)), clk)

		if _, err := m.SigningKey(ctx); !errors.Is(err, keys.ErrNoActiveKey) {
			t.Errorf("SigningKey on an empty store error %v, want ErrNoActiveKey", err)
		}
		if err := m.EnsureKey(ctx); err != nil {
			t.Fatalf("EnsureKey: %v", err)
		}

		priv, err := m.SigningKey(ctx)
		if err != nil {
			t.Fatalf("SigningKey: %v", err)
		}
		var raw rsa.PrivateKey
		if err := priv.Raw(&raw); err != nil {
			t.Fatalf("SigningKey is not an RSA private key: %v", err)
		}
		if got := priv.Algorithm().String(); got != "RS256" {
			t.Errorf("SigningKey alg = %q, want RS256", got)
		}
		kid := priv.KeyID()

		// The kid is the RFC 7638 thumbprint of the public key.
		pubOf, err := jwk.FromRaw(&raw.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		tp, err := pubOf.Thumbprint(crypto.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		if want := base64.RawURLEncoding.EncodeToString(tp); kid != want {
			t.Errorf("SigningKey kid = %q, want the thumbprint %q", kid, want)
		}

		data, err := m.JWKS(ctx)
		if err != nil {
			t.Fatalf("JWKS: %v", err)
		}
		set, err := jwk.Parse(data)
		if err != nil {
			t.Fatalf("jwk.Parse(JWKS): %v", err)
		}
		if set.Len() != 1 {
			t.Fatalf("JWKS has %d keys, want 1", set.Len())
		}
		pub, ok := set.LookupKeyID(kid)
		if !ok {
			t.Fatalf("JWKS lacks the signing kid %s", kid)
		}
		var rawPub rsa.PublicKey
		if err := pub.Raw(&rawPub); err != nil {
			t.Fatalf("published key is not an RSA public key: %v", err)
		}
		if !rawPub.Equal(&raw.PublicKey) {
			t.Errorf("published key for %s is not the public half of the signing key", kid)
		}

		var doc struct {
			Keys []map[string]any `json:"keys"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("JWKS is not JSON: %v", err)
		}
		if len(doc.Keys) != 1 {
			t.Fatalf("JWKS raw keys = %d, want 1", len(doc.Keys))
		}
		k := doc.Keys[0]
		for _, p := range []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"} {
			if _, ok := k[p]; ok {
				t.Errorf("JWKS key has private parameter %q", p)
			}
		}
		for name, want := range map[string]string{"kid": kid, "alg": "RS256", "use": "sig", "kty": "RSA"} {
			if got, _ := k[name].(string); got != want {
				t.Errorf("JWKS key %s = %v, want %q", name, k[name], want)
			}
		}
		for _, p := range []string{"n", "e"} {
			if s, _ := k[p].(string); s == "" {
				t.Errorf("JWKS key lacks %q", p)
			}
		}

		// The same key comes back on later calls (no per-call re-decryption
		// producing a different key).
		again, err := m.SigningKey(ctx)
		if err != nil || again.KeyID() != kid {
			t.Errorf("SigningKey again = %v, %v, want kid %s", again, err, kid)
		}
	})
}

func TestSigningKeyWrongKEK(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clk := clocktest.New(epoch)
		if err := newManager(b.open(t), newSealer(t, testKEK(t)), clk).EnsureKey(ctx); err != nil {
			t.Fatalf("EnsureKey: %v", err)
		}
		other := newManager(b.open(t), newSealer(t, testKEK(t)), clk)
		if k, err := other.SigningKey(ctx); !errors.Is(err, keys.ErrSealed) {
			t.Errorf("SigningKey under another KEK = %v, %v, want ErrSealed", k, err)
		}
		// The public keys stay usable: verification does not need the KEK.
		if got := jwksKids(t, other); len(got) != 1 {
			t.Errorf("JWKS under another KEK has %d keys, want 1", len(got))
		}
	})
}

func TestRotate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clk := clocktest.New(epoch)
		m := newManager(b.open(t), newSealer(t, testKEK(t)), clk)
		if err := m.EnsureKey(ctx); err != nil {
			t.Fatalf("EnsureKey: %v", err)
		}
		oldKID := signingKID(t, m)

		minter := token.NewMinter(m, issuer, audience, accessTTL, clk.Now, rand.Reader)
		v, err := verify.New(m, verify.Config{
			Issuer: issuer, Audience: audience, Algorithms: []string{"RS256"}, ClockSkew: skew, Now: clk.Now,
		})
		if err != nil {
			t.Fatalf("verify.New: %v", err)
		}
		mint := func() string {
			t.Helper()
			tok, err := minter.Mint(ctx, token.Claims{Subject: "user-1", Role: "user", SessionID: "sess-1"})
			if err != nil {
				t.Fatalf("Mint: %v", err)
			}
			return tok
		}
		verifies := func(name, tok string) {
			t.Helper()
			if _, err := v.Verify(ctx, tok); err != nil {
				t.Errorf("Verify(%s) at %s: %v, want valid", name, clk.Now().Sub(epoch), err)
			}
		}
		early := mint()

		clk.Advance(time.Minute)
		var recorded struct {
			kid     string
			retired []string
		}
		info, err := m.Rotate(ctx, 10*time.Minute, func(q store.Queries, kid string, retired []string) error {
			recorded.kid, recorded.retired = kid, retired
			return nil
		})
		if err != nil {
			t.Fatalf("Rotate: %v", err)
		}
		newKID := info.KID
		activation := clk.Now().Add(10 * time.Minute)
		expiry := activation.Add(margin)
		if newKID == "" || newKID == oldKID {
			t.Fatalf("Rotate returned kid %q, want a new kid (old %q)", newKID, oldKID)
		}
		if info.State != "next" || !info.ActivatesAt.Equal(activation) || info.RetiresAt != nil {
			t.Errorf("Rotate = %+v, want state next, activating at %v, not retiring", info, activation)
		}
		if recorded.kid != newKID || !slices.Equal(recorded.retired, []string{oldKID}) {
			t.Errorf("Rotate recorded (%q, %v), want (%q, [%s])", recorded.kid, recorded.retired, newKID, oldKID)
		}

		// Published at once, but the old key keeps signing until activation.
		if got, want := jwksKids(t, m), sorted(oldKID, newKID); !slices.Equal(got, want) {
			t.Errorf("JWKS right after Rotate = %v, want %v", got, want)
		}
		if got := signingKID(t, m); got != oldKID {
			t.Errorf("SigningKey right after Rotate = %s, want the old key %s", got, oldKID)
		}
		if got := states(t, m); got[oldKID] != "active" || got[newKID] != "next" || len(got) != 2 {
			t.Errorf("List right after Rotate = %v, want old active, new next", got)
		}
		infos, err := m.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range infos {
			if in.KID != oldKID {
				continue
			}
			if in.RetiresAt == nil || !in.RetiresAt.Equal(activation) || in.ExpiresAt == nil || !in.ExpiresAt.Equal(expiry) {
				t.Errorf("old key after Rotate: retires %v, expires %v, want %v, %v", in.RetiresAt, in.ExpiresAt, activation, expiry)
			}
		}

		clk.Set(activation.Add(-time.Second))
		if got := signingKID(t, m); got != oldKID {
			t.Errorf("SigningKey 1s before activation = %s, want the old key %s", got, oldKID)
		}
		late := mint() // the last token the old key signs
		verifies("late token before activation", late)

		clk.Set(activation)
		if got := signingKID(t, m); got != newKID {
			t.Errorf("SigningKey at activation = %s, want the new key %s", got, newKID)
		}
		fresh := mint()
		verifies("new key's token", fresh)
		verifies("early token", early)
		verifies("late token", late)
		if got := states(t, m); got[oldKID] != "retired" || got[newKID] != "active" {
			t.Errorf("List at activation = %v, want old retired, new active", got)
		}

		// The old key stays published as long as a token it signed can be
		// accepted, and a little longer.
		clk.Set(activation.Add(accessTTL - 2*time.Second))
		verifies("late token just before it expires", late)
		clk.Set(expiry.Add(-time.Second))
		if got, want := jwksKids(t, m), sorted(oldKID, newKID); !slices.Equal(got, want) {
			t.Errorf("JWKS 1s before the old key expires = %v, want %v", got, want)
		}
		if _, err := m.Key(ctx, oldKID); err != nil {
			t.Errorf("Key(old) 1s before expiry: %v", err)
		}
		if got := states(t, m); got[oldKID] != "retired" {
			t.Errorf("List 1s before expiry = %v, want the old key retired", got)
		}

		clk.Set(expiry)
		if got := states(t, m); len(got) != 1 || got[newKID] != "active" {
			t.Errorf("List at the old key's expiry = %v, want only {%s: active}", got, newKID)
		}
		if got := jwksKids(t, m); !slices.Equal(got, []string{newKID}) {
			t.Errorf("JWKS at the old key's expiry = %v, want [%s]", got, newKID)
		}
		if _, err := m.Key(ctx, oldKID); !errors.Is(err, verify.ErrUnknownKey) {
			t.Errorf("Key(old) after expiry error %v, want ErrUnknownKey", err)
		}
		verifies("new key's token after the old key expired", mint())
	})
}

// TestRotateStaleReplica checks the reload margin: a replica that has not yet
// seen an immediate rotation keeps signing with the retired key for up to
// ReloadInterval, and those tokens still verify for their whole life.
func TestRotateStaleReplica(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clk := clocktest.New(epoch)
		sealer := newSealer(t, testKEK(t))
		a := newManager(b.open(t), sealer, clk)
		stale := newManager(b.open(t), sealer, clk)
		if err := a.EnsureKey(ctx); err != nil {
			t.Fatalf("EnsureKey: %v", err)
		}
		clk.Advance(time.Second)
		oldKID := signingKID(t, stale) // loads the replica's view now
		info, err := a.Rotate(ctx, 0, nil)
		if err != nil {
			t.Fatalf("Rotate: %v", err)
		}
		if info.State != "active" {
			t.Errorf("Rotate(0) state = %q, want active", info.State)
		}
		if got := signingKID(t, a); got != info.KID {
			t.Errorf("SigningKey after Rotate(0) = %s, want %s", got, info.KID)
		}

		clk.Advance(reload - time.Second)
		if got := signingKID(t, stale); got != oldKID {
			t.Fatalf("stale replica signs with %s, want the old key %s until it reloads", got, oldKID)
		}
		tok, err := token.NewMinter(stale, issuer, audience, accessTTL, clk.Now, rand.Reader).
			Mint(ctx, token.Claims{Subject: "u", Role: "user", SessionID: "s"})
		if err != nil {
			t.Fatalf("Mint: %v", err)
		}
		v, err := verify.New(a, verify.Config{Issuer: issuer, Audience: audience, Algorithms: []string{"RS256"}, ClockSkew: skew, Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		// The last second the verifier accepts the token: exp + skew is
		// already refused.
		clk.Advance(accessTTL + skew - time.Second)
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Errorf("Verify(stale replica's token) 1s before exp+skew: %v, want valid", err)
		}
		if got := jwksKids(t, a); !slices.Contains(got, oldKID) {
			t.Errorf("JWKS when the stale replica's token is last accepted = %v, want it to hold %s", got, oldKID)
		}

		if got := signingKID(t, stale); got != info.KID {
			t.Errorf("replica after reload signs with %s, want %s", got, info.KID)
		}
	})
}

func TestKeyAcrossReplicas(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clk := clocktest.New(epoch)
		sealer := newSealer(t, testKEK(t))
		a := newManager(b.open(t), sealer, clk)
		other := newManager(b.open(t), sealer, clk)
		if err := a.EnsureKey(ctx); err != nil {
			t.Fatalf("EnsureKey: %v", err)
		}
		first := signingKID(t, a)
		if k, err := other.Key(ctx, first); err != nil || k.KeyID() != first {
			t.Fatalf("Key(%s) on a second replica = %v, %v", first, k, err)
		}

		clk.Advance(time.Second)
		info, err := a.Rotate(ctx, 10*time.Minute, nil)
		if err != nil {
			t.Fatalf("Rotate: %v", err)
		}
		// The second replica loaded before the rotation; an unknown kid
		// makes it read the store again.
		clk.Advance(time.Second)
		k, err := other.Key(ctx, info.KID)
		if err != nil {
			t.Fatalf("Key(%s) created by another replica: %v", info.KID, err)
		}
		if k.KeyID() != info.KID {
			t.Errorf("Key(%s).KeyID() = %s", info.KID, k.KeyID())
		}
		var pub rsa.PublicKey
		if err := k.Raw(&pub); err != nil {
			t.Errorf("Key(%s) is not an RSA public key: %v", info.KID, err)
		}
		var priv rsa.PrivateKey
		if err := k.Raw(&priv); err == nil {
			t.Errorf("Key(%s) returned a private key", info.KID)
		}
	})
}

func TestKeyUnknown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clk := clocktest.New(epoch)
		m := newManager(b.open(t), newSealer(t, testKEK(t)), clk)
		if err := m.EnsureKey(ctx); err != nil {
			t.Fatalf("EnsureKey: %v", err)
		}
		for _, kid := range []string{"unknown", "", signingKID(t, m) + "x"} {
			clk.Advance(2 * time.Second) // past the forced-reload throttle
			k, err := m.Key(ctx, kid)
			if !errors.Is(err, verify.ErrUnknownKey) {
				t.Errorf("Key(%q) = %v, %v, want verify.ErrUnknownKey", kid, k, err)
			}
			if !errors.Is(err, keys.ErrUnknownKey) {
				t.Errorf("Key(%q) error %v, want keys.ErrUnknownKey", kid, err)
			}
		}
	})
}

func TestSigningKeyOnlyNextKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clk := clocktest.New(epoch)
		m := newManager(b.open(t), newSealer(t, testKEK(t)), clk)
		info, err := m.Rotate(ctx, 5*time.Minute, nil)
		if err != nil {
			t.Fatalf("Rotate on an empty store: %v", err)
		}
		if _, err := m.SigningKey(ctx); !errors.Is(err, keys.ErrNoActiveKey) {
			t.Errorf("SigningKey with only a next key error %v, want ErrNoActiveKey", err)
		}
		if got := jwksKids(t, m); !slices.Equal(got, []string{info.KID}) {
			t.Errorf("JWKS with only a next key = %v, want [%s]", got, info.KID)
		}
		clk.Advance(5 * time.Minute)
		if got := signingKID(t, m); got != info.KID {
			t.Errorf("SigningKey after activation = %s, want %s", got, info.KID)
		}
	})
}

// TestRotateSameInstant rotates with immediate activation at the very
// instant the active key activated.
func TestRotateSameInstant(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clk := clocktest.New(epoch)
		m := newManager(b.open(t), newSealer(t, testKEK(t)), clk)
		if err := m.EnsureKey(ctx); err != nil {
			t.Fatalf("EnsureKey: %v", err)
		}
		old := signingKID(t, m)
		info, err := m.Rotate(ctx, 0, nil)
		if err != nil {
			t.Fatalf("Rotate: %v", err)
		}
		if got := signingKID(t, m); got != info.KID {
			t.Errorf("SigningKey after Rotate(0) = %s, want the new key %s (old %s)", got, info.KID, old)
		}
		if got := states(t, m); got[old] != "retired" {
			t.Errorf("List after Rotate(0) = %v, want %s retired", got, old)
		}
	})
}
