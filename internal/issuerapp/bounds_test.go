package issuerapp

import (
	"testing"

	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/password"
)

// TestHashBoundsAgree: the configuration refuses --hash-concurrency past
// the bound the Hasher clamps to, so a value it accepts is the value used.
func TestHashBoundsAgree(t *testing.T) {
	if config.MaxHashConcurrency != password.MaxConcurrency {
		t.Fatalf("config.MaxHashConcurrency = %d, password.MaxConcurrency = %d", config.MaxHashConcurrency, password.MaxConcurrency)
	}
}
