package issuerapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/palisade-auth/palisade/internal/apperr"
)

func TestIsJSON(t *testing.T) {
	tests := []struct {
		ct   string
		want bool
	}{
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"Application/JSON; charset=UTF-8", true},
		{"application/json; charset=latin1", false},
		{"application/json; boundary=x", false},
		{"text/plain", false},
		{"application/jsonx", false},
		{"", false},
		{"application/json;;", false},
	}
	for _, tt := range tests {
		if got := isJSON(tt.ct); got != tt.want {
			t.Errorf("isJSON(%q) = %v, want %v", tt.ct, got, tt.want)
		}
	}
}

func TestDecodeJSON(t *testing.T) {
	tests := []struct {
		name, body string
		wantErr    bool
		wantField  string
	}{
		{"object", `{"email":"a@b.c","password":"x"}`, false, ""},
		{"unknown fields ignored", `{"email":"a","extra":{"deep":[1,2]}}`, false, ""},
		{"leading space", "  \n{\"email\":\"a\"}", false, ""},
		{"trailing space", "{\"email\":\"a\"}  \n", false, ""},
		{"wrong type", `{"email":5}`, true, "email"},
		{"trailing object", `{"email":"a"}{}`, true, ""},
		{"trailing garbage", `{"email":"a"}x`, true, ""},
		{"array", `[]`, true, ""},
		{"null", `null`, true, ""},
		{"string", `"x"`, true, ""},
		{"empty", ``, true, ""},
		{"truncated", `{"email":`, true, ""},
		{"duplicate keys (last wins)", `{"email":"a","email":"b"}`, false, ""},
		{"NUL in a string", `{"email":"a","password":"x\u0000y"}`, true, "password"},
		{"NUL in an optional string", `{"email":"a","device_name":"\u0000"}`, true, "device_name"},
		{"NUL in an ignored field", `{"email":"a","extra":"\u0000"}`, false, ""},
		{"escaped backslash before u0000", `{"email":"\\u0000"}`, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dst loginRequest
			err := decodeJSON([]byte(tt.body), &dst)
			if (err != nil) != tt.wantErr {
				t.Fatalf("decodeJSON(%q) = %v, want error %v", tt.body, err, tt.wantErr)
			}
			if err == nil {
				return
			}
			var e *apperr.Error
			if !errors.As(err, &e) || e.Kind != apperr.KindMalformed || e.Code != "malformed_request" {
				t.Fatalf("decodeJSON(%q) = %v, want malformed_request", tt.body, err)
			}
			if tt.wantField != "" && (len(e.Fields) != 1 || e.Fields[0].Field != tt.wantField) {
				t.Errorf("decodeJSON(%q) fields = %+v, want %q", tt.body, e.Fields, tt.wantField)
			}
		})
	}
}

func TestReadBodyLimit(t *testing.T) {
	a := &API{cfg: Config{MaxBodyBytes: 16}}
	for _, tt := range []struct {
		body string
		kind apperr.Kind
		ok   bool
	}{
		{`{"a":"b"}`, 0, true},
		{`{"a":"0123456789abcdef"}`, apperr.KindTooLarge, false},
	} {
		r := httptest.NewRequest("POST", "/", strings.NewReader(tt.body))
		r.Header.Set("Content-Type", "application/json")
		body, release, err := a.readBody(httptest.NewRecorder(), r)
		if tt.ok != (err == nil) || (err != nil && apperr.As(err).Kind != tt.kind) {
			t.Errorf("readBody(%d bytes, limit 16) = %v", len(tt.body), err)
		}
		if err == nil {
			if string(body) != tt.body {
				t.Errorf("readBody(%q) = %q", tt.body, body)
			}
			release()
		}
		if n := a.HeldBodyBytes(); n != 0 {
			t.Errorf("after readBody(%d bytes, limit 16) and its release %d bytes are held, want 0", len(tt.body), n)
		}
	}
}

// FuzzDecodeJSON: no input panics, and every failure is a malformed_request.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"email":"a@b.c","password":"pw","device_id":"d"}`, `{"email":1}`, `[]`, `null`, `{`, `{"a":"\ud800"}`,
		"{\"email\":\"\xff\"}", `{"refresh_token":"` + strings.Repeat("A", 43) + `"}`, `{}{}`, `{"email":{"$gt":""}}`, `{"password":"\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dst := range []any{&loginRequest{}, &registerRequest{}, &refreshRequest{}} {
			err := decodeJSON(body, dst)
			if err == nil {
				// What is accepted can be stored: no NUL anywhere.
				if out, _ := json.Marshal(dst); bytes.Contains(out, []byte(`\u0000`)) {
					t.Fatalf("decodeJSON(%q) accepted a NUL: %s", body, out)
				}
				continue
			}
			var e *apperr.Error
			if !errors.As(err, &e) || e.Kind != apperr.KindMalformed {
				t.Fatalf("decodeJSON(%q) = %v, want a malformed_request", body, err)
			}
			if statusOf[e.Kind] != http.StatusBadRequest {
				t.Fatalf("malformed maps to %d", statusOf[e.Kind])
			}
		}
	})
}
