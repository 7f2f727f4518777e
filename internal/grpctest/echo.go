package grpctest

import (
	"bytes"
	"context"
	"io"
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

// EchoQuietly sends three messages on a FullDuplexCall to grpctest.Echo,
// quiet for pause before each but the first, and checks each echo, the
// identity that reached the app (user-1) and the call's clean end.
func EchoQuietly(t testing.TB, stream testpb.TestService_FullDuplexCallClient, pause time.Duration) {
	t.Helper()
	for i, body := range [][]byte{[]byte("first"), []byte("second"), bytes.Repeat([]byte("x"), 64<<10)} {
		if i > 0 {
			time.Sleep(pause)
		}
		if err := stream.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: body}}); err != nil {
			_, err = stream.Recv() // the call's status
			t.Fatalf("Send %d after a quiet %s: the call ended with %v, want it open", i, pause, err)
		}
		got, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv %d after a quiet %s = %v, want the echo", i, pause, err)
		}
		if !bytes.Equal(got.GetPayload().GetBody(), body) {
			t.Fatalf("echo %d = %d bytes, want the %d sent", i, len(got.GetPayload().GetBody()), len(body))
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err == nil {
		t.Fatal("Recv after CloseSend = a message, want the end of the call")
	} else if err != io.EOF {
		t.Fatalf("Recv after CloseSend = %v, want EOF (status OK)", err)
	}
	md, err := stream.Header()
	if err != nil {
		t.Fatal(err)
	}
	if got := md.Get("x-seen-user-id"); len(got) != 1 || got[0] != "user-1" {
		t.Errorf("identity reaching the app = %q, want [user-1] (the client's own x-auth-user-id dropped)", got)
	}
}
