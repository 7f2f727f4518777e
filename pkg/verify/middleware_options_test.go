package verify_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/palisade-auth/palisade/pkg/verify"
)

// TestMiddlewareTokenFuncWithCookieAuth checks that the two ways of taking
// the token cannot be given together: one would be silently ignored.
func TestMiddlewareTokenFuncWithCookieAuth(t *testing.T) {
	v := newVerifier(t, verify.Config{})
	tokenFunc := verify.WithTokenFunc(func(r *http.Request) (string, bool) { return r.Header.Get("X-Token"), true })
	cookies := verify.WithCookieAuth(verify.CookieAuth{Origins: []string{"https://app.example.com"}})
	for _, opts := range [][]verify.MiddlewareOption{{tokenFunc, cookies}, {cookies, tokenFunc}} {
		func() {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, "WithTokenFunc") || !strings.Contains(msg, "WithCookieAuth") {
					t.Errorf("Middleware(WithTokenFunc, WithCookieAuth) panicked with %v, want a panic naming both options", r)
				}
			}()
			verify.Middleware(v, opts...)
		}()
	}
	// Each alone is fine.
	verify.Middleware(v, tokenFunc)
	verify.Middleware(v, cookies)
}
