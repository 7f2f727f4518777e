package webhook_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/pkg/webhook"
)

// The seed-format vector, computed outside Go with
//
//	printf '%s' "$ts.$body" | openssl dgst -sha256 -hmac "$secret"
var (
	seedSecret = []byte("whsec-like-but-raw_secret") // used as its bytes, never decoded
	seedTS     = time.Unix(1700000000, 0)
	seedBody   = []byte(`{"id":"0190a5b2-7c1e-7d3a-9f00-000000000001","type":"user.registered","created_at":"2023-11-14T22:13:20Z","data":{"user_id":"u1"}}`)
	seedSig    = "840647841fbbcb00218b02b99ce298bf59925b91a74ea49d940cd47fee9b9304"
	seedID     = "0190a5b2-7c1e-7d3a-9f00-000000000001"
)

func TestSignVector(t *testing.T) {
	if got := webhook.Sign(seedSecret, seedTS, seedBody); got != seedSig {
		t.Errorf("Sign(vector) = %s, want %s", got, seedSig)
	}
	h := http.Header{}
	webhook.SetHeaders(h, seedSecret, seedID, seedTS, seedBody)
	want := map[string]string{"Webhook-Id": seedID, "Webhook-Timestamp": "1700000000", "Webhook-Signature": seedSig}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("SetHeaders: %s = %q, want %q", k, got, v)
		}
	}
	if len(h) != len(want) {
		t.Errorf("SetHeaders set %d headers, want %d: %v", len(h), len(want), h)
	}
}

func seedHeader(ts, sig string) http.Header {
	h := http.Header{}
	if ts != "" {
		h.Set(webhook.HeaderTimestamp, ts)
	}
	if sig != "" {
		h.Set(webhook.HeaderSignature, sig)
	}
	return h
}

func TestVerify(t *testing.T) {
	other := []byte("the-other-secret")
	at := func(d time.Duration) time.Time { return seedTS.Add(d) }
	dup := seedHeader("1700000000", seedSig)
	dup.Add(webhook.HeaderSignature, seedSig)
	tests := []struct {
		name    string
		secrets [][]byte
		header  http.Header
		body    []byte
		now     time.Time
		want    error
	}{
		{"valid", [][]byte{seedSecret}, seedHeader("1700000000", seedSig), seedBody, seedTS, nil},
		{"rotation: second secret", [][]byte{other, seedSecret}, seedHeader("1700000000", seedSig), seedBody, seedTS, nil},
		{"uppercase hex", [][]byte{seedSecret}, seedHeader("1700000000", strings.ToUpper(seedSig)), seedBody, seedTS, nil},
		{"300 s old", [][]byte{seedSecret}, seedHeader("1700000000", seedSig), seedBody, at(300 * time.Second), nil},
		{"300 s ahead", [][]byte{seedSecret}, seedHeader("1700000000", seedSig), seedBody, at(-300 * time.Second), nil},
		{"301 s old", [][]byte{seedSecret}, seedHeader("1700000000", seedSig), seedBody, at(301 * time.Second), webhook.ErrTooOld},
		{"301 s ahead", [][]byte{seedSecret}, seedHeader("1700000000", seedSig), seedBody, at(-301 * time.Second), webhook.ErrTooNew},
		{"wrong secret", [][]byte{other}, seedHeader("1700000000", seedSig), seedBody, seedTS, webhook.ErrSignature},
		{"body changed", [][]byte{seedSecret}, seedHeader("1700000000", seedSig), append([]byte(nil), append(seedBody, ' ')...), seedTS, webhook.ErrSignature},
		{"timestamp changed", [][]byte{seedSecret}, seedHeader("1700000001", seedSig), seedBody, seedTS, webhook.ErrSignature},
		{"timestamp with leading zero", [][]byte{seedSecret}, seedHeader("01700000000", seedSig), seedBody, seedTS, webhook.ErrSignature},
		{"stale and forged: signature first", [][]byte{other}, seedHeader("1700000000", seedSig), seedBody, at(time.Hour), webhook.ErrSignature},
		{"no timestamp", [][]byte{seedSecret}, seedHeader("", seedSig), seedBody, seedTS, webhook.ErrMissingHeader},
		{"no signature", [][]byte{seedSecret}, seedHeader("1700000000", ""), seedBody, seedTS, webhook.ErrMissingHeader},
		{"negative timestamp", [][]byte{seedSecret}, seedHeader("-1700000000", seedSig), seedBody, seedTS, webhook.ErrMalformedHeader},
		{"plus sign", [][]byte{seedSecret}, seedHeader("+1700000000", seedSig), seedBody, seedTS, webhook.ErrMalformedHeader},
		{"fraction", [][]byte{seedSecret}, seedHeader("1700000000.5", seedSig), seedBody, seedTS, webhook.ErrMalformedHeader},
		{"exponent", [][]byte{seedSecret}, seedHeader("1.7e9", seedSig), seedBody, seedTS, webhook.ErrMalformedHeader},
		{"hex timestamp", [][]byte{seedSecret}, seedHeader("0x6553f100", seedSig), seedBody, seedTS, webhook.ErrMalformedHeader},
		{"19 digits", [][]byte{seedSecret}, seedHeader("1000000000000000000", seedSig), seedBody, seedTS, webhook.ErrMalformedHeader},
		{"signature not hex", [][]byte{seedSecret}, seedHeader("1700000000", strings.Repeat("g", 64)), seedBody, seedTS, webhook.ErrMalformedHeader},
		{"signature short", [][]byte{seedSecret}, seedHeader("1700000000", seedSig[:62]), seedBody, seedTS, webhook.ErrMalformedHeader},
		{"signature prefixed", [][]byte{seedSecret}, seedHeader("1700000000", "sha256="+seedSig), seedBody, seedTS, webhook.ErrMalformedHeader},
		{"no secrets", nil, seedHeader("1700000000", seedSig), seedBody, seedTS, webhook.ErrInvalidSecret},
		{"empty secret", [][]byte{{}}, seedHeader("1700000000", seedSig), seedBody, seedTS, webhook.ErrInvalidSecret},
		{"signature twice", [][]byte{seedSecret}, dup, seedBody, seedTS, webhook.ErrMalformedHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := webhook.Verify(tt.secrets, tt.header, tt.body, tt.now)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("Verify(%v, %q) = %v, want %v", tt.header, tt.body, err, tt.want)
			}
		})
	}
}

func TestStatusOf(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, 200},
		{webhook.ErrSignature, 401},
		{webhook.ErrTooOld, 400},
		{webhook.ErrTooNew, 400},
		{webhook.ErrMissingHeader, 400},
		{webhook.ErrMalformedHeader, 400},
		{webhook.ErrMalformedBody, 400},
		{webhook.ErrInvalidSecret, 500},
		{errors.New("store down"), 500},
	}
	for _, tt := range tests {
		if got := webhook.StatusOf(tt.err); got != tt.want {
			t.Errorf("StatusOf(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}
