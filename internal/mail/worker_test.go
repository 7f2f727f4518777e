package mail_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/clocktest"
	"github.com/palisade-auth/palisade/internal/keys"
	"github.com/palisade-auth/palisade/internal/mail"
	"github.com/palisade-auth/palisade/internal/mail/mailtest"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/store/sqlstore"
	"github.com/palisade-auth/palisade/internal/testdb"
	"github.com/palisade-auth/palisade/internal/token"
)

// fixture is a worker over a real database and a real SMTP server.
type fixture struct {
	st     *sqlstore.Store
	sealer *keys.Sealer
	smtp   *mailtest.Server
	clock  *clocktest.Clock
	reg    *prometheus.Registry
	logs   *syncBuffer
	w      *mail.Worker
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func forEachDB(t *testing.T, fn func(t *testing.T, dbURL string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, testdb.SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, testdb.Postgres(t)) })
}

func newFixture(t *testing.T, dbURL string, srvOpts mailtest.Options, cfg mail.Config) *fixture {
	t.Helper()
	st := testdb.Store(t, dbURL)
	kek := make([]byte, keys.KEKSize)
	if _, err := rand.Read(kek); err != nil {
		t.Fatal(err)
	}
	sealer, err := keys.NewSealer(kek, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srv := mailtest.Start(t, srvOpts)
	sender, err := mail.NewSMTP("smtp://"+srv.Addr(), "Palisade <no-reply@auth.example.com>", mail.SMTPOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, sealer: sealer, smtp: srv, clock: clocktest.New(time.Now().UTC().Truncate(time.Second)),
		reg: prometheus.NewRegistry(), logs: &syncBuffer{}}
	if cfg.PublicURL == "" {
		cfg.PublicURL = "https://app.example.com"
	}
	f.w, err = mail.NewWorker(st, sealer, sender, cfg, f.clock.Now, slog.New(slog.NewJSONHandler(f.logs, nil)), f.reg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// linkTTL is the lifetime enqueue gives the links, by kind.
var linkTTL = map[string]time.Duration{store.PurposePasswordReset: 30 * time.Minute, store.PurposeVerifyEmail: 48 * time.Hour}

// enqueue queues a mail as the account flows do: a stored one-time token of
// a user of its own ("u-" + the job id), sealed to the job's id. It returns
// the job id and the token.
func (f *fixture) enqueue(t *testing.T, kind, to string) (string, string) {
	t.Helper()
	ctx := context.Background()
	id := uuid.Must(uuid.NewV7()).String()
	tok, err := token.NewOpaque(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := f.sealer.Seal([]byte(tok), auth.MailSealContext(id))
	if err != nil {
		t.Fatal(err)
	}
	now := f.clock.Now()
	userID := "u-" + id
	if err := f.st.CreateUser(ctx, store.User{
		ID: userID, Email: to, EmailNormalized: id + "@example.test", PasswordHash: "x", Role: "user",
		Status: store.StatusEnabled, CreatedAt: now, UpdatedAt: now,
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.CreateOneTimeToken(ctx, store.OneTimeToken{
		Hash: token.Hash(tok), UserID: userID, Purpose: kind, CreatedAt: now, ExpiresAt: now.Add(linkTTL[kind]),
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.EnqueueMail(ctx, store.MailJob{
		ID: id, Kind: kind, UserID: userID, To: to, Name: "Ada", SealedToken: sealed, CreatedAt: now, NextAttemptAt: now,
	}); err != nil {
		t.Fatal(err)
	}
	return id, tok
}

// pending reports whether any mail is still unsent and not given up, at any
// time in the future. (It leases what it finds, so it ends a test's use of
// the queue.)
func (f *fixture) pending(t *testing.T) int {
	t.Helper()
	jobs, err := f.st.ClaimMail(context.Background(), f.clock.Now().Add(1000*time.Hour), 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return len(jobs)
}

func (f *fixture) counter(t *testing.T, name, kind string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func (f *fixture) drain(t *testing.T) {
	t.Helper()
	if _, err := f.w.Drain(context.Background()); err != nil {
		t.Fatalf("Drain = %v", err)
	}
}

func TestWorkerDelivers(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, mailtest.Options{}, mail.Config{})
		resetID, resetTok := f.enqueue(t, store.PurposePasswordReset, "ada@example.com")
		_, verifyTok := f.enqueue(t, store.PurposeVerifyEmail, "grace@example.com")
		f.drain(t)

		for _, c := range []struct{ to, link string }{
			{"ada@example.com", "https://app.example.com/reset-password?token=" + resetTok},
			{"grace@example.com", "https://app.example.com/verify-email?token=" + verifyTok},
		} {
			m := f.smtp.Wait(t, 5*time.Second, mailtest.To(c.to))
			if !strings.Contains(m.Text, c.link) || !strings.Contains(m.HTML, c.link) {
				t.Errorf("mail to %s: text and HTML parts must both carry %s\ntext:\n%s\nhtml:\n%s", c.to, c.link, m.Text, m.HTML)
			}
			if !strings.Contains(m.Text, "Hello Ada,") {
				t.Errorf("mail to %s does not greet by name:\n%s", c.to, m.Text)
			}
		}
		if m := f.smtp.Wait(t, time.Second, mailtest.To("ada@example.com")); !strings.Contains(m.Text, "30 minutes") {
			t.Errorf("reset mail does not state the link's lifetime:\n%s", m.Text)
		}
		if n := len(f.smtp.Messages()); n != 2 {
			t.Errorf("server got %d mails, want 2", n)
		}
		f.drain(t) // nothing left: nothing sent twice
		if n := len(f.smtp.Messages()); n != 2 {
			t.Errorf("after a second drain the server has %d mails, want still 2", n)
		}
		for _, kind := range []string{store.PurposePasswordReset, store.PurposeVerifyEmail} {
			if got := f.counter(t, "issuer_mails_sent_total", kind); got != 1 {
				t.Errorf("issuer_mails_sent_total{kind=%s} = %v, want 1", kind, got)
			}
		}
		logs := f.logs.String()
		for _, secret := range []string{resetTok, verifyTok} {
			if strings.Contains(logs, secret) {
				t.Errorf("a token appears in the worker's log:\n%s", logs)
			}
		}
		if !strings.Contains(logs, resetID) {
			t.Errorf("the worker's log does not name job %s:\n%s", resetID, logs)
		}
		if n := f.pending(t); n != 0 {
			t.Errorf("%d mails still pending after delivery, want 0", n)
		}
	})
}

// TestWorkerRetriesThenGivesUp runs against a server that refuses every
// mail: each failure is retried after a doubling, capped wait, and the
// mail is given up after the last attempt.
func TestWorkerRetriesThenGivesUp(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, mailtest.Options{}, mail.Config{
			MaxAttempts: 4, Backoff: 10 * time.Second, MaxBackoff: 15 * time.Second,
		})
		f.smtp.Reject(&smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "mailbox busy"})
		start := f.clock.Now()
		f.enqueue(t, store.PurposeVerifyEmail, "ada@example.com")

		// Attempt n fails at the time shown; the next one is due after
		// 10s, then 15s (20s capped), then 15s.
		steps := []struct {
			at           time.Duration
			wantAttempts int
		}{
			{0, 1},
			{10*time.Second - time.Millisecond, 1},
			{10 * time.Second, 2},
			{25*time.Second - time.Millisecond, 2},
			{25 * time.Second, 3},
			{40*time.Second - time.Millisecond, 3},
			{40 * time.Second, 4}, // the last: given up
			{1000 * time.Hour, 4},
		}
		for _, s := range steps {
			f.clock.Set(start.Add(s.at))
			f.drain(t)
			if got := f.smtp.Attempts(); got != s.wantAttempts {
				t.Fatalf("at +%s: server saw %d attempts, want %d", s.at, got, s.wantAttempts)
			}
		}
		if got := f.counter(t, "issuer_mail_retries_total", store.PurposeVerifyEmail); got != 3 {
			t.Errorf("issuer_mail_retries_total = %v, want 3", got)
		}
		if got := f.counter(t, "issuer_mails_failed_total", store.PurposeVerifyEmail); got != 1 {
			t.Errorf("issuer_mails_failed_total = %v, want 1", got)
		}
		if !strings.Contains(f.logs.String(), "mailbox busy") {
			t.Errorf("the worker's log lacks the server's answer:\n%s", f.logs.String())
		}
		if n := f.pending(t); n != 0 {
			t.Errorf("%d mails still pending after giving up, want 0", n)
		}
	})
}

func TestRetryDelay(t *testing.T) {
	c := mail.Config{Backoff: 30 * time.Second, MaxBackoff: time.Hour}
	tests := []struct {
		attempt int
		want    time.Duration
	}{
		{1, 30 * time.Second}, {2, time.Minute}, {3, 2 * time.Minute}, {7, 32 * time.Minute},
		{8, time.Hour}, {9, time.Hour}, {1000, time.Hour},
	}
	for _, tt := range tests {
		if got := c.RetryDelay(tt.attempt); got != tt.want {
			t.Errorf("RetryDelay(%d) = %s, want %s", tt.attempt, got, tt.want)
		}
	}
}

// TestWorkerGivesUpWhatCannotSucceed: a token that does not open (another
// key-encryption key) is given up, and a link that expired while the mail
// waited is dropped, both at once, without sending.
func TestWorkerGivesUpWhatCannotSucceed(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, mailtest.Options{}, mail.Config{})
		id := uuid.Must(uuid.NewV7()).String()
		sealed, err := f.sealer.Seal([]byte(tok), auth.MailSealContext("another job"))
		if err != nil {
			t.Fatal(err)
		}
		now := f.clock.Now()
		if err := f.st.EnqueueMail(context.Background(), store.MailJob{
			ID: id, Kind: store.PurposeVerifyEmail, To: "ada@example.com", SealedToken: sealed, CreatedAt: now, NextAttemptAt: now,
		}); err != nil {
			t.Fatal(err)
		}
		f.enqueue(t, store.PurposePasswordReset, "grace@example.com")
		f.clock.Set(now.Add(30 * time.Minute))
		f.drain(t)
		if n := f.smtp.Attempts(); n != 0 {
			t.Errorf("server saw %d attempts, want 0", n)
		}
		if got := f.counter(t, "issuer_mails_failed_total", store.PurposeVerifyEmail); got != 1 {
			t.Errorf("issuer_mails_failed_total{kind=verify_email} = %v, want 1 (the token that does not open)", got)
		}
		if got := f.counter(t, "issuer_mails_dropped_total", store.PurposePasswordReset); got != 1 {
			t.Errorf("issuer_mails_dropped_total{kind=password_reset} = %v, want 1 (the expired link)", got)
		}
		if n := f.pending(t); n != 0 {
			t.Errorf("%d mails pending, want 0", n)
		}
	})
}

