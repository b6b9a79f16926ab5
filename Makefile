# vigil build. `make demo` and `make test` are the two commands a new user runs.
GO        ?= go
BIN       := bin
STATICCHECK_VERSION := v0.8.2

# Every main package (the vigil binary, the plugins, the examples) lands in bin/.
MAIN_PKGS = $(shell $(GO) list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./...)

.PHONY: all build deps test test-short lint bench bench-edge bench-ratios demo proto proto-check fuzz clean dist

all: build

# The commit goes into `vigil version` (GOFLAGS may hold -buildvcs=false,
# and a tarball has no .git: then it says "unknown").
COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null)
# The version: the release tag (v1.2.3 gives 1.2.3), or "dev" before one.
VERSION := $(or $(patsubst v%,%,$(shell git describe --tags --match 'v[0-9]*' 2>/dev/null)),dev)

build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o $(BIN)/ $(MAIN_PKGS)

# Release artifacts in dist/: static, -trimpath, version-stamped binaries
# for each OS/arch as tarballs with SHA256SUMS, the Debian packages (vigil,
# vigil-node) and the container image's build context. deploy/dist is the
# builder, a module of its own (nfpm stays out of go.mod). DIST_PLATFORMS
# narrows the matrix, such as DIST_PLATFORMS=linux/amd64.
DIST_PLATFORMS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64
dist:
	$(GO) run -C deploy/dist . -root $(CURDIR) -out $(CURDIR)/dist -platforms $(DIST_PLATFORMS)

# What the tests need from Debian, as check:package: protoc for proto-check,
# chromium for the status page's browser test, etcd for the HA tests, and
# Debian's Python 3 with grpcio and cryptography for the Python example
# plugin (examples/python-votesource), promtool to check the /metrics
# pages, Alertmanager (with amtool) for the alerting end-to-end test, and
# HAProxy, nginx, Varnish, Caddy and Traffic Server for the edge tests
# (plugins/node/edge), zonemaster-cli for the DNS publisher's Zonemaster check; systemd-analyze,
# dpkg-deb and buildah for the release test (deploy/), which unpacks the
# packages, verifies their units and builds the image from scratch.
# A check is a command looked up in PATH, or python3.MODULE: Debian's
# /usr/bin/python3 imports MODULE.
# Installed with apt-get (as root) only when missing.
DEB_DEPS := protoc:protobuf-compiler chromium:chromium etcd:etcd-server \
	python3.grpc:python3-grpcio python3.cryptography:python3-cryptography \
	promtool:prometheus amtool:prometheus-alertmanager haproxy:haproxy nginx:nginx varnishd:varnish caddy:caddy traffic_manager:trafficserver \
	zonemaster-cli:zonemaster-cli knotd:knot nsd:nsd named:bind9 \
	systemd-analyze:systemd dpkg-deb:dpkg buildah:buildah

deps:
	@missing=""; for d in $(DEB_DEPS); do check=$${d%%:*}; \
		case $$check in \
		python3.*) /usr/bin/python3 -c "import $${check#python3.}" >/dev/null 2>&1 ;; \
		*) command -v $$check >/dev/null ;; \
		esac || missing="$$missing $${d#*:}"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" != 0 ]; then echo "the tests need:$$missing; run 'make deps' as root, or: sudo apt-get install -y$$missing"; exit 1; fi; \
		echo "installing:$$missing"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y$$missing; \
	fi

# The SDK is its own module (sdk/go.mod): `go test ./...` at the root does
# not descend into it, so each target runs it too.
# Both modules always run, so that a failure in one does not hide the
# other's result; the last line says which failed.
# -timeout: cmd/vigil's end-to-end tests run for about 8 minutes on a
# loaded 2-core machine, near go test's default of 10 per package; a hang
# is caught by each test's own guard long before 30.
test: deps proto-check build
	@root=ok; sdk=ok; \
	$(GO) vet ./... && $(GO) test -race -count=1 -timeout 30m ./... || root=FAILED; \
	( cd sdk && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 30m ./... ) || sdk=FAILED; \
	echo "make test: root module $$root, sdk module $$sdk"; \
	[ $$root = ok ] && [ $$sdk = ok ]

test-short:
	$(GO) test -short ./...
	cd sdk && $(GO) test -short ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@# No unsafe and no raw syscalls in our code (generated code aside:
	@# protoc-gen-go's output imports unsafe for its descriptors).
	@out=$$(git ls-files '*.go' | xargs grep -l -E '"unsafe"|RawSyscall|(syscall|unix)\.Syscall' | xargs -r grep -L '^// Code generated .* DO NOT EDIT\.$$'); \
	if [ -n "$$out" ]; then echo "unsafe or a raw syscall; the standard library's wrappers only:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd sdk && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd deploy/dist && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
	@$(MAKE) --no-print-directory bench-ratios

# vigil-node's proxy against HAProxy and nginx, same origin, same load, one
# run: ratios of throughput and p99 latency (skips without haproxy, nginx).
bench-edge:
	$(GO) test -run '^$$' -bench EdgeCompare -benchtime 20000x ./plugins/node/edge
	$(GO) test -run '^$$' -bench EdgeLean -benchtime 150000x ./plugins/node/edge

