package storetest

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

var keyTests = []subtest{
	{"CreateAndList", testKeysCreateAndList},
	{"DuplicateKID", testKeysDuplicateKID},
	{"Retire", testKeysRetire(false)},
	{"RetireExcept", testKeysRetire(true)},
	{"LockInTx", testKeysLockInTx},
	{"Revoke", testKeysRevoke},
	{"RevokeRace", testKeysRevokeRace},
	{"RetireSkipsRevoked", testKeysRetireSkipsRevoked},
	{"Reschedule", testKeysReschedule},
	{"SealedValues", testKeysSealedValues},
}

// newKey creates a signing key that activates at activates; mods adjust it first.
func newKey(t *testing.T, q store.Queries, activates time.Time, mods ...func(*store.SigningKey)) store.SigningKey {
	t.Helper()
	kid := "kid-" + newID(t)
	k := store.SigningKey{
		KID:         kid,
		Algorithm:   "RS256",
		PublicJWK:   []byte(`{"kty": "RSA", "kid": "` + kid + `", "alg": "RS256", "use": "sig", "n": "0vx7agoebGcQSuu", "e": "AQAB"}`),
		PrivateSeal: []byte{0x00, 0x01, 0xfe, 0xff, 's', 'e', 'a', 'l', 0x00},
		CreatedAt:   activates.Add(-time.Hour),
		ActivatesAt: activates,
	}
	for _, m := range mods {
		m(&k)
	}
	if err := q.CreateSigningKey(t.Context(), k); err != nil {
		t.Fatalf("CreateSigningKey(%s) = %v, want nil", k.KID, err)
	}
	return k
}

// retired sets a key's retirement and expiry.
func retired(retires, expires time.Time) func(*store.SigningKey) {
	return func(k *store.SigningKey) { k.RetiresAt, k.ExpiresAt = &retires, &expires }
}

// signingKeys calls SigningKeys and fails the test on error.
func signingKeys(t *testing.T, q store.Queries, now time.Time) []store.SigningKey {
	t.Helper()
	ks, err := q.SigningKeys(t.Context(), now)
	if err != nil {
		t.Fatalf("SigningKeys(%v) = %v, want nil", now, err)
	}
	return ks
}

func testKeysCreateAndList(t *testing.T, s store.Store) {
	// Inserted out of order so that insertion order cannot pass for oldest first.
	next := newKey(t, s, at(time.Hour))
	newKey(t, s, at(-60*24*time.Hour), retired(at(-30*24*time.Hour), t0)) // expired at now
	active := newKey(t, s, at(-24*time.Hour))
	newKey(t, s, at(-90*24*time.Hour), retired(at(-60*24*time.Hour), at(-time.Second)))
	old := newKey(t, s, at(-30*24*time.Hour), retired(at(-24*time.Hour), at(time.Hour)))

	checkSameList(t, "SigningKeys(now)", signingKeys(t, s, t0), []store.SigningKey{old, active, next})
}

func testKeysDuplicateKID(t *testing.T, s store.Store) {
	k := newKey(t, s, t0)
	dup := k
	dup.ActivatesAt, dup.PrivateSeal = at(time.Hour), []byte("other")
	wantErr(t, "CreateSigningKey(same kid)", s.CreateSigningKey(t.Context(), dup), store.ErrAlreadyExists)
	checkSameList(t, "SigningKeys after duplicate", signingKeys(t, s, t0), []store.SigningKey{k})
}

// testKeysRetire checks RetireSigningKeys, passing the newest key as
// exceptKID when except is set.
func testKeysRetire(except bool) func(t *testing.T, s store.Store) {
	return func(t *testing.T, s store.Store) {
		when, expires := t0, at(24*time.Hour)
		older := newKey(t, s, at(-48*time.Hour))
		newest := newKey(t, s, at(-24*time.Hour))
		done := newKey(t, s, at(-72*time.Hour), retired(at(-48*time.Hour), at(48*time.Hour)))
		atWhen := newKey(t, s, when) // activates exactly at `at`: retired too, or two keys would be active
		future := newKey(t, s, at(time.Hour))
		retire, keepKeys := []store.SigningKey{older, newest, atWhen}, []store.SigningKey{done, future}
		exceptKID := ""
		if except {
			exceptKID = newest.KID
			retire, keepKeys = []store.SigningKey{older, atWhen}, append(keepKeys, newest)
		}

		kids, err := s.RetireSigningKeys(t.Context(), when, expires, exceptKID)
		wantErr(t, "RetireSigningKeys", err, nil)
		var want []string
		for _, k := range retire {
			want = append(want, k.KID)
		}
		slices.Sort(kids)
		slices.Sort(want)
		if !slices.Equal(kids, want) {
			t.Errorf("RetireSigningKeys(%v, %v, %q) = %q, want %q", when, expires, exceptKID, kids, want)
		}

		got := map[string]store.SigningKey{}
		for _, k := range signingKeys(t, s, at(-365*24*time.Hour)) {
			got[k.KID] = k
		}
		for _, k := range retire {
			k.RetiresAt, k.ExpiresAt = &when, &expires
			keepKeys = append(keepKeys, k)
		}
		for _, k := range keepKeys {
			checkSame(t, "SigningKeys()["+k.KID+"] after RetireSigningKeys", got[k.KID], k)
		}
	}
}

