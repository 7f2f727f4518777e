package config

import (
	"fmt"
	"log/slog"
	"strings"
)

// ParseLogLevel reads debug, info, warn or error, in any case.
func ParseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level must be debug, info, warn or error, got %q", s)
}
