package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/palisade-auth/palisade/internal/store"
)

var webhookTests = []subtest{
	{"OutboxFill", testWebhookOutboxFill},
	{"OutboxAuditOnlyType", testWebhookOutboxAuditOnly},
	{"OutboxRollback", testWebhookOutboxRollback},
	{"OutboxRotation", testWebhookOutboxRotation},
	{"OutboxOpenSession", testWebhookOutboxOpenSession},
	{"OutboxDistinctIDs", testWebhookOutboxDistinctIDs},
	{"EndpointRoundTrip", testWebhookEndpointRoundTrip},
	{"EndpointList", testWebhookEndpointList},
	{"EndpointUpdate", testWebhookEndpointUpdate},
	{"EndpointDeleteCascades", testWebhookEndpointDelete},
	{"DeliveryList", testWebhookDeliveryList},
	{"Claim", testWebhookClaim},
	{"ClaimLeaseExpires", testWebhookClaimLeaseExpires},
	{"ClaimPerEndpointCap", testWebhookClaimPerEndpoint},
	{"ClaimSkipsDisabled", testWebhookClaimSkipsDisabled},
	{"ClaimConcurrent", testWebhookClaimConcurrent},
	{"RecordAttempt", testWebhookRecordAttempt},
	{"Retry", testWebhookRetry},
	{"Release", testWebhookRelease},
	{"Prune", testWebhookPrune},
	{"OldestPending", testWebhookOldestPending},
}

// newEndpoint registers an enabled seed-format endpoint subscribed to
// events; mods adjust it first.
func newEndpoint(t *testing.T, q store.Queries, events []string, mods ...func(*store.WebhookEndpoint)) store.WebhookEndpoint {
	t.Helper()
	e := store.WebhookEndpoint{
		ID: newID(t), URL: "https://hooks.example.com/" + newID(t), Events: events,
		Description: "billing", Format: store.WebhookFormatSeed, Status: store.WebhookEnabled,
		Secret: []byte("sealed-secret-" + newID(t)), CreatedAt: at(-time.Hour), UpdatedAt: at(-time.Hour),
	}
	for _, m := range mods {
		m(&e)
	}
	if err := q.CreateWebhookEndpoint(t.Context(), e); err != nil {
		t.Fatalf("CreateWebhookEndpoint(%s) = %v, want nil", e.ID, err)
	}
	return e
}

// newEvent appends an audit entry of typ at when.
func newEvent(t *testing.T, q store.Queries, typ string, when time.Time) store.AuditEvent {
	t.Helper()
	e := store.AuditEvent{
		ID: newID(t), Type: typ, OccurredAt: when, UserID: newID(t), SessionID: newID(t),
		IP: "192.0.2.1", UserAgent: "agent/1.0", RequestID: "req-" + newID(t), Data: []byte(`{"device_id":"d1"}`),
	}
	if err := q.AppendAudit(t.Context(), e); err != nil {
		t.Fatalf("AppendAudit(%s) = %v, want nil", typ, err)
	}
	return e
}

// deliveriesOf lists every delivery of an endpoint, newest first.
func deliveriesOf(t *testing.T, q store.Queries, endpointID string) []store.WebhookDelivery {
	t.Helper()
	ds, err := q.ListWebhookDeliveries(t.Context(), store.WebhookDeliveryFilter{EndpointID: endpointID, Limit: 1000})
	if err != nil {
		t.Fatalf("ListWebhookDeliveries(%s) = %v, want nil", endpointID, err)
	}
	return ds
}

// eventIDs are the event ids of ds, sorted.
func eventIDs(ds []store.WebhookDelivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.EventID)
	}
	slices.Sort(out)
	return out
}

