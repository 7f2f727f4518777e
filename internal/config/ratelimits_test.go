package config

import (
	"strings"
	"testing"
	"time"
)

func TestRateLimitStoreValidation(t *testing.T) {
	tests := []struct {
		store   string
		timeout time.Duration
		wantErr string
	}{
		{"", 200 * time.Millisecond, ""},
		{"memory", 200 * time.Millisecond, ""},
		{"database", 200 * time.Millisecond, ""},
		{"redis://127.0.0.1:6379", 200 * time.Millisecond, ""},
		{"redis://u:s3cret@cache:6379/2", time.Millisecond, ""},
		{"rediss://:s3cret@cache:6380/0?prefix=eu:", 10 * time.Second, ""},
		{"redis", 200 * time.Millisecond, "--rate-limit-store must be"},
		// Not a store: only what precedes the URL's first delimiter is
		// shown, since any part of it may hold the password.
		{"unix:///tmp/redis.sock?password=s3cret", 200 * time.Millisecond, `got "unix" (the rest not shown)`},
		{"redis:/u:s3cret@cache", 200 * time.Millisecond, "--rate-limit-store must be"},
		{"redis://cache:99999", 200 * time.Millisecond, "port must be from 1 to 65535"},
		{"redis://u:s3cret@:6379", 200 * time.Millisecond, "--rate-limit-store:"},
		{"redis://u:s3cret%zz@cache:6379", 200 * time.Millisecond, "--rate-limit-store:"},
		// What only the Redis client checks is the issuer's to refuse
		// (TestIssuerRefusesAMalformedRedisURL): the verifier shares this
		// package and links no Redis client.
		{"redis://u:s3cret@cache:6379/x", 200 * time.Millisecond, ""},
		{"redis://cache:6379", 0, "--rate-limit-store-timeout"},
		{"redis://cache:6379", 11 * time.Second, "--rate-limit-store-timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.store+" "+tt.timeout.String(), func(t *testing.T) {
			r := RateLimits{RateLimitStore: tt.store, RateLimitStoreTimeout: tt.timeout}
			err := r.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate(%q, %s) = %v, want nil", tt.store, tt.timeout, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate(%q, %s) = %v, want an error with %q", tt.store, tt.timeout, err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Validate(%q) = %q: repeats the password", tt.store, err)
			}
		})
	}
}
