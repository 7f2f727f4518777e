package httpserver

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// ErrUnknownLevel is returned by ParseLevel for a name it does not know.
var ErrUnknownLevel = errors.New("unknown log level")

// NewLogger returns a logger that writes one JSON object per line to w,
// dropping records below level.
func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// ParseLevel reads a level name: debug, info, warn (or warning) or error, in
// any case.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	default:
		return slog.LevelInfo, fmt.Errorf("parse %q: %w", s, ErrUnknownLevel)
	}
}
