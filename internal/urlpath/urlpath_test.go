package urlpath

import "testing"

func TestCanonical(t *testing.T) {
	for path, want := range map[string]bool{
		"/": true, "/public/": true, "/public/a.css": true, "/a/b.c/d": true, "/...": true,
		"": false, "public": false, "//a": false, "/a//b": false, "/a/./b": false, "/a/../b": false,
		"/a/..": false, "/%2e%2e/": false, `/a\b`: false, "/a;b": false, "/..;/admin": false,
	} {
		if got := Canonical(path); got != want {
			t.Errorf("Canonical(%q) = %v, want %v", path, got, want)
		}
	}
}
