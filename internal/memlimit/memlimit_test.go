package memlimit

import (
	"bytes"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

func TestChoose(t *testing.T) {
	const mib = 1 << 20
	derived := Choice{Limit: 72 * mib, Source: "derived"}
	none := Choice{Limit: None, Source: "none of its own"}
	for _, tc := range []struct {
		name        string
		own         Choice
		container   int64
		containerOK bool
		want        int64
		wantSource  string
	}{
		{"no container: its own", derived, 0, false, 72 * mib, "derived"},
		{"no container, none of its own: none", none, 0, false, None, "none of its own"},
		{"a larger container: its own", derived, 900 * mib, true, 72 * mib, "derived"},
		{"a smaller container: the container's", derived, 57 * mib, true, 57 * mib, "container: 90% of its memory limit, below the 72 MiB derived"},
		{"none of its own: the container's", none, 900 * mib, true, 900 * mib, "container: 90% of its memory limit"},
		{"a container equal to its own: its own", derived, 72 * mib, true, 72 * mib, "derived"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := choose(tc.own, tc.container, tc.containerOK)
			if got.Limit != tc.want || got.Source != tc.wantSource {
				t.Errorf("choose = %d %q, want %d %q", got.Limit, got.Source, tc.want, tc.wantSource)
			}
		})
	}
}

func TestShare(t *testing.T) {
	if got, want := share(100<<20), int64(90<<20); got != want {
		t.Errorf("share(100 MiB) = %d, want %d", got, want)
	}
	// cgroup v1 writes "no limit" as the largest page-aligned int64; any
	// value that would not fit is none.
	if got := share(math.MaxUint64); got != None {
		t.Errorf("share(MaxUint64) = %d, want None", got)
	}
}

// Apply leaves the operator's GOMEMLIMIT, "off" included, to the runtime,
// which applied it at start, and reads an empty one as unset, as the
// runtime does.
func TestApply(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	own := Choice{Limit: 50 << 20, Source: "its own"}

	t.Run("GOMEMLIMIT set", func(t *testing.T) {
		const operators = 123 << 20 // what the runtime read at start
		debug.SetMemoryLimit(operators)
		var out bytes.Buffer
		c := Apply(slog.New(slog.NewJSONHandler(&out, nil)), func(k string) string {
			if k == "GOMEMLIMIT" {
				return "123MiB"
			}
			return ""
		}, own)
		if got := debug.SetMemoryLimit(-1); got != operators || c.Limit != operators || c.Source != "GOMEMLIMIT" {
			t.Errorf("runtime limit %d, Apply = %+v; want the operator's %d untouched", got, c, operators)
		}
		if !strings.Contains(out.String(), `"mib":123,"source":"GOMEMLIMIT"`) {
			t.Errorf("log %q does not say the operator's limit stands", out.String())
		}
	})
	t.Run("GOMEMLIMIT empty", func(t *testing.T) {
		container, inContainer, err := Container()
		if err != nil {
			t.Fatal(err)
		}
		want := own.Limit
		if inContainer && container < want {
			want = container
		}
		debug.SetMemoryLimit(None)
		c := Apply(slog.New(slog.DiscardHandler), func(string) string { return "" }, own)
		if got := debug.SetMemoryLimit(-1); got != want || c.Limit != want {
			t.Errorf("runtime limit %d, Apply = %+v; want %d", got, c, want)
		}
	})
}