func testKeysLockInTx(t *testing.T, s store.Store) {
	var k store.SigningKey
	err := s.InTx(t.Context(), func(q store.Queries) error {
		if err := q.LockSigningKeys(t.Context()); err != nil {
			return err
		}
		if len(signingKeys(t, q, t0)) == 0 {
			k = newKey(t, q, t0)
		}
		return nil
	})
	wantErr(t, "InTx(LockSigningKeys, CreateSigningKey)", err, nil)
	checkSameList(t, "SigningKeys after locked creation", signingKeys(t, s, t0), []store.SigningKey{k})
}

func testKeysRevoke(t *testing.T, s store.Store) {
	k := newKey(t, s, at(-time.Hour))
	other := newKey(t, s, at(time.Hour))
	when, expires := t0, at(20*time.Minute)

	changed, err := s.RevokeSigningKey(t.Context(), k.KID, when, expires)
	if err != nil || !changed {
		t.Fatalf("RevokeSigningKey(%s) = %v, %v, want true, nil", k.KID, changed, err)
	}
	changed, err = s.RevokeSigningKey(t.Context(), k.KID, at(time.Minute), at(time.Hour))
	if err != nil || changed {
		t.Errorf("RevokeSigningKey(%s) again = %v, %v, want false, nil", k.KID, changed, err)
	}
	_, err = s.RevokeSigningKey(t.Context(), "no-such-kid", when, expires)
	wantErr(t, "RevokeSigningKey(unknown)", err, store.ErrNotFound)

	k.RevokedAt, k.ExpiresAt = &when, &expires
	checkSameList(t, "SigningKeys after RevokeSigningKey", signingKeys(t, s, t0), []store.SigningKey{k, other})
	// Listed until it expires, like any key.
	checkSameList(t, "SigningKeys past the revoked key's expiry", signingKeys(t, s, expires), []store.SigningKey{other})
}

// testKeysRevokeRace revokes one key from several goroutines: exactly one
// reports the change.
func testKeysRevokeRace(t *testing.T, s store.Store) {
	k := newKey(t, s, at(-time.Hour))
	const n = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			changed, err := s.RevokeSigningKey(t.Context(), k.KID, at(time.Duration(i)*time.Second), at(time.Hour))
			if err != nil {
				t.Errorf("RevokeSigningKey(%s) = %v, want nil", k.KID, err)
			}
			if changed {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d concurrent RevokeSigningKey(%s): %d changed it, want 1", n, k.KID, wins)
	}
}

func testKeysRetireSkipsRevoked(t *testing.T, s store.Store) {
	revokedAt, revokedExpiry := at(-time.Minute), at(time.Hour)
	k := newKey(t, s, at(-time.Hour), func(k *store.SigningKey) { k.RevokedAt, k.ExpiresAt = &revokedAt, &revokedExpiry })
	live := newKey(t, s, at(-2*time.Hour))
	kids, err := s.RetireSigningKeys(t.Context(), t0, at(2*time.Hour), "")
	wantErr(t, "RetireSigningKeys", err, nil)
	if !slices.Equal(kids, []string{live.KID}) {
		t.Errorf("RetireSigningKeys with a revoked key = %q, want [%s]", kids, live.KID)
	}
	retires, expires := t0, at(2*time.Hour)
	live.RetiresAt, live.ExpiresAt = &retires, &expires
	checkSameList(t, "SigningKeys after RetireSigningKeys", signingKeys(t, s, t0), []store.SigningKey{live, k})
}

