package webhook_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/palisade-auth/palisade/pkg/webhook"
)

func Example() {
	secret := []byte("the secret exactly as the issuer showed it")
	now := time.Unix(1700000000, 0) // in production leave Config.Now nil

	// The receiver: the application sees each verified event once.
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := webhook.IDFromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		fmt.Printf("app: event %s, %d bytes\n", id, len(body))
		w.WriteHeader(http.StatusNoContent)
	})
	h, err := webhook.NewHandler(app, webhook.Config{
		Secrets: [][]byte{secret},
		Now:     func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}

	// The sender signs each attempt with its own timestamp.
	body := `{"id":"evt-1","type":"user.registered","created_at":"2023-11-14T22:13:20Z","data":{"user_id":"u1"}}`
	deliver := func(at time.Time, key []byte) int {
		r := httptest.NewRequest(http.MethodPost, "/webhooks/palisade", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		webhook.SetHeaders(r.Header, key, "evt-1", at, []byte(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	fmt.Println("first:", deliver(now, secret))
	fmt.Println("again:", deliver(now.Add(-time.Minute), secret))
	fmt.Println("forged:", deliver(now, []byte("guess")))
	fmt.Println("stale:", deliver(now.Add(-10*time.Minute), secret))
	// Output:
	// app: event evt-1, 99 bytes
	// first: 204
	// again: 200
	// forged: 401
	// stale: 400
}

func ExampleVerify() {
	secret := []byte("s3cret")
	body := []byte(`{"id":"evt-1"}`)
	sent := time.Unix(1700000000, 0)
	h := http.Header{}
	webhook.SetHeaders(h, secret, "evt-1", sent, body)

	// Accept the old and the new secret while the issuer rotates.
	secrets := [][]byte{[]byte("new s3cret"), secret}
	fmt.Println(webhook.Verify(secrets, h, body, sent.Add(time.Minute)))
	err := webhook.Verify(secrets, h, body, sent.Add(time.Hour))
	fmt.Println(err, webhook.StatusOf(err))
	// Output:
	// <nil>
	// webhook: timestamp too old: 3600 s old, tolerance 300 s 400
}

func ExampleVerifyStandard() {
	key, err := webhook.ParseStandardSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	body := []byte(`{"test": 2432232314}`)
	sent := time.Unix(1614265330, 0)
	fmt.Println(webhook.SignStandard(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", sent, body))

	h := http.Header{}
	webhook.SetStandardHeaders(h, [][]byte{key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", sent, body)
	fmt.Println(webhook.VerifyStandard([][]byte{key}, h, body, sent))
	// Output:
	// v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
	// <nil>
}
