package storetest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

var accountTests = []subtest{
	{"OneTimeTokenCreateAndGet", testOneTimeCreate},
	{"OneTimeTokenReplacesOlder", testOneTimeReplaces},
	{"OneTimeTokenConsume", testOneTimeConsume},
	{"OneTimeTokenConsumeConcurrent", testOneTimeConsumeConcurrent},
	{"SetEmailVerified", testSetEmailVerified},
	{"MailQueue", testMailQueue},
	{"MailClaimConcurrent", testMailClaimConcurrent},
	{"MailNotice", testMailNotice},
}

func newOneTime(t *testing.T, q store.Queries, userID, purpose string, created time.Time) store.OneTimeToken {
	t.Helper()
	ot := store.OneTimeToken{Hash: newHash(t), UserID: userID, Purpose: purpose, CreatedAt: created, ExpiresAt: created.Add(30 * time.Minute)}
	if err := q.CreateOneTimeToken(t.Context(), ot); err != nil {
		t.Fatalf("CreateOneTimeToken = %v, want nil", err)
	}
	return ot
}

func mustOneTime(t *testing.T, q store.Queries, hash string) store.OneTimeToken {
	t.Helper()
	ot, err := q.OneTimeTokenByHash(t.Context(), hash)
	if err != nil {
		t.Fatalf("OneTimeTokenByHash(%s) = %v, want nil", hash, err)
	}
	return ot
}

func testOneTimeCreate(t *testing.T, s store.Store) {
	u := newUser(t, s)
	ot := newOneTime(t, s, u.ID, store.PurposePasswordReset, t0)
	checkSame(t, "OneTimeTokenByHash", mustOneTime(t, s, ot.Hash), ot)
	_, err := s.OneTimeTokenByHash(t.Context(), newHash(t))
	wantErr(t, "OneTimeTokenByHash(unknown)", err, store.ErrNotFound)
}

func testOneTimeReplaces(t *testing.T, s store.Store) {
	u, other := newUser(t, s), newUser(t, s)
	old := newOneTime(t, s, u.ID, store.PurposePasswordReset, at(-time.Minute))
	verify := newOneTime(t, s, u.ID, store.PurposeVerifyEmail, at(-time.Minute))
	others := newOneTime(t, s, other.ID, store.PurposePasswordReset, at(-time.Minute))
	fresh := newOneTime(t, s, u.ID, store.PurposePasswordReset, t0)

	want := old
	want.UsedAt = ptr(t0)
	checkSame(t, "older reset token after a new one", mustOneTime(t, s, old.Hash), want)
	checkSame(t, "verification token of the same user", mustOneTime(t, s, verify.Hash), verify)
	checkSame(t, "reset token of another user", mustOneTime(t, s, others.Hash), others)
	checkSame(t, "the new token", mustOneTime(t, s, fresh.Hash), fresh)
	_, err := s.ConsumeOneTimeToken(t.Context(), old.Hash, store.PurposePasswordReset, t0)
	wantErr(t, "ConsumeOneTimeToken(replaced token)", err, store.ErrNotFound)
}

func testOneTimeConsume(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	ot := newOneTime(t, s, u.ID, store.PurposePasswordReset, t0)

	_, err := s.ConsumeOneTimeToken(ctx, ot.Hash, store.PurposeVerifyEmail, at(time.Minute))
	wantErr(t, "ConsumeOneTimeToken(wrong purpose)", err, store.ErrNotFound)
	_, err = s.ConsumeOneTimeToken(ctx, ot.Hash, store.PurposePasswordReset, ot.ExpiresAt)
	wantErr(t, "ConsumeOneTimeToken(at expiry)", err, store.ErrNotFound)
	checkSame(t, "token after refused consumptions", mustOneTime(t, s, ot.Hash), ot)

	got, err := s.ConsumeOneTimeToken(ctx, ot.Hash, store.PurposePasswordReset, at(time.Minute))
	wantErr(t, "ConsumeOneTimeToken", err, nil)
	want := ot
	want.UsedAt = ptr(at(time.Minute))
	checkSame(t, "ConsumeOneTimeToken()", got, want)
	_, err = s.ConsumeOneTimeToken(ctx, ot.Hash, store.PurposePasswordReset, at(2*time.Minute))
	wantErr(t, "ConsumeOneTimeToken(used token)", err, store.ErrNotFound)
	_, err = s.ConsumeOneTimeToken(ctx, newHash(t), store.PurposePasswordReset, t0)
	wantErr(t, "ConsumeOneTimeToken(unknown)", err, store.ErrNotFound)
}

