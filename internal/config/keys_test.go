package config

import (
	"strings"
	"testing"
	"time"
)

// TestValidateKeySchedule checks that the issuer refuses a key schedule
// under which a verifier could meet a kid it has not seen.
func TestValidateKeySchedule(t *testing.T) {
	tests := []struct {
		name                         string
		maxAge, reload, in, interval time.Duration
		want                         string // "" for valid
	}{
		{"defaults", 5 * time.Minute, 30 * time.Second, 10 * time.Minute, 720 * time.Hour, ""},
		{"rotation off", 5 * time.Minute, 30 * time.Second, 10 * time.Minute, 0, ""},
		{"test sized", time.Second, time.Second, 2 * time.Second, 4 * time.Second, ""},
		{"activation exactly max-age plus reload", time.Minute, time.Second, time.Minute + time.Second, time.Hour, ""},
		{"activation before max-age", 5 * time.Minute, 30 * time.Second, time.Minute, 720 * time.Hour, "--activate-in"},
		{"activation within the reload interval of max-age", 5 * time.Minute, 30 * time.Second, 5 * time.Minute, 720 * time.Hour, "--activate-in"},
		{"max-age 0 is the 5m default", 0, time.Second, time.Minute, 720 * time.Hour, "--activate-in"},
		{"interval equal to activation", time.Second, time.Second, 2 * time.Second, 2 * time.Second, "--key-rotation-interval"},
		{"interval below activation", time.Second, time.Second, 2 * time.Second, time.Second, "--key-rotation-interval"},
		{"negative interval", time.Second, time.Second, 2 * time.Second, -time.Second, "--key-rotation-interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaults(t)
			c.JWKSMaxAge, c.KeyReloadInterval, c.ActivateIn, c.KeyRotationInterval = tt.maxAge, tt.reload, tt.in, tt.interval
			err := c.ValidateServe()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ValidateServe(max-age %s, reload %s, activate-in %s, interval %s) = %v, want nil", tt.maxAge, tt.reload, tt.in, tt.interval, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("ValidateServe(max-age %s, reload %s, activate-in %s, interval %s) = %v, want an error naming %s", tt.maxAge, tt.reload, tt.in, tt.interval, err, tt.want)
			}
		})
	}
}
