package auth_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/store"
)

func TestClassify(t *testing.T) {
	outage := fmt.Errorf("%w: %w", store.ErrUnavailable, io.EOF)
	overloaded := apperr.Wrap(apperr.KindUnavailable, "overloaded", "The service is busy; retry shortly.", errors.New("queue full"))
	for _, tc := range []struct {
		name     string
		err      error
		wantKind apperr.Kind
		wantCode string
	}{
		{"outage as an internal error", apperr.Internal(fmt.Errorf("rotate: %w", outage)), apperr.KindUnavailable, "unavailable"},
		{"bare outage", outage, apperr.KindUnavailable, "unavailable"},
		{"outage under a client error", apperr.Wrap(apperr.KindUnauthenticated, "refresh_token_revoked", "Revoked.", outage), apperr.KindUnavailable, "unavailable"},
		{"unavailable already", apperr.Wrap(apperr.KindUnavailable, "rate_limit_unavailable", "Retry.", outage), apperr.KindUnavailable, "rate_limit_unavailable"},
		{"overloaded", overloaded, apperr.KindUnavailable, "overloaded"},
		{"not found", apperr.Internal(fmt.Errorf("%w: no rows", store.ErrNotFound)), apperr.KindInternal, "internal_error"},
		{"plain fault", errors.New("boom"), apperr.KindInternal, "internal_error"},
		{"client error", apperr.New(apperr.KindUnauthenticated, "invalid_credentials", "Wrong."), apperr.KindUnauthenticated, "invalid_credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := auth.Classify(tc.err)
			if got.Kind != tc.wantKind || got.Code != tc.wantCode {
				t.Errorf("Classify(%v) = kind %d code %q, want kind %d code %q", tc.err, got.Kind, got.Code, tc.wantKind, tc.wantCode)
			}
			if errors.Is(tc.err, store.ErrUnavailable) && !errors.Is(got, store.ErrUnavailable) {
				t.Errorf("Classify(%v) = %v, lost the cause", tc.err, got)
			}
		})
	}
}
