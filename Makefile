# nvmeof-tgt. `make demo` runs the target in the test guest against the Linux
# initiator; `make test` runs every test, unit and end-to-end. Both install
# what they need on a fresh Debian 12 machine (as root).
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
BIN := bin/nvmeof-tgt
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)

# Debian packages: cgo headers for libibverbs/librdmacm, and the lab's tools.
BUILD_PKGS := gcc libibverbs-dev librdmacm-dev
LAB_PKGS := qemu-system-x86 busybox-static cpio kmod xz-utils e2fsprogs rdma-core ibverbs-utils rdmacm-utils perftest nvme-cli fio iproute2 curl

.PHONY: all build deps unit e2e test demo bench fuzz vet clean

all: build

deps:
	@missing=$$(for p in $(BUILD_PKGS) $(LAB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null; \
	fi
	@command -v $(GO) >/dev/null || { echo "Go is required (https://go.dev/dl, or the Go module proxy's toolchain)"; exit 1; }

build: deps
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/nvmeof-tgt

vet: deps
	$(GO) vet ./...
	$(GO) vet -tags e2e ./tests/...
	$(GO) vet -tags e2e,bench ./tests/...
	$(GO) vet -tags faultinject ./rdma/... ./cmd/...

unit: deps
	$(GO) test -race -count=1 ./...

# Every fuzz target in the tree, 15 s each. `go test -list` finds them, so a
# new one is fuzzed without editing this list: its output is the matching
# names, then an "ok <package>" line.
fuzz: deps
	@set -eo pipefail; \
	targets=$$($(GO) test -list '^Fuzz' ./... | awk '/^Fuzz/ { f[n++] = $$1 } /^ok/ { for (i = 0; i < n; i++) print $$2 ":" f[i]; n = 0 }'); \
	[ -n "$$targets" ] || { echo "fuzz: no fuzz targets found" >&2; exit 1; }; \
	for t in $$targets; do \
		pkg=$${t%%:*}; f=$${t##*:}; \
		echo "fuzz: $$pkg $$f"; \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime 15s $$pkg; \
	done

e2e: build
	tests/lab/e2e.sh

test: vet unit e2e

demo: build
	tests/lab/demo.sh

# Side-by-side with the kernel's nvmet in one guest boot; writes bench/results/<date>.*
bench: build
	tests/lab/bench.sh

clean:
	rm -rf bin tests/out