func testKeysReschedule(t *testing.T, s store.Store) {
	k := newKey(t, s, at(time.Hour), retired(at(2*time.Hour), at(3*time.Hour)))
	activates := t0
	wantErr(t, "RescheduleSigningKey", s.RescheduleSigningKey(t.Context(), k.KID, activates, nil, nil), nil)
	k.ActivatesAt, k.RetiresAt, k.ExpiresAt = activates, nil, nil
	checkSameList(t, "SigningKeys after RescheduleSigningKey", signingKeys(t, s, t0), []store.SigningKey{k})

	retires, expires := at(time.Hour), at(2*time.Hour)
	wantErr(t, "RescheduleSigningKey(retire)", s.RescheduleSigningKey(t.Context(), k.KID, activates, &retires, &expires), nil)
	k.RetiresAt, k.ExpiresAt = &retires, &expires
	checkSameList(t, "SigningKeys after RescheduleSigningKey(retire)", signingKeys(t, s, t0), []store.SigningKey{k})

	wantErr(t, "RescheduleSigningKey(unknown)", s.RescheduleSigningKey(t.Context(), "no-such-kid", t0, nil, nil), store.ErrNotFound)
	if _, err := s.RevokeSigningKey(t.Context(), k.KID, t0, at(time.Hour)); err != nil {
		t.Fatalf("RevokeSigningKey = %v", err)
	}
	wantErr(t, "RescheduleSigningKey(revoked)", s.RescheduleSigningKey(t.Context(), k.KID, t0, nil, nil), store.ErrNotFound)
}

// testKeysSealedValues lists every sealed value and replaces them one by
// one, compare-and-swap.
func testKeysSealedValues(t *testing.T, s store.Store) {
	ctx := t.Context()
	k := newKey(t, s, t0)
	u := newUser(t, s)
	mail := newMail(t, s, u.ID, t0)
	until := at(time.Hour)
	e := newEndpoint(t, s, []string{"*"}, func(e *store.WebhookEndpoint) {
		e.PreviousSecret, e.PreviousUntil = []byte("sealed-previous"), &until
	})
	plain := newEndpoint(t, s, []string{"*"})

	want := []store.SealedValue{
		{Kind: store.SealedMailToken, ID: mail.ID, Sealed: mail.SealedToken},
		{Kind: store.SealedSigningKey, ID: k.KID, Sealed: k.PrivateSeal},
		{Kind: store.SealedWebhookPrevious, ID: e.ID, Sealed: e.PreviousSecret},
		{Kind: store.SealedWebhookSecret, ID: e.ID, Sealed: e.Secret},
		{Kind: store.SealedWebhookSecret, ID: plain.ID, Sealed: plain.Secret},
	}
	slices.SortFunc(want, func(a, b store.SealedValue) int {
		if a.Kind != b.Kind {
			return strings.Compare(a.Kind, b.Kind)
		}
		return strings.Compare(a.ID, b.ID)
	})
	got, err := s.SealedValues(ctx)
	if err != nil {
		t.Fatalf("SealedValues = %v, want nil", err)
	}
	if !slices.EqualFunc(got, want, func(a, b store.SealedValue) bool {
		return a.Kind == b.Kind && a.ID == b.ID && bytes.Equal(a.Sealed, b.Sealed)
	}) {
		t.Fatalf("SealedValues =\n\t%+v\nwant\n\t%+v", got, want)
	}

	for _, v := range want {
		old := v.Sealed
		v.Sealed = append([]byte("resealed-"), old...)
		wantErr(t, "ReplaceSealedValue("+v.Kind+")", s.ReplaceSealedValue(ctx, v, old), nil)
		// A second writer holding the value it read before loses.
		wantErr(t, "ReplaceSealedValue("+v.Kind+", stale)", s.ReplaceSealedValue(ctx, store.SealedValue{Kind: v.Kind, ID: v.ID, Sealed: []byte("x")}, old), store.ErrPrecondition)
	}
	wantErr(t, "ReplaceSealedValue(gone)", s.ReplaceSealedValue(ctx, store.SealedValue{Kind: store.SealedSigningKey, ID: "no-such-kid", Sealed: []byte("x")}, []byte("y")), store.ErrPrecondition)

	got, err = s.SealedValues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range got {
		if !bytes.HasPrefix(v.Sealed, []byte("resealed-")) {
			t.Errorf("SealedValues after ReplaceSealedValue: %s %s = %q, want it replaced", v.Kind, v.ID, v.Sealed)
		}
	}
	ks := signingKeys(t, s, t0)
	if len(ks) != 1 || !bytes.Equal(ks[0].PrivateSeal, append([]byte("resealed-"), k.PrivateSeal...)) {
		t.Errorf("SigningKeys after ReplaceSealedValue = %+v, want the private key replaced", ks)
	}
}
