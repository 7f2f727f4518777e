package config

import (
	"fmt"
	"log/slog"
	"strings"
)

// ParseLogLevel reads debug, info, warn or error.
func ParseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(strings.TrimSpace(s)))); err != nil {
		return 0, fmt.Errorf("--log-level must be debug, info, warn or error, got %q", s)
	}
	return l, nil
}
