package verify

import (
	"context"
	"errors"
	"testing"

	"github.com/lestrrat-go/jwx/v2/jwk"
)

// foreignSource is a KeySource not of this package, counting its calls.
type foreignSource struct {
	key   jwk.Key
	calls int
}

func (f *foreignSource) Key(_ context.Context, kid string) (jwk.Key, error) {
	f.calls++
	if kid != f.key.KeyID() {
		return nil, ErrUnknownKey
	}
	return f.key, nil
}

// TestSourcesKeepPreparedKeys checks that Sources hands out the keys of
// this package's sources as prepared when loaded (the same entry every
// time, no conversion per token), and caches a foreign source's key once
// per key value.
func TestSourcesKeepPreparedKeys(t *testing.T) {
	secret, err := jwk.FromRaw(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	_ = secret.Set(jwk.KeyIDKey, "static")
	set := jwk.NewSet()
	_ = set.AddKey(secret)
	static := NewStaticSource(set)

	other, err := jwk.FromRaw([]byte("another secret of thirty-two by"))
	if err != nil {
		t.Fatal(err)
	}
	_ = other.Set(jwk.KeyIDKey, "foreign")
	foreign := &foreignSource{key: other}

	src := Sources(foreign, static)
	es, ok := src.(entrySource)
	if !ok {
		t.Fatalf("Sources(...) is a %T, want an entrySource", src)
	}
	ctx := context.Background()
	want, err := static.(entrySource).entry(ctx, "static")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		got, err := es.entry(ctx, "static")
		if err != nil || got != want {
			t.Fatalf("entry(static) = %p, %v, want the static source's own entry %p", got, err, want)
		}
	}
	first, err := es.entry(ctx, "foreign")
	if err != nil {
		t.Fatalf("entry(foreign) = %v", err)
	}
	again, _ := es.entry(ctx, "foreign")
	if first != again {
		t.Errorf("entry(foreign) twice = %p then %p, want the cached entry", first, again)
	}
	if _, err := es.entry(ctx, "nobody"); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("entry(nobody) = %v, want ErrUnknownKey", err)
	}
}