# The data plane against its peers, as ratios measured in one run (issue
# 19): vigil-node against HAProxy and nginx under a lean load (EdgeLean) and
# under wrk (EdgeWrk, when
# wrk is installed: apt-get install wrk; a second time with each proxy
# pinned to a core of its own, away from the load, where taskset exists), the
# DNS server against NSD and Knot (DNSCompare). Absent peers are skipped.
bench-ratios:
	$(GO) test -run '^$$' -bench 'EdgeLean|EdgeWrk' -benchtime 150000x ./plugins/node/edge
	@if command -v taskset >/dev/null && [ "$$(nproc)" -ge 2 ]; then \
		echo "EdgeLean and EdgeWrk again, each proxy on CPU 1 and the load and origin on CPU 0:"; \
		VIGIL_BENCH_PROXY_CPUS=1 taskset -c 0 $(GO) test -run '^$$' -bench 'EdgeLean|EdgeWrk' -benchtime 150000x ./plugins/node/edge; fi
	$(GO) test -run '^$$' -bench DNSCompare -benchtime 200000x ./core/publish/dns

# Short fuzz passes over every fuzz target of both modules, found by
# their names (longer: FUZZTIME=5m make fuzz). `make test` runs each
# target's seed corpus already, as a plain test.
FUZZTIME ?= 20s
FUZZ_TARGETS = $(shell grep -rH --include='*_test.go' '^func Fuzz' . | sed -E 's|^\./(.*)/[^/]*:func (Fuzz[A-Za-z0-9_]*).*|\1:\2|' | sort -u)
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do dir=$${t%%:*}; fn=$${t#*:}; \
		case $$dir in \
		sdk) mod=sdk; pkg=. ;; \
		sdk/*) mod=sdk; pkg=./$${dir#sdk/} ;; \
		*) mod=.; pkg=./$$dir ;; \
		esac; \
		echo "fuzz $$pkg $$fn"; \
		( cd $$mod && $(GO) test $$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) ); \
	done

# Protobuf: the vote-source protocol's generated code is committed. `make proto`
# regenerates it with pinned generators (installed into $(BIN)/.tools) and the
# Debian protoc; `make proto-check` (part of `make test`) fails when it is stale.
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.0
TOOLS_DIR   := $(CURDIR)/$(BIN)/.tools
GEN_GO      := $(TOOLS_DIR)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION)/protoc-gen-go
GEN_GO_GRPC := $(TOOLS_DIR)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION)/protoc-gen-go-grpc
# Every root holds its own .proto tree: the SDK's vote-source protocol and the
# node gateway protocol (plugins/node) are generated and checked the same way.
PROTO_ROOTS := sdk/proto plugins/node/internal/proto

$(GEN_GO):
	GOBIN=$(dir $@) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(GEN_GO_GRPC):
	GOBIN=$(dir $@) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

# $(call protogen,ROOT,OUTDIR): OUTDIR is relative to ROOT (or absolute).
protogen = cd $(1) && protoc -I . \
	--plugin=protoc-gen-go=$(GEN_GO) --plugin=protoc-gen-go-grpc=$(GEN_GO_GRPC) \
	--go_out=$(2) --go_opt=paths=source_relative \
	--go-grpc_out=$(2) --go-grpc_opt=paths=source_relative \
	$$(find . -name '*.proto' | sort)

# The Python example plugin's message classes, from the published .proto.
PY_PROTO_DIR := sdk/proto/votesource/v1
PY_PROTO_OUT := examples/python-votesource

proto: $(GEN_GO) $(GEN_GO_GRPC)
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler"; exit 1; }
	@set -e; for root in $(PROTO_ROOTS); do ( $(call protogen,$$root,.) ); done
	protoc -I $(PY_PROTO_DIR) --python_out=$(PY_PROTO_OUT) $(PY_PROTO_DIR)/votesource.proto

proto-check: $(GEN_GO) $(GEN_GO_GRPC)
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler"; exit 1; }
	@set -e; for root in $(PROTO_ROOTS); do \
		tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
		( $(call protogen,$$root,$$tmp) ) && \
		if ! diff -ru -x '*.proto' "$$tmp" $$root; then \
			echo "generated protobuf code under $$root is stale: run 'make proto' and commit the result"; exit 1; \
		fi; rm -rf "$$tmp"; \
	done
	@set -e; tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
		protoc -I $(PY_PROTO_DIR) --python_out=$$tmp $(PY_PROTO_DIR)/votesource.proto && \
		if ! diff -u $$tmp/votesource_pb2.py $(PY_PROTO_OUT)/votesource_pb2.py; then \
			echo "$(PY_PROTO_OUT)/votesource_pb2.py is stale: run 'make proto' and commit the result"; exit 1; \
		fi

demo: build
	./examples/demo.sh

clean:
	rm -rf $(BIN) dist
