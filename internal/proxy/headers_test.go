package proxy_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify"
)

func TestStripCookies(t *testing.T) {
	hidden := []string{"palisade_refresh", "palisade_csrf"}
	for _, tc := range []struct {
		name string
		in   []string // Cookie lines
		want []string // nil: no Cookie header left
	}{
		{"none hidden, kept as sent", []string{"a=1;b=2", "c=3"}, []string{"a=1;b=2", "c=3"}},
		{"hidden among others", []string{"a=1; palisade_refresh=x; b=2"}, []string{"a=1; b=2"}},
		{"hidden with spaces around the name", []string{"a=1;  palisade_csrf =y"}, []string{"a=1"}},
		{"hidden on a second line", []string{"a=1", "palisade_csrf=y; c=3"}, []string{"a=1; c=3"}},
		{"only hidden", []string{"palisade_refresh=x; palisade_csrf=y"}, nil},
		{"a name that only starts like a hidden one", []string{"palisade_refresh2=x"}, []string{"palisade_refresh2=x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{"Cookie": slices.Clone(tc.in)}
			proxy.StripCookies(h, hidden...)
			if got := h["Cookie"]; !slices.Equal(got, tc.want) {
				t.Errorf("StripCookies(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSetIdentity(t *testing.T) {
	h := http.Header{}
	proxy.SetIdentity(h, &verify.Identity{Subject: "u1", Role: "admin", SessionID: "s1"})
	want := http.Header{proxy.HeaderUserID: {"u1"}, proxy.HeaderRole: {"admin"}, proxy.HeaderSessionID: {"s1"}}
	if len(h) != len(want) {
		t.Fatalf("SetIdentity set %v, want %v", h, want)
	}
	for name, v := range want {
		if !slices.Equal(h[name], v) {
			t.Errorf("SetIdentity: %s = %q, want %q", name, h[name], v)
		}
	}
	// The values share one array: adding to one header must not reach
	// another.
	h.Add(proxy.HeaderUserID, "extra")
	if got := h[proxy.HeaderRole]; !slices.Equal(got, []string{"admin"}) {
		t.Errorf("after adding to %s, %s = %q, want [admin]", proxy.HeaderUserID, proxy.HeaderRole, got)
	}
	empty := http.Header{}
	proxy.SetIdentity(empty, &verify.Identity{})
	if len(empty) != 0 {
		t.Errorf("SetIdentity of an empty identity set %v, want nothing", empty)
	}
}
