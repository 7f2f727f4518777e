package webhook_test

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/pkg/webhook"
)

// The published Standard Webhooks test vector, from the reference
// libraries' tests (standard-webhooks/standard-webhooks, libraries/go
// TestWebhookSign, the same in every language), and reproduced outside Go
// with openssl dgst -sha256 -mac HMAC.
const (
	swSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	swTS     = 1614265330
	swBody   = `{"test": 2432232314}`
	swSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	// swOtherSig is the reference tests' "invalid signature".
	swOtherSig = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
)

func swKey(t testing.TB) []byte {
	t.Helper()
	k, err := webhook.ParseStandardSecret(swSecret)
	if err != nil {
		t.Fatalf("ParseStandardSecret(%q) = %v", swSecret, err)
	}
	return k
}

func TestStandardVector(t *testing.T) {
	key := swKey(t)
	if got := webhook.SignStandard(key, swID, time.Unix(swTS, 0), []byte(swBody)); got != swSig {
		t.Errorf("SignStandard(vector) = %s, want %s", got, swSig)
	}
	h := http.Header{}
	h.Set("webhook-id", swID)
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", swSig)
	if err := webhook.VerifyStandard([][]byte{key}, h, []byte(swBody), time.Unix(swTS, 0)); err != nil {
		t.Errorf("VerifyStandard(vector) = %v, want nil", err)
	}
}

func TestSetStandardHeaders(t *testing.T) {
	k1, k2 := swKey(t), []byte("a second key of any length")
	h := http.Header{}
	webhook.SetStandardHeaders(h, [][]byte{k1, k2}, swID, time.Unix(swTS, 0), []byte(swBody))
	want := swSig + " " + webhook.SignStandard(k2, swID, time.Unix(swTS, 0), []byte(swBody))
	if got := h.Get("webhook-signature"); got != want {
		t.Errorf("SetStandardHeaders: webhook-signature = %q, want %q", got, want)
	}
	if got := h.Get("webhook-id") + " " + h.Get("webhook-timestamp"); got != swID+" 1614265330" {
		t.Errorf("SetStandardHeaders: id and timestamp = %q", got)
	}
	for _, keys := range [][][]byte{{k1}, {k2}, {[]byte("wrong"), k2}} {
		if err := webhook.VerifyStandard(keys, h, []byte(swBody), time.Unix(swTS, 0)); err != nil {
			t.Errorf("VerifyStandard(%d keys, both signatures) = %v, want nil", len(keys), err)
		}
	}
}

