package store

import (
	"context"
	"errors"
	"time"
)

// Kinds of revocation feed entries.
const (
	RevokedSession = "session"
	RevokedKey     = "key"
)

// ErrBadMark means a RevocationMark's Position is not one the backend
// hands out (a client's cursor was forged or damaged). Nothing was read.
var ErrBadMark = errors.New("store: malformed revocation position")

// Revocation is one entry of the revocation feed: a session or a signing
// key that no token may be accepted for since At.
type Revocation struct {
	Kind string `db:"kind"` // RevokedSession or RevokedKey
	ID   string `db:"id"`   // the session id (sid) or the key id (kid)
	// At is when it was revoked or, for a session that reached its
	// absolute lifetime unrevoked, its MaxExpiresAt.
	At time.Time `db:"at"`
}

// RevocationMark is where a reader of the feed stands.
type RevocationMark struct {
	// Position is the backend's opaque position in the commit order of
	// revocations: every entry committed before it has been read. "" is
	// the beginning.
	Position string
	// At is the time up to which sessions reaching their absolute end have
	// been read.
	At time.Time
}

// RevocationQueries are the revocation feed's operations. Sessions enter
// the feed on their own: whatever sets a session's revoked_at (every
// revocation path of Queries) records it in the same statement.
type RevocationQueries interface {
	// AppendRevocation records that kind (RevokedSession or RevokedKey)
	// id was revoked at at, in the caller's transaction when inside InTx.
	// The key lifecycle calls it when it revokes a signing key.
	AppendRevocation(ctx context.Context, kind, id string, at time.Time) error
	// Revocations reads the feed in one query: the entries with At after
	// notBefore that committed after after.Position (every one when after
	// is nil), in commit order, then the unrevoked sessions whose
	// MaxExpiresAt is in (max(after.At, notBefore), now], oldest first. It
	// returns the mark to read from next: Position past the entries read,
	// At the later of after.At and now. ErrBadMark when after.Position is
	// not one this backend returned. limit > 0 reads at most limit entries,
	// the first in that order; the mark of a read that returned limit
	// entries may skip the ones left unread, and is not for reading on.
	Revocations(ctx context.Context, after *RevocationMark, notBefore, now time.Time, limit int) ([]Revocation, RevocationMark, error)
	// PruneRevocations deletes at most limit entries revoked before
	// before, oldest first, and returns how many it deleted.
	PruneRevocations(ctx context.Context, before time.Time, limit int) (int, error)
}
