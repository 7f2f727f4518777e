package verify_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// jwksServer serves a JWK set the test controls and counts its fetches.
type jwksServer struct {
	*httptest.Server
	fetches atomic.Int64

	mu           sync.Mutex
	status       int
	body         []byte // nil: the key set's current JWKS
	cacheControl string
	ks           *verifytest.KeySet
}

func newJWKSServer(t *testing.T, ks *verifytest.KeySet) *jwksServer {
	t.Helper()
	s := &jwksServer{ks: ks, status: http.StatusOK, cacheControl: "public, max-age=60"}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		status, body, cc := s.status, s.body, s.cacheControl
		s.mu.Unlock()
		if body == nil {
			body = s.ks.JWKS()
		}
		w.Header().Set("Content-Type", "application/json")
		if cc != "" {
			w.Header().Set("Cache-Control", cc)
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) url() string { return s.URL + verifytest.JWKSPath }

// serve sets what the next fetches get.
func (s *jwksServer) serve(status int, body []byte, cacheControl string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body, s.cacheControl = status, body, cacheControl
}