// sortedIDs returns ids sorted.
func sortedIDs(ids ...string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func testWebhookOutboxFill(t *testing.T, s store.Store) {
	subscribed := newEndpoint(t, s, []string{"user.logged_in", "password.changed"})
	disabled := newEndpoint(t, s, []string{"user.logged_in"}, func(e *store.WebhookEndpoint) { e.Status = store.WebhookDisabled })
	other := newEndpoint(t, s, []string{"password.reset"})
	all := newEndpoint(t, s, []string{"*"})

	ev := newEvent(t, s, "user.logged_in", t0)

	for _, e := range []store.WebhookEndpoint{disabled, other} {
		if got := deliveriesOf(t, s, e.ID); len(got) != 0 {
			t.Errorf("deliveries of %s endpoint = %d, want none", e.Events, len(got))
		}
	}
	for _, e := range []store.WebhookEndpoint{subscribed, all} {
		got := deliveriesOf(t, s, e.ID)
		if len(got) != 1 {
			t.Fatalf("deliveries of endpoint %v = %d, want 1", e.Events, len(got))
		}
		d := got[0]
		if d.EndpointID != e.ID || d.EventID != ev.ID || d.EventType != ev.Type || d.Status != store.DeliveryPending ||
			d.Attempts != 0 || d.NextAttemptAt == nil || !sameTime(*d.NextAttemptAt, t0) || !sameTime(d.CreatedAt, t0) ||
			d.LeaseUntil != nil || d.LastAttemptAt != nil || d.LastStatusCode != 0 || d.LastError != "" {
			t.Errorf("delivery of endpoint %v = %+v, want pending for event %s due at %v", e.Events, d, ev.ID, t0)
		}
		if id, err := uuid.Parse(d.ID); err != nil || id.Version() != 7 || id.Variant() != uuid.RFC4122 || id.String() != d.ID {
			t.Errorf("delivery id %q: parse = %v, want a canonical UUIDv7", d.ID, err)
		}
		byID, err := s.WebhookDeliveryByID(t.Context(), d.ID)
		if err != nil || byID.ID != d.ID || byID.EventID != ev.ID {
			t.Errorf("WebhookDeliveryByID(%s) = %+v, %v, want the delivery", d.ID, byID, err)
		}
	}
	_, err := s.WebhookDeliveryByID(t.Context(), newID(t))
	wantErr(t, "WebhookDeliveryByID(unknown)", err, store.ErrNotFound)

	// Every catalogue type reaches "*".
	for _, typ := range store.WebhookEvents {
		newEvent(t, s, typ, t0)
	}
	if got, want := len(deliveriesOf(t, s, all.ID)), 1+len(store.WebhookEvents); got != want {
		t.Errorf("deliveries of the * endpoint after every catalogue type = %d, want %d", got, want)
	}
}

func testWebhookOutboxAuditOnly(t *testing.T, s store.Store) {
	all := newEndpoint(t, s, []string{"*"})
	named := newEndpoint(t, s, []string{"user.updated"}) // not in the catalogue: never delivered
	for _, typ := range []string{"user.updated", "admin.user_updated", "webhook.created"} {
		newEvent(t, s, typ, t0)
	}
	for _, e := range []store.WebhookEndpoint{all, named} {
		if got := deliveriesOf(t, s, e.ID); len(got) != 0 {
			t.Errorf("deliveries of %v for audit-only types = %d, want none", e.Events, len(got))
		}
	}
}

func testWebhookOutboxRollback(t *testing.T, s store.Store) {
	all := newEndpoint(t, s, []string{"*"})
	boom := errors.New("boom")
	err := s.InTx(t.Context(), func(q store.Queries) error {
		newEvent(t, q, "user.registered", t0)
		if got := deliveriesOf(t, q, all.ID); len(got) != 1 {
			t.Errorf("deliveries inside the transaction = %d, want 1", len(got))
		}
		return boom
	})
	wantErr(t, "InTx", err, boom)
	if got := deliveriesOf(t, s, all.ID); len(got) != 0 {
		t.Errorf("deliveries after rollback = %d, want none", len(got))
	}
}

func testWebhookOutboxRotation(t *testing.T, s store.Store) {
	all := newEndpoint(t, s, []string{"*"})
	used := newEndpoint(t, s, []string{"refresh_token.used"})
	u := newUser(t, s)
	sess := newSession(t, s, u.ID)
	tok := newToken(t, s, sess)
	ev := store.AuditEvent{ID: newID(t), Type: "refresh_token.used", OccurredAt: t0, UserID: u.ID, SessionID: sess.ID, Data: []byte(`{}`)}
	if _, err := s.RotateRefreshToken(t.Context(), store.RotateRequest{Hash: tok.Hash, Next: childOf(t, tok, t0), Now: t0, IP: "203.0.113.9", UserAgent: "agent/2.0", Event: &ev}); err != nil {
		t.Fatalf("RotateRefreshToken = %v, want nil", err)
	}
	for _, e := range []store.WebhookEndpoint{all, used} {
		if got := eventIDs(deliveriesOf(t, s, e.ID)); !slices.Equal(got, []string{ev.ID}) {
			t.Errorf("deliveries of %v after a rotation = %v, want [%s]", e.Events, got, ev.ID)
		}
	}
	// A refused rotation writes no entry and queues nothing.
	ev2 := ev
	ev2.ID = newID(t)
	if _, err := s.RotateRefreshToken(t.Context(), store.RotateRequest{Hash: tok.Hash, Next: childOf(t, tok, t0), Now: t0, Event: &ev2}); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("RotateRefreshToken(rotated) = %v, want ErrPrecondition", err)
	}
	if got := len(deliveriesOf(t, s, all.ID)); got != 1 {
		t.Errorf("deliveries after a refused rotation = %d, want 1", got)
	}
}

