# seckill — run `make help` for the targets.
SHELL := /bin/bash
BIN   := bin/seckill
BENCH := bin/seckill-bench
STATIC := bin/seckill-static
GO    ?= go

# Build, run and test with the toolchain go.mod names (its `toolchain` line
# carries the standard library's security fixes). A machine whose go env says
# GOTOOLCHAIN=local ignores that line and builds with whatever Go it has, so
# the Makefile names the toolchain itself; the go command fetches it from the
# module proxy once. `make GOTOOLCHAIN=...` still overrides it.
TOOLCHAIN := $(shell sed -n 's/^toolchain //p' go.mod)
export GOTOOLCHAIN := $(if $(TOOLCHAIN),$(TOOLCHAIN),auto)

# What `seckill version` prints besides the Go version.
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  := $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/seckill
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/seckill

.PHONY: build-pprof
build-pprof: ## build bin/seckill-pprof: the service with net/http/pprof on $$PPROF_ADDR (default 127.0.0.1:6060), for profiling under load only
	$(GO) build -tags pprof -ldflags '$(LDFLAGS)' -o bin/seckill-pprof ./cmd/seckill

.PHONY: build-static
build-static: ## build bin/seckill-static: static (CGO_ENABLED=0), -trimpath, time zones embedded; what the image runs
	CGO_ENABLED=0 GOTOOLCHAIN=auto $(GO) build -trimpath -tags timetzdata -ldflags='-s -w' -o $(STATIC) ./cmd/seckill

# buildah's storage: vfs needs no overlay support from the kernel or
# fuse-overlayfs, so it works as root in any CI container.
BUILDAH ?= buildah --storage-driver vfs
IMAGE   ?= localhost/seckill:dev

.PHONY: image
image: build-static ## build the container image localhost/seckill:dev (IMAGE=...) from Containerfile with buildah (no Docker engine needed)
	mkdir -p bin/image-data
	$(BUILDAH) bud --isolation chroot --layers=false -f Containerfile -t $(IMAGE) .

.PHONY: build-bench
build-bench: build ## build bin/seckill-bench (the design comparison; it runs bin/seckill for the crash scenario)
	$(GO) build -o $(BENCH) ./cmd/seckill-bench

.PHONY: run
run: build ## run the service (embedded Redis + SQLite unless SECKILL_REDIS_URL / SECKILL_MYSQL_DSN are set); user 1 is admin
	SECKILL_DEV_ENDPOINTS=$${SECKILL_DEV_ENDPOINTS:-true} SECKILL_ADMIN_USERS=$${SECKILL_ADMIN_USERS:-1} \
		SECKILL_LOG_FORMAT=$${SECKILL_LOG_FORMAT:-console} ./$(BIN) serve

.PHONY: test
test: ## run every test with the race detector (real Redis/MySQL when SECKILL_TEST_REDIS_URL / SECKILL_TEST_MYSQL_DSN are set), then test-year-on and the leftovers check; the last line says which backends ran
	keys=$$(mktemp); ./.ci/leftovers.sh snapshot $$keys; \
	status=0; $(GO) test -race -count=1 -timeout 20m ./... || status=$$?; \
	$(MAKE) --no-print-directory test-year-on || status=$$?; \
	./.ci/leftovers.sh check $$keys || status=$$?; rm -f $$keys; \
	./.ci/test-backends.sh; exit $$status

# The suites whose times reach Redis or the database, run as they will run a
# year from now: the tests' present (testenv.Now) and miniredis's clock both a
# year ahead. A test that fixed a date passes today and fails here. Real
# servers run on the machine's clock, so they sit this run out.
.PHONY: test-year-on
test-year-on: ## run the contract and adapter suites with the clock a year on (a test bound to a calendar day fails)
	env -u SECKILL_TEST_REDIS_URL -u SECKILL_TEST_REDIS_CLUSTER_ADDRS -u SECKILL_TEST_MYSQL_DSN CI= \
		SECKILL_TEST_CLOCK_OFFSET=8760h $(GO) test -count=1 -timeout 10m ./test/contract/ ./adapters/...