func testOneTimeConsumeConcurrent(t *testing.T, s store.Store) {
	ot := newOneTime(t, s, newUser(t, s).ID, store.PurposeVerifyEmail, t0)
	const n = 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = s.ConsumeOneTimeToken(t.Context(), ot.Hash, store.PurposeVerifyEmail, at(time.Second))
		}()
	}
	close(start)
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrNotFound):
			t.Errorf("ConsumeOneTimeToken #%d = %v, want nil or %v", i, err, store.ErrNotFound)
		}
	}
	if won != 1 {
		t.Errorf("concurrent ConsumeOneTimeToken: %d succeeded, want exactly 1", won)
	}
}

func testSetEmailVerified(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s, func(u *store.User) { u.EmailVerifiedAt = nil })
	wantErr(t, "SetEmailVerified", setEmailVerified(t, s, u.ID, t0), nil)
	wantErr(t, "SetEmailVerified(again)", setEmailVerified(t, s, u.ID, at(time.Hour)), nil)
	got, err := s.UserByID(ctx, u.ID)
	if err != nil || got.EmailVerifiedAt == nil || !sameTime(*got.EmailVerifiedAt, t0) {
		t.Errorf("EmailVerifiedAt after two SetEmailVerified = %v, %v; want the first, %v", got.EmailVerifiedAt, err, t0)
	}
	wantErr(t, "SetEmailVerified(unknown)", setEmailVerified(t, s, newID(t), t0), store.ErrNotFound)
}

func newMail(t *testing.T, q store.Queries, userID string, due time.Time) store.MailJob {
	t.Helper()
	j := store.MailJob{ID: newID(t), Kind: "password_reset", UserID: userID, To: "ada@example.com", Name: "Ada",
		SealedToken: []byte("sealed"), CreatedAt: due, NextAttemptAt: due}
	if err := q.EnqueueMail(t.Context(), j); err != nil {
		t.Fatalf("EnqueueMail = %v, want nil", err)
	}
	return j
}

func ids(jobs []store.MailJob) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	slices.Sort(out)
	return out
}

