package config

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"
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

// Log is how much a command logs.
type Log struct {
	LogLevel string
	level    slog.Level
}

// Flags registers --log-level.
func (l *Log) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&l.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
}

// Validate checks the level and keeps it for Level.
func (l *Log) Validate() error {
	level, err := ParseLogLevel(l.LogLevel)
	l.level = level
	return err
}

// Level is the level Validate read (info before it ran).
func (l *Log) Level() slog.Level { return l.level }
