package issuerapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/palisade-auth/palisade/internal/ratelimit"
)

// TestEveryAnonymousWriteIsLimited: a route anyone may send a body to
// (an unauthenticated POST) has rate limits, or says why it has none, so a
// new route cannot go unlimited by omission.
func TestEveryAnonymousWriteIsLimited(t *testing.T) {
	for _, rt := range (&API{}).routes() {
		anonymousWrite := !rt.protected && strings.HasPrefix(rt.pattern, "POST ")
		switch {
		case anonymousWrite && len(rt.limits) == 0 && rt.unlimited == "":
			t.Errorf("route %s: no rate limit and no reason in unlimited", rt.pattern)
		case len(rt.limits) > 0 && rt.unlimited != "":
			t.Errorf("route %s: has limits and says it is unlimited (%q)", rt.pattern, rt.unlimited)
		}
	}
}

// TestRouteLimitsAreWellFormed checks what the route table can get wrong:
// an unknown limit name, a per-user limit before authentication, a rule
// kind on a subject it cannot work with.
func TestRouteLimitsAreWellFormed(t *testing.T) {
	defaults := ratelimit.Defaults()
	for _, rt := range (&API{}).routes() {
		for _, rule := range rt.limits {
			if _, ok := defaults[rule.name]; !ok {
				t.Errorf("route %s: unknown limit %q", rt.pattern, rule.name)
			}
			if rule.per == perUser && !rt.protected {
				t.Errorf("route %s: limit %s per user, but the route is not authenticated", rt.pattern, rule.name)
			}
			if rule.over == refuseUnlessKnown && rule.per != perEmail {
				t.Errorf("route %s: limit %s passes known clients but is not per email", rt.pattern, rule.name)
			}
			// Only forgot-password's handler honours throttled.
			if rule.over == quiet && rt.pattern != "POST /v1/password/forgot" {
				t.Errorf("route %s: quiet limit %s, but its handler does not check throttled", rt.pattern, rule.name)
			}
		}
		// Per-user limits are split off to run after authentication;
		// splitLimits panics for an unprotected route.
		before, after := splitLimits(rt)
		if len(before)+len(after) != len(rt.limits) {
			t.Errorf("route %s: splitLimits lost rules", rt.pattern)
		}
	}
}

// TestEveryLimitIsUsed: every limit --rate-limit can set is in front of a
// route.
func TestEveryLimitIsUsed(t *testing.T) {
	used := map[string]bool{}
	for _, rt := range (&API{}).routes() {
		for _, rule := range rt.limits {
			used[rule.name] = true
		}
	}
	for _, name := range ratelimit.Names() {
		if !used[name] {
			t.Errorf("limit %s is configurable but no route uses it", name)
		}
	}
}

// TestOpenAPIDocumentsRateLimits: a route that can answer 429 documents
// it.
func TestOpenAPIDocumentsRateLimits(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(readOpenAPI(t), &doc); err != nil {
		t.Fatalf("decode %s: %v", openAPIPath, err)
	}
	for _, rt := range (&API{}).routes() {
		refuses := false
		for _, rule := range rt.limits {
			refuses = refuses || rule.over != quiet
		}
		if !refuses {
			continue
		}
		method, path, _ := strings.Cut(rt.pattern, " ")
		if _, ok := doc.Paths[path][strings.ToLower(method)].Responses["429"]; !ok {
			t.Errorf("%s: %s answers 429 when rate limited but does not document it", openAPIPath, rt.pattern)
		}
	}
}