// TestWorkerDropsDeadLinks: a mail whose link was replaced by a newer one
// (a second forgot-password) or already used (the user verified through an
// earlier mail) is not sent; the newer mail is.
func TestWorkerDropsDeadLinks(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		f := newFixture(t, dbURL, mailtest.Options{}, mail.Config{})
		replacedID, _ := f.enqueue(t, store.PurposePasswordReset, "ada@example.com")
		// A newer link for the same user and purpose replaces the first.
		now := f.clock.Now()
		newer, err := token.NewOpaque(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.st.CreateOneTimeToken(ctx, store.OneTimeToken{
			Hash: token.Hash(newer), UserID: "u-" + replacedID, Purpose: store.PurposePasswordReset, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		}); err != nil {
			t.Fatal(err)
		}
		_, usedTok := f.enqueue(t, store.PurposeVerifyEmail, "grace@example.com")
		if _, err := f.st.ConsumeOneTimeToken(ctx, token.Hash(usedTok), store.PurposeVerifyEmail, now); err != nil {
			t.Fatal(err)
		}
		_, liveTok := f.enqueue(t, store.PurposeVerifyEmail, "live@example.com")
		f.drain(t)

		if msgs := f.smtp.Messages(); len(msgs) != 1 || !strings.Contains(msgs[0].Text, liveTok) {
			t.Fatalf("server got %d mails, want only the one with a live link", len(msgs))
		}
		for _, kind := range []string{store.PurposePasswordReset, store.PurposeVerifyEmail} {
			if got := f.counter(t, "issuer_mails_dropped_total", kind); got != 1 {
				t.Errorf("issuer_mails_dropped_total{kind=%s} = %v, want 1", kind, got)
			}
		}
		if got := f.counter(t, "issuer_mails_failed_total", store.PurposePasswordReset); got != 0 {
			t.Errorf("a dropped mail counted as failed")
		}
		if n := f.pending(t); n != 0 {
			t.Errorf("%d mails pending, want 0", n)
		}
	})
}

