// Package memlimit sets the Go runtime's soft memory limit for both
// binaries: the operator's GOMEMLIMIT when set; otherwise the lower of
// what the binary derives from its own bounds and a share of the memory
// limit of the container it runs in.
//
// A soft limit is safe only well above the live heap: once the live heap
// reaches it, the collector runs without pause, up to half the CPU. So a
// binary whose live heap follows its load (connections, streams, queued
// requests) derives none, and a container's limit is used only because
// past it the process is killed anyway: collecting harder near it is the
// lesser evil.
package memlimit

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"sync"

	cgroup "github.com/KimMachineGun/automemlimit/memlimit"
)

// ContainerShare is the part of a container's memory limit given to the
// Go runtime. The rest is for what the container is charged that the
// runtime does not manage: the executable's pages, the kernel's socket
// buffers. It is automemlimit's default, and the Go GC guide's advice.
const ContainerShare = 0.9

// None is the runtime's limit when there is none.
const None = math.MaxInt64

// Choice is a soft memory limit, None for none, and where it comes from,
// for the log.
type Choice struct {
	Limit  int64
	Source string
}

// Container returns ContainerShare of the memory limit of the cgroup (v1
// or v2) the process runs in; ok is false when it runs under none.
func Container() (limit int64, ok bool, err error) {
	n, err := cgroup.FromCgroup()
	switch {
	case errors.Is(err, cgroup.ErrNoCgroup), errors.Is(err, cgroup.ErrNoLimit):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("memlimit: the container's memory limit: %w", err)
	}
	return share(n), true, nil
}

func share(n uint64) int64 {
	s := float64(n) * ContainerShare
	if s >= math.MaxInt64 {
		return None
	}
	return int64(s)
}

// choose returns the limit to apply given the binary's own choice and the
// container's share (containerOK false: no container limit). The lower
// wins.
func choose(own Choice, container int64, containerOK bool) Choice {
	if !containerOK || container >= own.Limit {
		return own
	}
	src := fmt.Sprintf("container: %.0f%% of its memory limit", ContainerShare*100)
	if own.Limit != None {
		src += fmt.Sprintf(", below the %d MiB %s", own.Limit>>20, own.Source)
	}
	return Choice{Limit: container, Source: src}
}

// Setter keeps the runtime's soft memory limit at the lower of a binary's
// own choice, which may follow its load, and its container's share. The
// operator's GOMEMLIMIT and the container's limit are read once, by
// NewSetter. Safe for concurrent use.
type Setter struct {
	mu          sync.Mutex
	operator    bool // GOMEMLIMIT set: the runtime applied it, and it stands
	container   int64
	containerOK bool
}

// NewSetter reads GOMEMLIMIT through getenv (set means non-empty, as the
// runtime reads it; "off" included) and the container's memory limit. A
// container limit it cannot read is logged and taken as none.
func NewSetter(log *slog.Logger, getenv func(string) string) *Setter {
	s := &Setter{operator: getenv("GOMEMLIMIT") != ""}
	if !s.operator {
		var err error
		if s.container, s.containerOK, err = Container(); err != nil {
			log.Warn("memory limit: the container's is unknown", slog.Any("err", err))
		}
	}
	return s
}

// Set applies the lower of own and the container's share, unless the
// operator set GOMEMLIMIT, and returns the limit in force.
func (s *Setter) Set(own Choice) Choice {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.operator {
		return Choice{Limit: debug.SetMemoryLimit(-1), Source: "GOMEMLIMIT"}
	}
	c := choose(own, s.container, s.containerOK)
	debug.SetMemoryLimit(c.Limit)
	return c
}

// Log writes the limit in force and its source.
func Log(log *slog.Logger, c Choice) {
	if c.Limit == None {
		log.Info("memory limit", slog.String("mib", "off"), slog.String("source", c.Source))
		return
	}
	log.Info("memory limit", slog.Int64("mib", c.Limit>>20), slog.String("source", c.Source))
}

// Apply sets own once, for a binary whose own choice does not change, and
// logs the limit in force (NewSetter, Set and Log).
func Apply(log *slog.Logger, getenv func(string) string, own Choice) Choice {
	c := NewSetter(log, getenv).Set(own)
	Log(log, c)
	return c
}
