package text_test

import (
	"testing"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/text"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"", true},
		{"plain", true},
		{"ünïcödé ✓", true},
		{"tab\tand\nnewline", true}, // control characters are the validators' business, not storage's
		{"a\x00b", false},
		{"\x00", false},
		{"bad \xff", false},
		{"\xc3\x28", false},
		{"\xed\xa0\x80", false}, // a surrogate encoded as UTF-8
	} {
		err := text.Check("name", tc.s)
		if (err == nil) != tc.ok || text.Storable(tc.s) != tc.ok {
			t.Errorf("Check(%q) = %v, Storable = %v; want ok %v", tc.s, err, text.Storable(tc.s), tc.ok)
			continue
		}
		if err != nil {
			e := apperr.As(err)
			if e.Kind != apperr.KindMalformed || e.Code != "malformed_request" || len(e.Fields) != 1 || e.Fields[0].Field != "name" {
				t.Errorf("Check(%q) = %+v, want malformed_request naming the field", tc.s, e)
			}
		}
	}
}

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"curl/8.5":                        "curl/8.5",
		"bad \xff\xfe agent \xc2\x85 end": "bad \ufffd agent  end",
		"nul\x00here\r\n":                 "nulhere",
		"":                                "",
	} {
		got := text.Clean(in)
		if got != want || !text.Storable(got) {
			t.Errorf("Clean(%q) = %q, want %q (storable)", in, got, want)
		}
	}
}
