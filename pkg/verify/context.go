package verify

import "context"

type identityKey struct{}

// NewContext returns a copy of ctx carrying id, as Middleware does for the
// handlers behind it.
func NewContext(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the Identity stored by NewContext, and whether there
// was one.
func FromContext(ctx context.Context) (*Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(*Identity)
	return id, ok && id != nil
}
