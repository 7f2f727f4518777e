package issuerapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// Every body is read whole (or to one byte past the limit), its buffer is
// counted while held, and the count returns to zero on release, whether
// the size was announced or not.
func TestHeldBodiesCountsWhatIsHeld(t *testing.T) {
	const limit = 4096
	for _, size := range []int{0, 1, 511, 512, 513, 3000, limit, limit + 1, limit + 700} {
		for _, announced := range []bool{true, false} {
			t.Run(fmt.Sprintf("%d/announced=%v", size, announced), func(t *testing.T) {
				var h heldBodies
				body := bytes.Repeat([]byte("b"), size)
				hint := int64(-1)
				if announced {
					hint = int64(size)
				}
				buf, release, err := h.read(bytes.NewReader(body), hint, limit)
				if err != nil {
					t.Fatal(err)
				}
				if want := body[:min(size, limit+1)]; !bytes.Equal(buf, want) {
					t.Fatalf("read = %d bytes, want %d", len(buf), len(want))
				}
				if n := h.n.Load(); n != int64(cap(buf)) {
					t.Fatalf("while held the count is %d, want the buffer's %d", n, cap(buf))
				}
				if announced && size <= firstBuffer && cap(buf) != size+1 {
					t.Errorf("an announced body of %d got a buffer of %d, want %d", size, cap(buf), size+1)
				}
				release()
				if n := h.n.Load(); n != 0 {
					t.Fatalf("after release the count is %d, want 0", n)
				}
			})
		}
	}
}

// A body that arrives slowly is counted as it arrives, and a large
// Content-Length alone does not make the server hold a body's worth.
func TestHeldBodiesCountsASlowBodyAsItArrives(t *testing.T) {
	var h heldBodies
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, release, _ := h.read(pr, 60000, 65536)
		release()
	}()
	if _, err := pw.Write([]byte("{")); err != nil { // returns once read
		t.Fatal(err)
	}
	if n := h.n.Load(); n != firstBuffer+1 {
		t.Fatalf("after the first byte of an announced 60000 the count is %d, want %d", n, firstBuffer+1)
	}
	if _, err := pw.Write(bytes.Repeat([]byte("x"), 20000)); err != nil {
		t.Fatal(err)
	}
	if n := h.n.Load(); n < 20001 {
		t.Fatalf("after 20001 bytes the count is %d, want at least that", n)
	}
	pw.Close()
	<-done
	if n := h.n.Load(); n != 0 {
		t.Fatalf("after release the count is %d, want 0", n)
	}
}

// A login body peeked for its email is handed to the handler as it is:
// one buffer, counted once, released by the peek's caller.
func TestPeekedBodyIsReadOnce(t *testing.T) {
	a := &API{cfg: Config{MaxBodyBytes: 1 << 16}}
	body := `{"email":"Ada@Example.com","password":"correct horse battery staple"}`
	r := httptest.NewRequest("POST", "/v1/login", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	email, releasePeek := a.peekEmail(r)
	if email != "ada@example.com" {
		t.Fatalf("peekEmail = %q", email)
	}
	held := a.HeldBodyBytes()
	got, release, err := a.readBody(httptest.NewRecorder(), r)
	if err != nil || string(got) != body {
		t.Fatalf("readBody after the peek = %q, %v; want the body", got, err)
	}
	if n := a.HeldBodyBytes(); n != held || n != int64(len(body)+1) {
		t.Fatalf("held %d after the peek and %d after readBody, want %d both times", held, n, len(body)+1)
	}
	release()
	releasePeek()
	if n := a.HeldBodyBytes(); n != 0 {
		t.Fatalf("after both releases %d bytes are held, want 0", n)
	}
}
