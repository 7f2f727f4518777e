package verify

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// FuzzDecodeSegment checks the hand-written decoder against the standard
// library's strict raw base64url decoder, which differs only in skipping
// CR and LF.
func FuzzDecodeSegment(f *testing.F) {
	for _, s := range []string{"", "A", "AA", "AB", "AAA", "AAB", "AAAA", "eyJhbGciOiJSUzI1NiJ9", "a-_b", "a+/b", "AA==", "A\nAA"} {
		f.Add(s)
	}
	std := base64.RawURLEncoding.Strict()
	f.Fuzz(func(t *testing.T, s string) {
		want, werr := std.DecodeString(s)
		if strings.ContainsAny(s, "\r\n") {
			werr = base64.CorruptInputError(0)
		}
		n, ok := decodedLen(len(s))
		var got []byte
		if ok {
			got = make([]byte, n)
			ok = decodeSegment(got, s)
		}
		if ok != (werr == nil) || (ok && !bytes.Equal(got, want)) {
			t.Fatalf("decodeSegment(%q) = %x, %v, want %x, %v", s, got, ok, want, werr)
		}
	})
}

func TestParseHeader(t *testing.T) {
	tests := []struct {
		in      string
		alg     string
		kid     string
		typ     string
		wantErr Reason
	}{
		{in: `{}`},
		{in: `{"alg":"RS256","kid":"k","typ":"JWT"}`, alg: "RS256", kid: "k", typ: "JWT"},
		{in: `{"kid":"a\"b\\c\/d\u00e9\ud83d\ude00"}`, kid: "a\"b\\c/d\u00e9\U0001F600"},
		{in: `{"kid":"\n"}`, kid: "\n"},
		{in: "{\"kid\":\"\n\"}", wantErr: ReasonMalformed},
		{in: `{"kid":"\x"}`, wantErr: ReasonMalformed},
		{in: `{"kid":"\u12"}`, wantErr: ReasonMalformed},
		{in: `{"kid":"\udc00\ud800"}`, wantErr: ReasonMalformed},
		{in: `{"kid":"\ud800\u0041"}`, wantErr: ReasonMalformed},
		{in: `{"kid":"k"`, wantErr: ReasonMalformed},
		{in: `{"kid" "k"}`, wantErr: ReasonMalformed},
		{in: `{"kid":"k"}}`, wantErr: ReasonMalformed},
		{in: `{"kid":"k" "alg":"RS256"}`, wantErr: ReasonMalformed},
		{in: `{kid:"k"}`, wantErr: ReasonMalformed},
		{in: `{"kid":null}`, wantErr: ReasonHeader},
		{in: `{"kid":"k","kid":"k"}`, wantErr: ReasonHeader},
		{in: `{"KID":"k"}`, wantErr: ReasonHeader},
		{in: `{"b64":false}`, wantErr: ReasonHeader},
		{in: `null`, wantErr: ReasonMalformed},
		{in: ``, wantErr: ReasonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			h, err := parseHeader([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || err.Reason != tt.wantErr {
					t.Fatalf("parseHeader(%s) = %v, want reason %s", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseHeader(%s) = %v, want nil", tt.in, err)
			}
			if string(h.alg) != tt.alg || string(h.kid) != tt.kid || string(h.typ) != tt.typ {
				t.Errorf("parseHeader(%s) = alg %q kid %q typ %q, want %q %q %q", tt.in, h.alg, h.kid, h.typ, tt.alg, tt.kid, tt.typ)
			}
		})
	}
}
