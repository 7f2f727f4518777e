package e2e

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mintedToken is an access token and when the test got it.
type mintedToken struct {
	access, kid string
	at          time.Time
}

// tokenChain mints access tokens by refreshing one session over and over.
type tokenChain struct {
	is      *issuer
	refresh string
}

func (c *tokenChain) mint(t *testing.T) mintedToken {
	t.Helper()
	r := refresh(t, c.is, c.refresh)
	wantStatus(t, "refresh", r, http.StatusOK)
	m := r.json(t)
	c.refresh = m["refresh_token"].(string)
	access := m["access_token"].(string)
	return mintedToken{access: access, kid: kidOf(t, access), at: time.Now()}
}

// through sends tok through the verifier; a 200 must have reached the app.
func through(t *testing.T, v *verifierProc, a *app, tok mintedToken) response {
	t.Helper()
	before := a.hits.Load()
	r := do(t, "GET", v.base+"/orders", nil, bearer(tok.access)...)
	if r.status == http.StatusOK && a.hits.Load() == before {
		t.Fatalf("GET /orders with a token of %s = 200 without reaching the app", tok.kid)
	}
	return r
}

// keySetLoadedAt reads when the verifier last loaded its key set from its
// verifier_keyset_age_seconds metric.
func keySetLoadedAt(t *testing.T, v *verifierProc) (time.Time, bool) {
	t.Helper()
	r := do(t, "GET", v.admin+"/metrics", nil)
	wantStatus(t, "GET /metrics", r, http.StatusOK)
	for _, line := range strings.Split(string(r.body), "\n") {
		if val, ok := strings.CutPrefix(line, "verifier_keyset_age_seconds "); ok {
			age, err := strconv.ParseFloat(val, 64)
			if err != nil || age < 0 {
				return time.Time{}, false
			}
			return time.Now().Add(-time.Duration(age * float64(time.Second))), true
		}
	}
	t.Fatalf("/metrics lacks verifier_keyset_age_seconds")
	return time.Time{}, false
}

