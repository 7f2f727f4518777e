package redisurl

import (
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		in, client, prefix string
		wantErr            bool
	}{
		{in: "redis://127.0.0.1:6379", client: "redis://127.0.0.1:6379"},
		{in: "rediss://:s3cret@cache:6380/1?prefix=eu:", client: "rediss://:s3cret@cache:6380/1", prefix: "eu:"},
		{in: "redis://cache/2?prefix=a&dial_timeout=1s", client: "redis://cache/2?dial_timeout=1s", prefix: "a"},
		// The client's own checks come later: the shape is right.
		{in: "redis://cache:6379/x", client: "redis://cache:6379/x"},
		{in: "http://cache:6379", wantErr: true},
		{in: "redis", wantErr: true},
		{in: "redis://u:s3cret@:6379", wantErr: true},
		{in: "redis://u:s3cret%zz@cache", wantErr: true},
		// A password's unescaped /, ? or # ends the authority early, and
		// the rest of the password would go on as path, query or fragment.
		{in: "redis://default:4821/s3cret@cache:6379", wantErr: true},
		{in: "redis://default:4821?prefix=s3cret@cache:6379", wantErr: true},
		{in: "redis://default:4821#s3cret@cache:6379", wantErr: true},
		{in: "redis://default:48%2F21%3Fs3cret%23@cache:6379/1", client: "redis://default:48%2F21%3Fs3cret%23@cache:6379/1"},
		{in: "redis://cache/0?prefix=a%40b", client: "redis://cache/0", prefix: "a@b"},
		// The client would take these, and fail every call.
		{in: "redis://cache:0", wantErr: true},
		// The client would drop the pair, or take the first prefix.
		{in: "redis://cache/0?%zz=1", wantErr: true},
		{in: "redis://cache/0?prefix=a;b", wantErr: true},
		{in: "redis://cache/0?prefix=a&prefix=b", wantErr: true},
		{in: "redis://cache:65536", wantErr: true},
		{in: "redis://cache:99999/0", wantErr: true},
		{in: "redis://cache:65535", client: "redis://cache:65535"},
		// A user without a password is most likely a password: the client
		// would send no AUTH.
		{in: "redis://s3cret@cache:6379/0", wantErr: true},
		{in: "redis://bob:@cache:6379/0", wantErr: true},
		{in: "redis://:@cache:6379/0", client: "redis://:@cache:6379/0"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			client, prefix, err := Split(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Split(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if err != nil {
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("Split(%q) error = %q, repeats the password", tt.in, err)
				}
				return
			}
			if client != tt.client || prefix != tt.prefix {
				t.Errorf("Split(%q) = %q, %q; want %q, %q", tt.in, client, prefix, tt.client, tt.prefix)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	if got := Redact("redis://u:s3cret@cache:6379/1"); strings.Contains(got, "s3cret") || !strings.Contains(got, "cache:6379") {
		t.Errorf("Redact = %q, want the host without the password", got)
	}
	for _, raw := range []string{"redis://s3cret@cache:6379/0", "redis://u:s3cret%zz@cache", "redis://default:4821/s3cret@cache", "redis://default:4821#s3cret@cache", "redis:/u:s3cret@cache"} {
		if got := Redact(raw); strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q) = %q, repeats the password", raw, got)
		}
	}
}
