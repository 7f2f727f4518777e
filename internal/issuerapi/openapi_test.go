package issuerapi

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// openAPIPath is the hand-written API document, relative to this package.
const openAPIPath = "../../docs/openapi.json"

func readOpenAPI(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatalf("read %s: %v", openAPIPath, err)
	}
	return b
}

// httpMethods are the operation keys of an OpenAPI path item; its other
// keys (parameters, summary, servers, ...) are not operations.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// TestOpenAPIDocumentsEveryRoute keeps the document and the router in step:
// a route without documentation, or documentation of a route that is not
// served, fails.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(readOpenAPI(t), &doc); err != nil {
		t.Fatalf("decode %s: %v", openAPIPath, err)
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths {
		for key := range item {
			if slices.Contains(httpMethods, key) {
				documented[strings.ToUpper(key)+" "+path] = true
			}
		}
	}
	served := map[string]bool{}
	for _, p := range (&API{}).Patterns() {
		served[p] = true
	}

	var undocumented, unserved []string
	for p := range served {
		if !documented[p] {
			undocumented = append(undocumented, p)
		}
	}
	for p := range documented {
		if !served[p] {
			unserved = append(unserved, p)
		}
	}
	slices.Sort(undocumented)
	slices.Sort(unserved)
	if len(undocumented) > 0 {
		t.Errorf("routes missing from %s: %q", openAPIPath, undocumented)
	}
	if len(unserved) > 0 {
		t.Errorf("operations in %s that routes() does not serve: %q", openAPIPath, unserved)
	}
}

// TestOpenAPIErrorCodes checks that every error code of API.md that these
// routes can answer with is documented. A code must appear as a JSON string
// (a const, an enum member or an example value), not only in prose.
func TestOpenAPIErrorCodes(t *testing.T) {
	text := string(readOpenAPI(t))
	codes := []string{
		"malformed_request",
		"validation_failed",
		"email_already_registered",
		"invalid_credentials",
		"account_disabled",
		"invalid_token",
		"refresh_token_expired",
		"refresh_token_revoked",
		"not_found",
		"payload_too_large",
		"unsupported_media_type",
		"internal_error",
		"idempotency_key_reused",
		"idempotency_key_in_progress",
		"rate_limited",
		"rate_limit_unavailable",
		"overloaded",
		"unavailable",
		"request_timeout",
		"csrf_failed",
	}
	for _, code := range codes {
		t.Run(code, func(t *testing.T) {
			if !strings.Contains(text, `"`+code+`"`) {
				t.Errorf("%s does not document the error code %q", openAPIPath, code)
			}
		})
	}
}