func testWebhookOutboxOpenSession(t *testing.T, s store.Store) {
	all := newEndpoint(t, s, []string{"*"})
	logins := newEndpoint(t, s, []string{"user.logged_in"})
	u := newUser(t, s)
	first := newLogin(t, u.ID, "phone")
	if _, err := openSessionOf(t, s, first); err != nil {
		t.Fatalf("OpenSession = %v, want nil", err)
	}
	second := newLogin(t, u.ID, "phone") // replaces the first: session.revoked too
	if _, err := openSessionOf(t, s, second); err != nil {
		t.Fatalf("OpenSession(same device) = %v, want nil", err)
	}
	if got, want := eventIDs(deliveriesOf(t, s, logins.ID)), sortedIDs(first.Opened.ID, second.Opened.ID); !slices.Equal(got, want) {
		t.Errorf("deliveries of user.logged_in = %v, want %v", got, want)
	}
	if got, want := eventIDs(deliveriesOf(t, s, all.ID)), sortedIDs(first.Opened.ID, second.Opened.ID, second.Replaced.ID); !slices.Equal(got, want) {
		t.Errorf("deliveries of * = %v, want %v", got, want)
	}
}

func testWebhookOutboxDistinctIDs(t *testing.T, s store.Store) {
	all := newEndpoint(t, s, []string{"*"})
	newEndpoint(t, s, []string{"*"})
	err := s.InTx(t.Context(), func(q store.Queries) error {
		for range 50 {
			newEvent(t, q, "login.failed", t0)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("InTx = %v", err)
	}
	seen := map[string]bool{}
	for _, d := range deliveriesOf(t, s, all.ID) {
		if seen[d.ID] {
			t.Errorf("delivery id %s twice", d.ID)
		}
		seen[d.ID] = true
	}
	if len(seen) != 50 {
		t.Errorf("deliveries = %d, want 50", len(seen))
	}
}

// sameEndpoint reports whether two endpoints are equal as stored.
func sameEndpoint(a, b store.WebhookEndpoint) bool {
	return a.ID == b.ID && a.URL == b.URL && slices.Equal(a.Events, b.Events) && a.Description == b.Description &&
		a.Format == b.Format && a.Status == b.Status && string(a.Secret) == string(b.Secret) &&
		string(a.PreviousSecret) == string(b.PreviousSecret) && (a.PreviousSecret == nil) == (b.PreviousSecret == nil) &&
		(a.PreviousUntil == nil) == (b.PreviousUntil == nil) && (a.PreviousUntil == nil || sameTime(*a.PreviousUntil, *b.PreviousUntil)) &&
		sameTime(a.CreatedAt, b.CreatedAt) && sameTime(a.UpdatedAt, b.UpdatedAt)
}

func testWebhookEndpointRoundTrip(t *testing.T, s store.Store) {
	for _, e := range []store.WebhookEndpoint{
		newEndpoint(t, s, []string{"user.registered", "user.logged_in"}),
		newEndpoint(t, s, []string{"*"}, func(e *store.WebhookEndpoint) {
			e.Format, e.Status, e.Description = store.WebhookFormatStandard, store.WebhookDisabled, ""
			e.PreviousSecret, e.PreviousUntil = []byte{0, 1, 2, 0xff}, ptr(at(24*time.Hour))
		}),
	} {
		got, err := s.WebhookEndpointByID(t.Context(), e.ID)
		if err != nil || !sameEndpoint(got, e) {
			t.Errorf("WebhookEndpointByID(%s) = %+v, %v, want %+v", e.ID, got, err, e)
		}
		dup := e
		dup.URL = "https://other.example.com/"
		wantErr(t, "CreateWebhookEndpoint(same id)", s.CreateWebhookEndpoint(t.Context(), dup), store.ErrAlreadyExists)
	}
	_, err := s.WebhookEndpointByID(t.Context(), newID(t))
	wantErr(t, "WebhookEndpointByID(unknown)", err, store.ErrNotFound)
}

func testWebhookEndpointList(t *testing.T, s store.Store) {
	var want []store.WebhookEndpoint
	for i := range 5 {
		want = append(want, newEndpoint(t, s, []string{"*"}, func(e *store.WebhookEndpoint) {
			e.CreatedAt = at(time.Duration(i/2) * time.Minute) // pairs share a time: the id breaks the tie
		}))
	}
	slices.SortFunc(want, func(a, b store.WebhookEndpoint) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	var got []store.WebhookEndpoint
	f := store.WebhookEndpointFilter{Limit: 2}
	for range 10 {
		page, err := s.ListWebhookEndpoints(t.Context(), f)
		if err != nil {
			t.Fatalf("ListWebhookEndpoints(%+v) = %v", f, err)
		}
		if len(page) > 2 {
			t.Fatalf("ListWebhookEndpoints(limit 2) = %d endpoints", len(page))
		}
		got = append(got, page...)
		if len(page) < 2 {
			break
		}
		last := page[len(page)-1]
		f.After = &store.PageCursor{At: last.CreatedAt, ID: last.ID}
	}
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = sameEndpoint(got[i], want[i])
	}
	if !ok {
		t.Errorf("ListWebhookEndpoints pages = %d endpoints %v, want %d in (created_at, id) order", len(got), idsOf(got), len(want))
	}
}

func idsOf(es []store.WebhookEndpoint) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

func testWebhookEndpointUpdate(t *testing.T, s store.Store) {
	e := newEndpoint(t, s, []string{"user.registered"})
	e.URL, e.Events, e.Description, e.Status = "https://new.example.com/hook", []string{"*"}, "new", store.WebhookDisabled
	e.PreviousSecret, e.Secret, e.PreviousUntil, e.UpdatedAt = e.Secret, []byte("sealed-new"), ptr(at(time.Hour)), t0
	if err := s.UpdateWebhookEndpoint(t.Context(), e); err != nil {
		t.Fatalf("UpdateWebhookEndpoint = %v, want nil", err)
	}
	got, err := s.WebhookEndpointByID(t.Context(), e.ID)
	if err != nil || !sameEndpoint(got, e) {
		t.Errorf("WebhookEndpointByID after update = %+v, %v, want %+v", got, err, e)
	}
	// The overlap ends: the previous secret goes.
	e.PreviousSecret, e.PreviousUntil = nil, nil
	if err := s.UpdateWebhookEndpoint(t.Context(), e); err != nil {
		t.Fatalf("UpdateWebhookEndpoint = %v, want nil", err)
	}
	if got, _ := s.WebhookEndpointByID(t.Context(), e.ID); !sameEndpoint(got, e) {
		t.Errorf("WebhookEndpointByID after clearing the previous secret = %+v, want %+v", got, e)
	}
	e.ID = newID(t)
	wantErr(t, "UpdateWebhookEndpoint(unknown)", s.UpdateWebhookEndpoint(t.Context(), e), store.ErrNotFound)
}

func testWebhookEndpointDelete(t *testing.T, s store.Store) {
	gone := newEndpoint(t, s, []string{"*"})
	kept := newEndpoint(t, s, []string{"*"})
	newEvent(t, s, "user.registered", t0)
	ds := deliveriesOf(t, s, gone.ID)
	if len(ds) != 1 {
		t.Fatalf("deliveries = %d, want 1", len(ds))
	}
	wantErr(t, "DeleteWebhookEndpoint", s.DeleteWebhookEndpoint(t.Context(), gone.ID), nil)
	_, err := s.WebhookEndpointByID(t.Context(), gone.ID)
	wantErr(t, "WebhookEndpointByID(deleted)", err, store.ErrNotFound)
	_, err = s.WebhookDeliveryByID(t.Context(), ds[0].ID)
	wantErr(t, "WebhookDeliveryByID(delivery of a deleted endpoint)", err, store.ErrNotFound)
	if got := len(deliveriesOf(t, s, kept.ID)); got != 1 {
		t.Errorf("deliveries of the other endpoint = %d, want 1", got)
	}
	wantErr(t, "DeleteWebhookEndpoint(again)", s.DeleteWebhookEndpoint(t.Context(), gone.ID), store.ErrNotFound)
	// Nothing is queued for it any more.
	newEvent(t, s, "user.registered", t0)
	if got := len(deliveriesOf(t, s, gone.ID)); got != 0 {
		t.Errorf("deliveries of a deleted endpoint = %d, want none", got)
	}
}

func testWebhookDeliveryList(t *testing.T, s store.Store) {
	e := newEndpoint(t, s, []string{"*"})
	for i := range 5 {
		newEvent(t, s, "user.registered", at(time.Duration(i/2)*time.Minute)) // pairs share a time
	}
	all := deliveriesOf(t, s, e.ID)
	want := slices.Clone(all)
	slices.SortFunc(want, func(a, b store.WebhookDelivery) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	if len(all) != 5 || !slices.EqualFunc(all, want, func(a, b store.WebhookDelivery) bool { return a.ID == b.ID }) {
		t.Fatalf("ListWebhookDeliveries = %d deliveries, want 5 newest first", len(all))
	}
	var paged []store.WebhookDelivery
	f := store.WebhookDeliveryFilter{EndpointID: e.ID, Limit: 2}
	for range 10 {
		page, err := s.ListWebhookDeliveries(t.Context(), f)
		if err != nil {
			t.Fatalf("ListWebhookDeliveries(%+v) = %v", f, err)
		}
		paged = append(paged, page...)
		if len(page) < 2 {
			break
		}
		last := page[len(page)-1]
		f.After = &store.PageCursor{At: last.CreatedAt, ID: last.ID}
	}
	if !slices.EqualFunc(paged, want, func(a, b store.WebhookDelivery) bool { return a.ID == b.ID }) {
		t.Errorf("ListWebhookDeliveries pages = %d deliveries, want the 5 in order", len(paged))
	}
	delivered := want[1]
	recordAttempt(t, s, delivered.ID, store.WebhookAttempt{At: t0, StatusCode: 200, Status: store.DeliveryDelivered})
	got, err := s.ListWebhookDeliveries(t.Context(), store.WebhookDeliveryFilter{EndpointID: e.ID, Status: store.DeliveryDelivered})
	if err != nil || len(got) != 1 || got[0].ID != delivered.ID {
		t.Errorf("ListWebhookDeliveries(status delivered) = %d, %v, want [%s]", len(got), err, delivered.ID)
	}
	got, err = s.ListWebhookDeliveries(t.Context(), store.WebhookDeliveryFilter{EndpointID: e.ID, Status: store.DeliveryPending})
	if err != nil || len(got) != 4 {
		t.Errorf("ListWebhookDeliveries(status pending) = %d, %v, want 4", len(got), err)
	}
}

// recordAttempt records an attempt that must succeed.
func recordAttempt(t *testing.T, q store.Queries, id string, a store.WebhookAttempt) {
	t.Helper()
	if err := q.RecordWebhookAttempt(t.Context(), id, a); err != nil {
		t.Fatalf("RecordWebhookAttempt(%s, %s) = %v, want nil", id, a.Status, err)
	}
}
