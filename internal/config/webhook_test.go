package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWebhookFlagDefaults(t *testing.T) {
	c := defaults(t)
	if c.WebhookTimeout != 5*time.Second || c.WebhookRetryBackoff != 30*time.Second || c.WebhookMaxAttempts != 12 ||
		c.WebhookRetention != 720*time.Hour || len(c.WebhookAllowCIDRs) != 0 || c.WebhookConcurrency < 1 {
		t.Errorf("webhook defaults = %s %s %d %s %v %d; want 5s 30s 12 720h none", c.WebhookTimeout, c.WebhookRetryBackoff,
			c.WebhookMaxAttempts, c.WebhookRetention, c.WebhookAllowCIDRs, c.WebhookConcurrency)
	}
}

func TestValidateWebhookFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Issuer)
		want   string // "" for valid
	}{
		{"allow cidrs", func(c *Issuer) { c.WebhookAllowCIDRs = []string{"127.0.0.1/32", "10.96.0.0/12", "fd00::/8"} }, ""},
		{"allow not a cidr", func(c *Issuer) { c.WebhookAllowCIDRs = []string{"10.0.0.1"} }, "--webhook-allow-cidr"},
		{"allow garbage", func(c *Issuer) { c.WebhookAllowCIDRs = []string{"cluster"} }, "--webhook-allow-cidr"},
		{"timeout zero", func(c *Issuer) { c.WebhookTimeout = 0 }, "--webhook-timeout"},
		{"timeout long", func(c *Issuer) { c.WebhookTimeout = 2 * time.Minute }, "--webhook-timeout"},
		{"backoff small", func(c *Issuer) { c.WebhookRetryBackoff = 200 * time.Millisecond }, ""},
		{"backoff zero", func(c *Issuer) { c.WebhookRetryBackoff = 0 }, "--webhook-retry-backoff"},
		{"attempts zero", func(c *Issuer) { c.WebhookMaxAttempts = 0 }, "--webhook-max-attempts"},
		{"attempts many", func(c *Issuer) { c.WebhookMaxAttempts = 51 }, "--webhook-max-attempts"},
		{"retention short", func(c *Issuer) { c.WebhookRetention = time.Minute }, "--webhook-retention"},
		{"concurrency zero", func(c *Issuer) { c.WebhookConcurrency = 0 }, "--webhook-concurrency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := defaults(t)
			tc.mutate(c)
			err := c.ValidateServe()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("ValidateServe() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("ValidateServe() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestWebhookAllow(t *testing.T) {
	g := WebhookGuard{WebhookAllowCIDRs: []string{"127.0.0.1/32", "10.1.2.3/8"}}
	if err := g.Validate(); err != nil {
		t.Fatalf("Validate() = %v, want nil", err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")}
	if got := g.Allow(); !slices.Equal(got, want) {
		t.Errorf("Allow() = %v, want %v", got, want)
	}
}