func testMailQueue(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	a, b := newMail(t, s, u.ID, at(-2*time.Minute)), newMail(t, s, u.ID, at(-time.Minute))
	later := newMail(t, s, u.ID, at(time.Hour))

	last, err := s.LastMailAt(ctx, u.ID, "password_reset")
	if err != nil || !sameTime(last, later.CreatedAt) {
		t.Errorf("LastMailAt = %v, %v; want %v", last, err, later.CreatedAt)
	}
	_, err = s.LastMailAt(ctx, u.ID, "verify_email")
	wantErr(t, "LastMailAt(no such mail)", err, store.ErrNotFound)

	const lease = time.Minute
	got, err := s.ClaimMail(ctx, t0, 10, lease)
	wantErr(t, "ClaimMail", err, nil)
	if want := ids([]store.MailJob{a, b}); !slices.Equal(ids(got), want) {
		t.Fatalf("ClaimMail = %v, want the due jobs %v", ids(got), want)
	}
	if string(got[0].SealedToken) != "sealed" || got[0].To != "ada@example.com" {
		t.Errorf("ClaimMail job = %+v, want its stored fields", got[0])
	}
	if again, _ := s.ClaimMail(ctx, t0, 10, lease); len(again) != 0 {
		t.Errorf("ClaimMail while leased = %v, want none", ids(again))
	}
	wantErr(t, "MailSent", s.MailSent(ctx, a.ID, t0), nil)
	wantErr(t, "MailRetry", s.MailRetry(ctx, b.ID, 1, at(10*time.Minute), "421 try later"), nil)
	if got, _ := s.ClaimMail(ctx, at(5*time.Minute), 10, lease); len(got) != 0 {
		t.Errorf("ClaimMail before the retry time = %v, want none (a sent, b not due)", ids(got))
	}
	got, _ = s.ClaimMail(ctx, at(10*time.Minute), 10, lease)
	if len(got) != 1 || got[0].ID != b.ID || got[0].Attempts != 1 || got[0].LastError != "421 try later" {
		t.Fatalf("ClaimMail at the retry time = %+v, want b with 1 attempt and its error", got)
	}
	wantErr(t, "MailFailed", s.MailFailed(ctx, b.ID, at(10*time.Minute), "550 no such user"), nil)
	got, _ = s.ClaimMail(ctx, at(2*time.Hour), 10, lease)
	if want := []string{later.ID}; !slices.Equal(ids(got), want) {
		t.Errorf("ClaimMail much later = %v, want only %v (sent and failed jobs never come back)", ids(got), want)
	}
	wantErr(t, "MailSent(unknown)", s.MailSent(ctx, newID(t), t0), store.ErrNotFound)
}

func testMailClaimConcurrent(t *testing.T, s store.Store) {
	u := newUser(t, s)
	var all []store.MailJob
	for range 10 {
		all = append(all, newMail(t, s, u.ID, at(-time.Minute)))
	}
	results := make([][]store.MailJob, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = s.ClaimMail(t.Context(), t0, 3, time.Minute)
		}()
	}
	close(start)
	wg.Wait()
	seen := map[string]int{}
	for i, r := range results {
		wantErr(t, "concurrent ClaimMail", errs[i], nil)
		for _, j := range r {
			seen[j.ID]++
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("job %s claimed %d times, want at most once", id, n)
		}
	}
	if len(seen) != len(all) {
		t.Errorf("concurrent claims got %d distinct jobs, want all %d", len(seen), len(all))
	}
}

// testMailNotice: a notice mail has no sealed token; its notice comes back
// from ClaimMail byte for byte, and a link mail's notice is nil.
func testMailNotice(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := newUser(t, s)
	notice := []byte(`{"at":"2025-03-04T05:06:07Z","ip":"2001:db8::1","user_agent":"Mozilla/5.0 (X11; Linux x86_64) \u00e9t\u00e9"}`)
	n := store.MailJob{ID: newID(t), Kind: store.MailPasswordChanged, UserID: u.ID, To: "ada@example.com", Name: "Ada",
		Notice: notice, CreatedAt: at(-time.Minute), NextAttemptAt: at(-time.Minute)}
	wantErr(t, "EnqueueMail(notice)", s.EnqueueMail(ctx, n), nil)
	link := newMail(t, s, u.ID, t0)
	got, err := s.ClaimMail(ctx, t0, 10, time.Minute)
	wantErr(t, "ClaimMail", err, nil)
	if want := ids([]store.MailJob{n, link}); !slices.Equal(ids(got), want) {
		t.Fatalf("ClaimMail = %v, want the notice and the link mail %v", ids(got), want)
	}
	if got[0].ID != n.ID {
		got[0], got[1] = got[1], got[0]
	}
	if string(got[0].Notice) != string(notice) || len(got[0].SealedToken) != 0 || got[0].Kind != store.MailPasswordChanged {
		t.Errorf("ClaimMail notice job: kind %q, notice %q, sealed %q; want %q, %q, none", got[0].Kind, got[0].Notice, got[0].SealedToken, n.Kind, notice)
	}
	if got[1].Notice != nil {
		t.Errorf("ClaimMail link job: notice %q, want nil", got[1].Notice)
	}
	wantErr(t, "MailSent(notice)", s.MailSent(ctx, n.ID, t0), nil)
}
