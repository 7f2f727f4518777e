package config

import (
	"errors"
	"fmt"
)

// problems collects a part's validation failures, so that a command reports
// every problem at once.
type problems []error

func (p *problems) addf(format string, args ...any) { *p = append(*p, fmt.Errorf(format, args...)) }

func (p problems) err() error { return errors.Join(p...) }
