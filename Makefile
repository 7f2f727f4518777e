# Palisade: the two commands are `make run` and `make test`.
GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: all build run test test-short bench bench-proxy bench-issuer-memory fuzz vet fmt clean

all: build

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/issuer ./cmd/issuer
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/verifier ./cmd/verifier

## run: start the issuer on its embedded default (SQLite in ./data, generated dev keys)
run: build
	./$(BIN)/issuer serve

## test: vet, then every test with the race detector, on SQLite and (when reachable) PostgreSQL
test: vet
	@$(GO) run ./internal/testdb/pgprobe
	$(GO) test -race -count=1 -timeout 15m ./...

## bench: Go benchmarks (ops/s reported per benchmark); PostgreSQL ones need the server
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s -timeout 30m ./...
	@echo "make bench: the verifier binary against a bare reverse proxy under wrk is measured apart: make bench-proxy"

## bench-proxy: the verifier binary's proxy mode against a bare Go reverse proxy under wrk
## (alternating rounds; req/s medians, ratio, CPU us/request, peak RSS). Needs wrk: installed
## with apt-get when run as root, otherwise the target says SKIPPED and fails.
bench-proxy:
	./scripts/bench-proxy.sh

## bench-issuer-memory: the issuer binary under a 500-client login flood, with its derived
## soft memory limit and with GOMEMLIMIT=off, in alternating rounds (logins/s, CPU per login,
## peak RSS, time for the RSS to fall under 48 MiB after the flood)
bench-issuer-memory:
	./scripts/bench-issuer-memory.sh

## fuzz: run each fuzz target for FUZZTIME (default 30s)
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## vet: gofmt, go vet and staticcheck (installed at STATICCHECK_VERSION when missing)
STATICCHECK_VERSION ?= v0.8.2
vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	@sc="$$(command -v staticcheck || echo "$$($(GO) env GOPATH)/bin/staticcheck")"; \
	if [ ! -x "$$sc" ]; then \
	  echo "installing staticcheck $(STATICCHECK_VERSION)"; \
	  $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) || exit 1; \
	fi; \
	echo "$$sc ./..."; "$$sc" ./...

fmt:
	gofmt -w .

clean:
	rm -rf $(BIN)