// TestKeyRotationUnderTraffic runs the issuer with a scheduled rotation
// every 4 s and the verifier in front of an app, polling the revocation
// feed. Under continuous traffic across at least three rotations, no valid
// token is refused: neither fresh ones nor ones minted 10 s earlier, whose
// key has retired meanwhile. Then the active key is revoked through the
// admin API: a token minted right after is accepted on the first try, and
// the revoked key's tokens are refused within a few polls (the latency is
// logged, never asserted).
func TestKeyRotationUnderTraffic(t *testing.T) {
	const (
		poll     = 300 * time.Millisecond
		interval = 4 * time.Second
		heldFor  = 10 * time.Second
	)
	forEachBackend(t, func(t *testing.T, dbURL string) {
		is := startIssuer(t, dbURL, "--jwks-max-age", "1s", "--key-reload-interval", "1s",
			"--activate-in", "3s", "--key-rotation-interval", interval.String())
		a := newApp(t)
		v := startVerifier(t, "--upstream", a.srv.URL, "--jwks-url", is.base+"/.well-known/jwks.json",
			"--revocation-url", is.base+"/v1/revocations", "--revocation-poll-interval", poll.String())
		v.waitReady(t)
		admin, _, _ := newAdmin(t, is)
		email := uniqueEmail()
		register(t, is, email)
		// Two sessions: the fresh chain's tokens are sent at once, the held
		// chain's only once they are 10 s old, so the verifier first meets
		// them after their key has retired (never from its cache).
		fresh := &tokenChain{is: is, refresh: login(t, is, email, strongPassword, "fresh").Refresh}
		held := &tokenChain{is: is, refresh: login(t, is, email, strongPassword, "held").Refresh}

		// Traffic until four keys have signed (three rotations) and tokens
		// of three keys that no longer sign have been sent.
		var (
			pending           []mintedToken
			signed            []string // kids in the order they first signed
			retiredSent       = map[string]bool{}
			freshReqs, oldReq int
		)
		deadline := time.Now().Add(3 * time.Minute)
		for len(signed) < 4 || len(retiredSent) < 3 {
			if time.Now().After(deadline) {
				t.Fatalf("after 3m: keys signed %d (%v), retired keys' tokens sent %d, want 4 and 3", len(signed), signed, len(retiredSent))
			}
			f := fresh.mint(t)
			if !slices.Contains(signed, f.kid) {
				signed = append(signed, f.kid)
			}
			freshReqs++
			if r := through(t, v, a, f); r.status != http.StatusOK {
				t.Fatalf("fresh token %d (key %s, keys signed so far %v) = %d %s, want 200", freshReqs, f.kid, signed, r.status, r.body)
			}
			pending = append(pending, held.mint(t))
			for len(pending) > 0 && time.Since(pending[0].at) >= heldFor {
				p := pending[0]
				pending = pending[1:]
				oldReq++
				if r := through(t, v, a, p); r.status != http.StatusOK {
					t.Fatalf("token %d minted %v ago (key %s, signing now %s) = %d %s, want 200",
						oldReq, time.Since(p.at).Round(time.Millisecond), p.kid, f.kid, r.status, r.body)
				}
				if p.kid != f.kid {
					retiredSent[p.kid] = true
				}
			}
			time.Sleep(50 * time.Millisecond) // pacing only; nothing is timed
		}
		t.Logf("%d fresh and %d 10s-old tokens accepted, none refused; %d keys signed (%d rotations), tokens of %d retired keys sent",
			freshReqs, oldReq, len(signed), len(signed)-1, len(retiredSent))

		// Emergency revocation of the active key, at a moment when the
		// published next key is in the verifier's key set (loaded after the
		// key was created) and the active key is not about to retire.
		adm := tokenChain{is: is, refresh: admin.Refresh}
		var active, next keyObject
		var victim mintedToken
		waitFor(t, "the verifier holding the next key while the active one has 1s left", func() bool {
			active, next = keyObject{}, keyObject{}
			for _, k := range adminKeys(t, is, adm.mint(t).access) {
				switch k.State {
				case "active":
					active = k
				case "next":
					next = k
				}
			}
			if active.KID == "" || next.KID == "" || next.ActivatesAt == nil {
				return false
			}
			created, err1 := time.Parse(time.RFC3339Nano, next.CreatedAt)
			activates, err2 := time.Parse(time.RFC3339Nano, *next.ActivatesAt)
			if err1 != nil || err2 != nil {
				t.Fatalf("key %s: created_at %q, activates_at %q: %v %v", next.KID, next.CreatedAt, *next.ActivatesAt, err1, err2)
			}
			if loaded, ok := keySetLoadedAt(t, v); !ok || !loaded.After(created) || time.Until(activates) < time.Second {
				return false
			}
			victim = fresh.mint(t)
			return victim.kid == active.KID
		})
		if r := through(t, v, a, victim); r.status != http.StatusOK {
			t.Fatalf("token of the active key before the revocation = %d %s, want 200", r.status, r.body)
		}
		start := time.Now()
		r := do(t, "POST", is.base+"/v1/admin/keys/"+active.KID+"/revoke", nil, bearer(adm.mint(t).access)...)
		wantStatus(t, "POST /v1/admin/keys/{active}/revoke", r, http.StatusOK)

		after := fresh.mint(t)
		if after.kid != next.KID {
			t.Errorf("token minted after the revocation signed by %s, want the published next key %s", after.kid, next.KID)
		}
		if r := through(t, v, a, after); r.status != http.StatusOK {
			t.Fatalf("first request with a token minted after the revocation (key %s) = %d %s, want 200", after.kid, r.status, r.body)
		}

		var latency time.Duration
		for {
			r := through(t, v, a, victim)
			if r.status == http.StatusUnauthorized {
				latency = time.Since(start)
				break
			}
			if r.status != http.StatusOK {
				t.Fatalf("token of the revoked key = %d %s, want 200 or 401", r.status, r.body)
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("token of the revoked key %s still accepted 30s after the revocation", victim.kid)
			}
			time.Sleep(20 * time.Millisecond)
		}
		wantProblem(t, "token of the revoked key", through(t, v, a, victim), http.StatusUnauthorized, "invalid_token")
		t.Logf("token of the revoked key refused %v after the revocation (two poll intervals: %v)", latency.Round(time.Millisecond), 2*poll)

		// Other keys' tokens are untouched: a fresh one, and one from the
		// first key, long retired but still published.
		if r := through(t, v, a, fresh.mint(t)); r.status != http.StatusOK {
			t.Errorf("fresh token after the revocation = %d %s, want 200", r.status, r.body)
		}
		for _, p := range pending {
			if p.kid == victim.kid {
				continue
			}
			if r := through(t, v, a, p); r.status != http.StatusOK {
				t.Errorf("held token of key %s after the revocation = %d %s, want 200", p.kid, r.status, r.body)
			}
			break
		}
	})
}
