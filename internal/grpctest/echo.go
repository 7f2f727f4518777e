package grpctest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	testpb "google.golang.org/grpc/interop/grpc_testing"
)

// Echo is grpc-go's interop TestService with its two client-streaming
// methods, whose request body stays open for as long as the client wants:
// FullDuplexCall answers each message as it arrives, with its payload;
// StreamingInputCall answers once the client has closed its side, with
// the total payload size. Both send the header x-seen-user-id: the
// x-auth-user-id metadata they received, joined by commas, so a test sees
// which identity reached the app on a stream. It counts the calls in
// progress. It is safe for concurrent use; use it by pointer.
type Echo struct {
	testpb.UnimplementedTestServiceServer
	active atomic.Int64
}

// Active returns how many calls are in progress: started and not returned.
func (e *Echo) Active() int64 { return e.active.Load() }

// FullDuplexCall echoes each request's payload in one response.
func (e *Echo) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	e.active.Add(1)
	defer e.active.Add(-1)
	if err := sendSeenUser(stream); err != nil {
		return err
	}
	for {
		in, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: in.GetPayload()}); err != nil {
			return err
		}
	}
}

// StreamingInputCall sums the payload sizes until the client closes.
func (e *Echo) StreamingInputCall(stream testpb.TestService_StreamingInputCallServer) error {
	e.active.Add(1)
	defer e.active.Add(-1)
	if err := sendSeenUser(stream); err != nil {
		return err
	}
	var total int32
	for {
		in, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: total})
		}
		if err != nil {
			return err
		}
		total += int32(len(in.GetPayload().GetBody()))
	}
}

func sendSeenUser(stream interface {
	SendHeader(metadata.MD) error
	Context() context.Context
}) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	return stream.SendHeader(metadata.Pairs("x-seen-user-id", strings.Join(md.Get("x-auth-user-id"), ",")))
}

// EchoQuietly sends three messages on a FullDuplexCall to Echo, calling
// quiet before each but the first (it returns once the client has been
// quiet long enough), and checks each echo, the identity that reached the
// app (user-1) and the call's clean end.
func EchoQuietly(t testing.TB, stream testpb.TestService_FullDuplexCallClient, quiet func()) {
	t.Helper()
	for i, body := range [][]byte{[]byte("first"), []byte("second"), bytes.Repeat([]byte("x"), 64<<10)} {
		if i > 0 {
			quiet()
		}
		if err := stream.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: body}}); err != nil {
			_, err = stream.Recv() // the call's status
			t.Fatalf("Send %d after a quiet spell: the call ended with %v, want it open", i, err)
		}
		got, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv %d after a quiet spell = %v, want the echo", i, err)
		}
		if !bytes.Equal(got.GetPayload().GetBody(), body) {
			t.Fatalf("echo %d = %d bytes, want the %d sent", i, len(got.GetPayload().GetBody()), len(body))
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("Recv after CloseSend = %v, want EOF (the call's end, status OK)", err)
	}
	md, err := stream.Header()
	if err != nil {
		t.Fatal(err)
	}
	if got := md.Get("x-seen-user-id"); len(got) != 1 || got[0] != "user-1" {
		t.Errorf("identity reaching the app = %q, want [user-1] (the client's own x-auth-user-id dropped)", got)
	}
}

// OutwaitBodyTimeout returns once a request body that is quiet from its
// call on has been quiet for longer than the body idle timeout of the
// verifier at addr (h2c), as the verifier's clock measures it: twice in a
// row, it makes a unary call to Echo with token (none if empty, for a
// public path) whose message stalls inside its prefix, which the app
// waits for, and waits for the verifier's DEADLINE_EXCEEDED. Twice,
// because a body that received bytes has earned time beyond the idle
// timeout at --read-min-rate.
func OutwaitBodyTimeout(t testing.TB, addr, token string) {
	t.Helper()
	for range 2 {
		// Part of the 5-byte prefix, then nothing.
		resp, _ := StalledCall(t, addr, testpb.TestService_UnaryCall_FullMethodName, token, []byte{0, 0, 0})
		if got := resp.Header.Get("Grpc-Status"); got != "4" {
			t.Fatalf("a stalled call = %d with grpc-status %q, want 4 DEADLINE_EXCEEDED from the verifier's body timeout", resp.StatusCode, got)
		}
	}
}

// StalledCall makes a gRPC call over h2c to path at addr, with token (none
// if empty), whose request body is sent and then nothing more, and
// returns the answer once its body has ended, with the number of body
// bytes read. It fails t if no answer has come within 30 s.
func StalledCall(t testing.TB, addr, path, token string, sent []byte) (*http.Response, int64) {
	t.Helper()
	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	c := &http.Client{Transport: &http.Transport{Protocols: &h2}, Timeout: 30 * time.Second}
	defer c.CloseIdleConnections()
	body, stall := io.Pipe()
	defer stall.Close()
	go stall.Write(sent)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, body)
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("a gRPC call stalled after %d bytes: %v, want an answer within 30 s", len(sent), err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, n
}
