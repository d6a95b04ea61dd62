# Pollux. `make` lists the targets.

GO       ?= go
BIN      ?= bin
FUZZTIME ?= 20s
# The race detector on 2 cores: keep the whole suite well under 10 minutes.
TESTFLAGS ?= -race -count=1 -timeout 10m
# The nats CLI the shell example (examples/cli) runs.
NATSCLI  ?= v0.5.0
# The linter make lint runs (installed into bin/ from the Go module proxy).
GOLANGCI ?= v2.15.0

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## Run all of Pollux on an embedded NATS server with a simulated provider and a demo workload
	$(GO) run ./cmd/pollux dev

.PHONY: serve
serve: ## Run Pollux on an embedded NATS server for your own clients, until Ctrl-C
	$(GO) run ./cmd/pollux serve

.PHONY: test
test: tools ## Run every test with the race detector, the client examples included
	$(GO) test $(TESTFLAGS) ./...

.PHONY: tools
tools: ## Install what the client examples need: the nats CLI into bin/, npm packages into examples/node
	@$(BIN)/nats --version 2>/dev/null | grep -qx '$(NATSCLI)' || { \
		echo "installing the nats CLI $(NATSCLI) into $(BIN)/"; \
		GOBIN=$(CURDIR)/$(BIN) $(GO) install github.com/nats-io/natscli/nats@$(NATSCLI); }
	@test examples/node/node_modules/.package-lock.json -nt examples/node/package-lock.json || { \
		echo "installing examples/node's packages (npm ci)"; \
		cd examples/node && npm ci --no-audit --no-fund; }

.PHONY: bench
bench: ## Measure the fleet against JetStream's own limits (one table; BENCHFLAGS="--only cycles --json" etc.), then the schedule against the optimum
	$(GO) build -o $(BIN)/nats-server github.com/nats-io/nats-server/v2
	$(GO) build -o $(BIN)/ ./cmd/poller ./cmd/pollux
	$(BIN)/pollux bench --bin $(BIN) $(BENCHFLAGS)
	$(BIN)/pollux simulate --jobs 10000

.PHONY: chaos
chaos: ## The fault suites ten times bigger (POLLUX_CHAOS=long): tens of minutes
	POLLUX_CHAOS=long $(GO) test -race -count=1 -timeout 90m -run 'Chaos' -v ./internal/e2e

.PHONY: lint
lint: ## gofmt, go vet and golangci-lint (.golangci.yml: the linters and the import rules), installing the linter when missing
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	@$(BIN)/golangci-lint version 2>/dev/null | grep -q ' $(patsubst v%,%,$(GOLANGCI)) ' || { \
		echo "installing golangci-lint $(GOLANGCI) into $(BIN)/"; \
		GOBIN=$(CURDIR)/$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI); }
	$(BIN)/golangci-lint run ./...

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

.PHONY: build
build: ## Build the binaries into bin/
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: tidy
tidy: ## Tidy go.mod and go.sum
	$(GO) mod tidy