# FUZZ lists package:target pairs; -fuzz takes one target per run.
FUZZ     ?= ./adapters/httpapi:FuzzVoucherBody ./adapters/httpapi:FuzzTokenBody \
            ./adapters/httpapi:FuzzPathID ./adapters/httpapi:FuzzAuthorizationHeader \
            ./adapters/redisschema:FuzzDecodeOrder
# A count of executions, not a duration: with a duration, Go 1.26's fuzz
# coordinator can fail a clean run with "context deadline exceeded" as the
# time runs out (go.dev/issue/75804, fixed in Go 1.27); a count has no
# deadline to race. 20000x is 1-5 s per target here.
FUZZTIME ?= 20000x

.PHONY: fuzz
fuzz: ## run each fuzz target FUZZTIME times (20000x); a panic or a 5xx fails, the input lands in testdata/fuzz
	@set -e; for pt in $(FUZZ); do \
		pkg=$${pt%%:*}; target=$${pt##*:}; \
		echo "fuzz $$target ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

.PHONY: redis-cluster
redis-cluster: ## start a local 3-master Redis Cluster on 127.0.0.1:7001-7003 (idempotent); then export SECKILL_TEST_REDIS_CLUSTER_ADDRS=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
	./.ci/redis-cluster.sh

.PHONY: bench
bench: ## run the Go micro-benchmarks into bench-out/bench.txt (compare runs with benchstat)
	@mkdir -p bench-out
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./... | tee bench-out/bench.txt

.PHONY: bench-designs
bench-designs: build-bench ## compare sync, channel, stream and the references (ceiling, bare, fullpipe, noop) on the configured Redis/MySQL, load from wrk if installed (docs/BENCHMARKS.md)
	./$(BENCH) --out bench-out --json bench-out/bench.json

.PHONY: bench-quick
bench-quick: build-bench ## the short form of bench-designs: wide and hot, channel and stream against the references, one round (numbers to glance at, not to publish)
	./$(BENCH) --scenario wide,hot --modes channel,stream,ceiling,bare,fullpipe,noop --rounds 1

# The judged run of docs/BENCHMARKS.md: both queues against the ceiling and
# the fixed references, three rounds, sessions warm (read back before the
# sale) then cold (no warm-up: every first claim looks its session up).
JUDGED := --scenario wide,wide-jwt,hot --modes channel,stream,ceiling,bare,fullpipe,noop --rounds 3 --progress plain

.PHONY: bench-judged
bench-judged: build-bench ## the judged run of docs/BENCHMARKS.md (about 4 minutes): warm and cold sessions into bench-out/judged-{warm,cold}.md and .json
	@mkdir -p bench-out
	./$(BENCH) $(JUDGED) --json bench-out/judged-warm.json > bench-out/judged-warm.md
	./$(BENCH) $(JUDGED) --cold-sessions --warm=false --json bench-out/judged-cold.json > bench-out/judged-cold.md
	@echo "== warm sessions"; cat bench-out/judged-warm.md; echo "== cold sessions"; cat bench-out/judged-cold.md

.PHONY: sale-screenshot
sale-screenshot: ## remake docs/live-sale.png: the live sale page in headless Chromium at 390x844 (needs chromium)
	SECKILL_SALE_SCREENSHOT=$(CURDIR)/docs/live-sale.png $(GO) test -count=1 -run TestLiveSalePage ./test/browser

.PHONY: generate
generate: ## regenerate the Wire injectors (infra/wire_gen.go)
	$(GO) tool wire gen ./infra

.PHONY: lint
lint: ## gofmt, go vet, and a stale wire_gen.go check
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool wire diff ./infra

.PHONY: vulncheck
vulncheck: ## govulncheck against a pinned local copy of the Go vulnerability database (fails on a called vulnerable function)
	./.ci/govulncheck.sh

.PHONY: migrate-up migrate-down migrate-status
migrate-up: build ## apply pending migrations to the configured database
	./$(BIN) migrate up
migrate-down: build ## roll back the newest migration (refused if it would drop rows; FORCE=1 drops them)
	./$(BIN) migrate down $(if $(FORCE),--force)
migrate-status: build ## show which migrations are applied
	./$(BIN) migrate status
