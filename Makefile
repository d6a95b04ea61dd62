# Pollux. `make` lists the targets.

GO       ?= go
BIN      ?= bin
FUZZTIME ?= 20s
# The race detector on 2 cores: keep the whole suite well under 10 minutes.
TESTFLAGS ?= -race -count=1 -p 4 -parallel 4 -timeout 10m
# The nats CLI the shell example (examples/cli) runs.
NATSCLI  ?= v0.5.0
# The linter make lint runs (installed into bin/ from the Go module proxy).
GOLANGCI ?= v2.15.0
# The helm the chart test renders deploy/helm/pollux with (make tools).
HELM     ?= v3.22.0
# What the binaries say they are (--version, pollux_build_info): git's
# description of the tree (v0.1.0 at a release tag, v0.1.0-3-gabc1234 after
# it, -dirty with uncommitted changes) and its commit; "dev" outside git.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS   = -X github.com/pollux-dev/pollux/internal/platform/version.version=$(VERSION) \
            -X github.com/pollux-dev/pollux/internal/platform/version.revision=$(REVISION)
# The image make image builds, tagged with VERSION: what deploy/k8s and
# deploy/helm run (set IMAGE to push to a registry of yours).
IMAGE    ?= ghcr.io/pollux-dev/pollux

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## Run all of Pollux on an embedded NATS server with a simulated provider and a demo workload
	$(GO) run ./cmd/pollux dev

.PHONY: serve
serve: ## Run Pollux on an embedded NATS server for your own clients, until Ctrl-C
	$(GO) run ./cmd/pollux serve

.PHONY: test
test: tools ## Run every test with the race detector, the client examples included
	$(GO) test $(TESTFLAGS) ./...

.PHONY: test-short
test-short: tools ## Run every test but the end-to-end suites (internal/testkit/e2e: real processes and clusters), with the race detector
	$(GO) test $(TESTFLAGS) $$($(GO) list ./... | grep -v '/internal/testkit/e2e')

.PHONY: tools
tools: ## Install what the tests run: Debian packages as root (scripts/system-packages), the nats CLI and helm into bin/, npm packages into examples/node, examples/sdks and api
	@scripts/system-packages
	@$(BIN)/nats --version 2>/dev/null | grep -qx '$(NATSCLI)' || { \
		echo "installing the nats CLI $(NATSCLI) into $(BIN)/"; \
		GOBIN=$(CURDIR)/$(BIN) $(GO) install github.com/nats-io/natscli/nats@$(NATSCLI); }
	@$(GO) version -m $(BIN)/helm 2>/dev/null | grep -q 'helm.sh/helm/v3[[:space:]]*$(HELM)[[:space:]]' || { \
		echo "installing helm $(HELM) into $(BIN)/ (a few minutes, once)"; \
		GOBIN=$(CURDIR)/$(BIN) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM); }
	@test examples/node/node_modules/.package-lock.json -nt examples/node/package-lock.json || { \
		echo "installing examples/node's packages (npm ci)"; \
		cd examples/node && npm ci --no-audit --no-fund; }
	@test api/node_modules/.package-lock.json -nt api/package-lock.json || { \
		echo "installing the contract validators into api/node_modules (npm ci)"; \
		cd api && npm ci --no-audit --no-fund; }
	@test examples/sdks/node_modules/.package-lock.json -nt examples/sdks/package-lock.json || { \
		echo "installing the provider SDKs the faces are tested with into examples/sdks (npm ci)"; \
		cd examples/sdks && npm ci --no-audit --no-fund; }

.PHONY: bench
bench: ## Measure the fleet against JetStream's own limits (one table; BENCHFLAGS="--only cycles --json" etc.), then the schedule against the optimum
	$(GO) build -o $(BIN)/nats-server github.com/nats-io/nats-server/v2
	$(GO) build -o $(BIN)/ ./cmd/poller ./cmd/pollux
	$(BIN)/pollux bench --bin $(BIN) $(BENCHFLAGS)
	$(BIN)/pollux simulate --jobs 10000

.PHONY: chaos
chaos: ## The fault suites ten times bigger (POLLUX_CHAOS=long): tens of minutes
	POLLUX_CHAOS=long $(GO) test -race -count=1 -timeout 90m -run 'Chaos' -v ./internal/testkit/e2e/...

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
build: ## Build the binaries into bin/, stamped with VERSION and REVISION (--version)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

.PHONY: image
image: ## Build the image ghcr.io/pollux-dev/pollux:<VERSION> with Docker (IMAGE=..., VERSION=...)
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE):$(VERSION) .

.PHONY: tidy
tidy: ## Tidy go.mod and go.sum
	$(GO) mod tidy