// TestWorkerRun: a mail queued before Run starts is sent at start (the
// restart case); one queued later is sent when Wake is called, long before
// the poll interval; and stopping waits for a delivery in flight.
func TestWorkerRun(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		inData := make(chan struct{}, 10)
		release := make(chan struct{})
		var holdNext atomic.Bool
		f := newFixture(t, dbURL, mailtest.Options{BeforeData: func() {
			if holdNext.Load() {
				inData <- struct{}{}
				<-release
			}
		}}, mail.Config{PollInterval: time.Hour})
		var releaseOnce sync.Once
		t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
		f.enqueue(t, store.PurposeVerifyEmail, "before@example.com")

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { f.w.Run(ctx); close(done) }()
		f.smtp.Wait(t, 10*time.Second, mailtest.To("before@example.com"))

		f.enqueue(t, store.PurposeVerifyEmail, "woken@example.com")
		f.w.Wake()
		f.w.Wake() // never blocks, whatever is pending
		f.smtp.Wait(t, 10*time.Second, mailtest.To("woken@example.com"))

		holdNext.Store(true)
		f.enqueue(t, store.PurposeVerifyEmail, "inflight@example.com")
		f.w.Wake()
		select {
		case <-inData:
		case <-time.After(10 * time.Second):
			t.Fatal("the third mail never reached the server")
		}
		cancel()
		select {
		case <-done:
			t.Fatal("Run returned while a delivery was in flight")
		case <-time.After(200 * time.Millisecond):
			// Not proof on its own (Run might return later), but the
			// checks below are: the held mail ends recorded as sent.
		}
		releaseOnce.Do(func() { close(release) })
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after the delivery finished")
		}
		f.smtp.Wait(t, time.Second, mailtest.To("inflight@example.com"))
		if n := f.pending(t); n != 0 {
			t.Errorf("%d mails pending after Run stopped, want 0 (the in-flight one recorded as sent)", n)
		}
		if got := f.counter(t, "issuer_mails_sent_total", store.PurposeVerifyEmail); got != 3 {
			t.Errorf("issuer_mails_sent_total = %v, want 3", got)
		}
	})
}
