package webhook_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/pkg/webhook"
)

// FuzzVerify checks that no header or body makes Verify or VerifyStandard
// panic or fail without one of the package's sentinels, that what Sign and
// SignStandard make always verifies, and that changing any one byte of the
// body makes it fail as ErrSignature.
func FuzzVerify(f *testing.F) {
	f.Add("1700000000", seedSig, "", seedBody, int64(1700000000), uint(0))
	f.Add("1614265330", swSig, swID, []byte(swBody), int64(1614265330), uint(3))
	f.Add("", "", "", []byte{}, int64(0), uint(0))
	f.Add("-1", "v1,", "a.b", []byte("{}"), int64(-5), uint(1))
	f.Add("99999999999999999999", "v1,=== v1a,x ,", "\x00", []byte("\xff"), int64(1<<62), uint(7))
	swKeyBytes := swKey(f)
	sentinels := []error{webhook.ErrMissingHeader, webhook.ErrMalformedHeader, webhook.ErrSignature, webhook.ErrTooOld, webhook.ErrTooNew}
	known := func(err error) bool {
		for _, s := range sentinels {
			if errors.Is(err, s) {
				return true
			}
		}
		return false
	}
	f.Fuzz(func(t *testing.T, ts, sig, id string, body []byte, unix int64, flip uint) {
		// Arbitrary headers: no panic, and any refusal is one of ours.
		h := http.Header{}
		h.Set(webhook.HeaderTimestamp, ts)
		h.Set(webhook.HeaderSignature, sig)
		h.Set(webhook.HeaderID, id)
		now := time.Unix(unix, 0)
		if err := webhook.Verify([][]byte{seedSecret}, h, body, now); err != nil && !known(err) {
			t.Fatalf("Verify(%v, %q) = %v, want nil or a sentinel", h, body, err)
		}
		if err := webhook.VerifyStandard([][]byte{swKeyBytes}, h, body, now); err != nil && !known(err) {
			t.Fatalf("VerifyStandard(%v, %q) = %v, want nil or a sentinel", h, body, err)
		}

		// What Sign makes verifies, at the signing time.
		if unix < 0 || unix > 1e17 {
			unix %= 1e17
			if unix < 0 {
				unix = -unix
			}
			now = time.Unix(unix, 0)
		}
		if id == "" || len(id) > webhook.MaxIDLength {
			id = seedID
		}
		seed, std := http.Header{}, http.Header{}
		webhook.SetHeaders(seed, []byte(sig+"k"), id, now, body)
		webhook.SetStandardHeaders(std, [][]byte{swKeyBytes}, id, now, body)
		if err := webhook.Verify([][]byte{[]byte(sig + "k")}, seed, body, now); err != nil {
			t.Fatalf("Verify(SetHeaders(%q)) = %v, want nil", body, err)
		}
		if err := webhook.VerifyStandard([][]byte{swKeyBytes}, std, body, now); err != nil {
			// net/http would refuse an id with control characters
			// anyway; the signature must still round-trip.
			t.Fatalf("VerifyStandard(SetStandardHeaders(%q, %q)) = %v, want nil", id, body, err)
		}

		// Any single-byte change to the body fails as a bad signature.
		if len(body) == 0 {
			return
		}
		changed := append([]byte(nil), body...)
		i := int(flip % uint(len(body)))
		changed[i] ^= byte(1 + flip/uint(len(body))%255)
		if err := webhook.Verify([][]byte{[]byte(sig + "k")}, seed, changed, now); !errors.Is(err, webhook.ErrSignature) {
			t.Fatalf("Verify(body with byte %d changed) = %v, want ErrSignature", i, err)
		}
		if err := webhook.VerifyStandard([][]byte{swKeyBytes}, std, changed, now); !errors.Is(err, webhook.ErrSignature) {
			t.Fatalf("VerifyStandard(body with byte %d changed) = %v, want ErrSignature", i, err)
		}
	})
}
