package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGRPCPercentEncode(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"missing or invalid access token", "missing or invalid access token"},
		{"100% sure", "100%25 sure"},
		{"line\nbreak", "line%0Abreak"},
		{"café", "caf%C3%A9"},
		{"\x7f~", "%7F~"},
	} {
		if got := grpcPercentEncode(tc.in); got != tc.want {
			t.Errorf("grpcPercentEncode(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRefuseStatuses maps every refusal to its gRPC status for a gRPC call
// and to its HTTP status otherwise, and forward-auth's gate never to gRPC.
func TestRefuseStatuses(t *testing.T) {
	for _, tc := range []struct {
		why        refusal
		grpcStatus string
		httpStatus int
	}{
		{refuseUnauthenticated, "16", http.StatusUnauthorized},
		{refuseCSRF, "7", http.StatusForbidden},
		{refuseBodyTimeout, "4", http.StatusRequestTimeout},
		{refuseUpstream, "14", http.StatusBadGateway},
	} {
		for _, g := range []*gate{{}, {httpOnly: true}} {
			for _, ct := range []string{"application/grpc", "text/plain"} {
				r := httptest.NewRequest(http.MethodPost, "/svc/Method", nil)
				r.Header.Set("Content-Type", ct)
				w := httptest.NewRecorder()
				g.refuse(w, r, tc.why)
				asGRPC := !g.httpOnly && ct == "application/grpc"
				gotGRPC := w.Header().Get("Grpc-Status")
				switch {
				case asGRPC && (w.Code != http.StatusOK || gotGRPC != tc.grpcStatus || w.Body.Len() != 0):
					t.Errorf("refuse(%d) of a gRPC call = %d, grpc-status %q, %d body bytes; want 200, %s, none", tc.why, w.Code, gotGRPC, w.Body.Len(), tc.grpcStatus)
				case !asGRPC && (w.Code != tc.httpStatus || gotGRPC != ""):
					t.Errorf("refuse(%d) (httpOnly %v, %s) = %d, grpc-status %q; want %d, none", tc.why, g.httpOnly, ct, w.Code, gotGRPC, tc.httpStatus)
				}
			}
		}
	}
}

// TestFirstMessageEndsWhereItsPrefixSays: the deadlines are lifted at the
// read that completes the first message, however the body's reads split
// it, and never before.
func TestFirstMessageEndsWhereItsPrefixSays(t *testing.T) {
	msg := func(flag byte, body string) string {
		return string([]byte{flag, 0, 0, byte(len(body) >> 8), byte(len(body))}) + body
	}
	for _, tc := range []struct {
		name  string
		body  string // the whole request body
		reads []int  // the size of each read, the last one taking the rest
		first int    // the first message's length, prefix included
	}{
		{"empty message, one read", msg(0, ""), []int{5}, 5},
		{"empty message, byte by byte", msg(0, ""), []int{1, 1, 1, 1, 1}, 5},
		{"prefix split, then the message", msg(0, "hello"), []int{2, 3, 5}, 10},
		{"byte by byte", msg(1, "hello"), []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 10},
		{"two messages in one read", msg(0, "hello") + msg(0, "again"), []int{20}, 10},
		{"first ends inside a read", msg(0, "hello") + msg(0, "again"), []int{4, 8, 8}, 10},
		{"a 300-byte message", msg(0, strings.Repeat("x", 300)), []int{5, 299, 1}, 305},
		{"a message longer than the body", string([]byte{0, 0x7f, 0xff, 0xff, 0xff}) + "abc", []int{4, 4}, 1 << 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &firstMessage{ReadCloser: io.NopCloser(strings.NewReader(tc.body)), ctx: context.Background()}
			total := 0
			for i, size := range tc.reads {
				n, err := io.ReadFull(b, make([]byte, size))
				if err != nil || n != size {
					t.Fatalf("read %d = %d, %v; want %d", i, n, err, size)
				}
				total += n
				if want := total >= tc.first; b.done != want {
					t.Fatalf("after %d bytes: first message complete = %v, want %v", total, b.done, want)
				}
			}
		})
	}
}

// FuzzFirstMessage: whatever the body and however its reads split it, the
// wrapper passes every byte through unchanged and marks the first message
// complete exactly when the bytes read reach the length its prefix gives.
func FuzzFirstMessage(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 2, 'h', 'i', 0, 0, 0, 0, 0}, []byte{1, 3, 2, 9})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 'x'}, []byte{6})
	f.Add([]byte{0, 0}, []byte{})
	f.Fuzz(func(t *testing.T, body, splits []byte) {
		b := &firstMessage{ReadCloser: io.NopCloser(bytes.NewReader(body)), ctx: context.Background()}
		first := int64(-1) // the first message's length, when the body holds its prefix
		if len(body) >= grpcLengthPrefix {
			first = grpcLengthPrefix + int64(binary.BigEndian.Uint32(body[1:grpcLengthPrefix]))
		}
		var got []byte
		for i := 0; ; i++ {
			size := len(body) + 1
			if i < len(splits) {
				size = int(splits[i]) + 1
			}
			p := make([]byte, size)
			n, err := b.Read(p)
			got = append(got, p[:n]...)
			if want := first >= 0 && int64(len(got)) >= first; b.done != want {
				t.Fatalf("after %d of %d bytes: first message complete = %v, want %v", len(got), len(body), b.done, want)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("read %x through the wrapper, want %x", got, body)
		}
	})
}
