package auth_test

import (
	"reflect"
	"testing"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/store"
)

// holdsHash reports the path to a field named PasswordHash reachable from
// t through struct fields, pointers, slices, arrays and maps, or "".
func holdsHash(t reflect.Type, path string, seen map[reflect.Type]bool) string {
	if seen[t] {
		return ""
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsHash(t.Elem(), path+"[]", seen)
	case reflect.Map:
		if p := holdsHash(t.Key(), path+"[key]", seen); p != "" {
			return p
		}
		return holdsHash(t.Elem(), path+"[]", seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Name == "PasswordHash" {
				return path + "." + f.Name
			}
			if p := holdsHash(f.Type, path+"."+f.Name, seen); p != "" {
				return p
			}
		}
	}
	return ""
}

// TestNoResultHoldsAPasswordHash: the transport and the command line get
// everything from the Service's exported methods, so none of their results
// may reach a password hash (store.User, say, instead of auth.Account).
func TestNoResultHoldsAPasswordHash(t *testing.T) {
	if holdsHash(reflect.TypeFor[[]store.User](), "[]store.User", map[reflect.Type]bool{}) == "" {
		t.Fatal("holdsHash does not find store.User's hash; the check below proves nothing")
	}
	svc := reflect.TypeFor[*auth.Service]()
	if svc.NumMethod() < 10 {
		t.Fatalf("*auth.Service has %d exported methods; the check below would miss the API", svc.NumMethod())
	}
	for i := range svc.NumMethod() {
		m := svc.Method(i)
		for j := range m.Type.NumOut() {
			if p := holdsHash(m.Type.Out(j), m.Name, map[reflect.Type]bool{}); p != "" {
				t.Errorf("Service.%s returns %s, a password hash", m.Name, p)
			}
		}
	}
}
