package auth

import (
	"strings"
	"testing"

	"github.com/palisade-auth/palisade/internal/text"
)

// TestUserAgentHitsTextClean: the User-Agent header is the one input kept
// rather than refused; what is stored of it is text.Clean's storable form,
// cut to 512 bytes on a rune boundary.
func TestUserAgentHitsTextClean(t *testing.T) {
	for ua, want := range map[string]string{
		"bad \xff\xfe agent \xc2\x85 end": "bad \ufffd agent  end",
		"nul\x00inside":                   "nulinside",
		"x" + strings.Repeat("é", 300):    "x" + strings.Repeat("é", 255), // 511 bytes: the next é would split
	} {
		got := Meta{UserAgent: ua}.userAgent()
		if got != want || got != text.Clean(got) || !text.Storable(got) {
			t.Errorf("userAgent(%q) = %q, want %q", ua, got, want)
		}
	}
}
