package issuerapi

import (
	"strings"
	"testing"
	"time"
)

func TestHostCookieMaxAge(t *testing.T) {
	for _, tt := range []struct {
		in   time.Duration
		want string // the Max-Age attribute as sent
	}{
		{14 * 24 * time.Hour, "Max-Age=1209600"},
		{1500 * time.Millisecond, "Max-Age=2"},
		{300 * time.Millisecond, "Max-Age=1"}, // not 0: no Max-Age would be a session cookie
		{0, "Max-Age=0"},                      // expired: deleted
		{-1, "Max-Age=0"},
	} {
		got := hostCookie("__Host-refresh_token", "v", tt.in).String()
		if !strings.Contains(got, tt.want) {
			t.Errorf("hostCookie(%s) = %q, want %s", tt.in, got, tt.want)
		}
	}
}