func TestVerifyStandard(t *testing.T) {
	key := swKey(t)
	now := time.Unix(swTS, 0)
	hdr := func(id, ts, sig string) http.Header {
		h := http.Header{}
		for k, v := range map[string]string{"webhook-id": id, "webhook-timestamp": ts, "webhook-signature": sig} {
			if v != "" {
				h.Set(k, v)
			}
		}
		return h
	}
	const ts = "1614265330"
	tests := []struct {
		name   string
		keys   [][]byte
		header http.Header
		body   string
		now    time.Time
		want   error
	}{
		{"valid", [][]byte{key}, hdr(swID, ts, swSig), swBody, now, nil},
		{"valid among several", [][]byte{key}, hdr(swID, ts, swOtherSig+" v2,"+swOtherSig[3:]+" "+swSig+" "+swOtherSig), swBody, now, nil},
		{"unknown versions skipped", [][]byte{key}, hdr(swID, ts, "v1a,abc "+swSig), swBody, now, nil},
		{"second key", [][]byte{[]byte("old"), key}, hdr(swID, ts, swSig), swBody, now, nil},
		{"300 s old", [][]byte{key}, hdr(swID, ts, swSig), swBody, now.Add(300 * time.Second), nil},
		{"301 s old", [][]byte{key}, hdr(swID, ts, swSig), swBody, now.Add(301 * time.Second), webhook.ErrTooOld},
		{"301 s ahead", [][]byte{key}, hdr(swID, ts, swSig), swBody, now.Add(-301 * time.Second), webhook.ErrTooNew},
		{"other signature", [][]byte{key}, hdr(swID, ts, swOtherSig), swBody, now, webhook.ErrSignature},
		{"other id", [][]byte{key}, hdr("msg_other", ts, swSig), swBody, now, webhook.ErrSignature},
		{"other body", [][]byte{key}, hdr(swID, ts, swSig), `{"test": 2432232315}`, now, webhook.ErrSignature},
		{"other key", [][]byte{[]byte("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")}, hdr(swID, ts, swSig), swBody, now, webhook.ErrSignature},
		{"only v1a", [][]byte{key}, hdr(swID, ts, "v1a,"+swSig[3:]), swBody, now, webhook.ErrSignature},
		{"no id", [][]byte{key}, hdr("", ts, swSig), swBody, now, webhook.ErrMissingHeader},
		{"no timestamp", [][]byte{key}, hdr(swID, "", swSig), swBody, now, webhook.ErrMissingHeader},
		{"no signature", [][]byte{key}, hdr(swID, ts, ""), swBody, now, webhook.ErrMissingHeader},
		{"blank signature list", [][]byte{key}, hdr(swID, ts, "   "), swBody, now, webhook.ErrSignature},
		{"entry without comma", [][]byte{key}, hdr(swID, ts, "v1"), swBody, now, webhook.ErrMalformedHeader},
		{"v1 not base64", [][]byte{key}, hdr(swID, ts, "v1,***"), swBody, now, webhook.ErrMalformedHeader},
		{"v1 too short", [][]byte{key}, hdr(swID, ts, "v1,AAAA"), swBody, now, webhook.ErrMalformedHeader},
		{"hex signature", [][]byte{key}, hdr(swID, ts, "v1,"+seedSig), swBody, now, webhook.ErrMalformedHeader},
		{"id too long", [][]byte{key}, hdr(strings.Repeat("x", webhook.MaxIDLength+1), ts, swSig), swBody, now, webhook.ErrMalformedHeader},
		{"timestamp not a number", [][]byte{key}, hdr(swID, "1614265330.0", swSig), swBody, now, webhook.ErrMalformedHeader},
		{"no keys", nil, hdr(swID, ts, swSig), swBody, now, webhook.ErrInvalidSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := webhook.VerifyStandard(tt.keys, tt.header, []byte(tt.body), tt.now)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("VerifyStandard(%v, %q) = %v, want %v", tt.header, tt.body, err, tt.want)
			}
		})
	}
}

func TestParseStandardSecret(t *testing.T) {
	tests := []struct {
		in      string
		wantLen int // 0: an error wrapping ErrInvalidSecret
	}{
		{swSecret, 24},
		{strings.TrimPrefix(swSecret, "whsec_"), 24}, // the reference libraries accept the bare base64
		{"whsec_", 0},
		{"", 0},
		{"whsec_not base64!", 0},
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", 0}, // truncated
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw=", 0},
		{"whsec-MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", 0},
	}
	for _, tt := range tests {
		k, err := webhook.ParseStandardSecret(tt.in)
		switch {
		case tt.wantLen == 0 && !errors.Is(err, webhook.ErrInvalidSecret):
			t.Errorf("ParseStandardSecret(%q) = %x, %v, want ErrInvalidSecret", tt.in, k, err)
		case tt.wantLen != 0 && (err != nil || len(k) != tt.wantLen):
			t.Errorf("ParseStandardSecret(%q) = %d bytes, %v, want %d bytes", tt.in, len(k), err, tt.wantLen)
		}
	}
}

func TestNewStandardSecret(t *testing.T) {
	random := bytes.NewReader(bytes.Repeat([]byte{0xAB}, 32))
	s, err := webhook.NewStandardSecret(random)
	if err != nil {
		t.Fatalf("NewStandardSecret = %v", err)
	}
	if want := "whsec_q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s="; s != want {
		t.Errorf("NewStandardSecret(0xAB...) = %q, want %q", s, want)
	}
	k, err := webhook.ParseStandardSecret(s)
	if err != nil || !bytes.Equal(k, bytes.Repeat([]byte{0xAB}, 32)) {
		t.Errorf("ParseStandardSecret(NewStandardSecret()) = %x, %v, want 32 bytes of ab", k, err)
	}
	if _, err := webhook.NewStandardSecret(bytes.NewReader(make([]byte, 31))); err == nil {
		t.Errorf("NewStandardSecret(31 bytes of randomness) = nil error, want one")
	}
}
