# nvmeof-tgt. `make demo` runs the target in the test guest against the Linux
# initiator; `make test` runs every test, unit and end-to-end (the one-guest
# suite, then the network suite in the multi-guest lab). Both install
# what they need on a fresh Debian 12 machine (as root).
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
BIN := bin/nvmeof-tgt
# The rbd build (build tag rbd): BIN plus the rbd backend, linked with librados and
# librbd. A second binary so that the default one needs no Ceph libraries to build or run
# (make demo, a target without Ceph); README.md, "RBD namespaces".
RBD_BIN := bin/nvmeof-tgt-rbd
# librbd's header (librbd-dev): where it is, make build builds RBD_BIN too. Tested by the
# recipes when they run, after ceph-deps may have installed it.
LIBRBD_H := /usr/include/rbd/librbd.h
# Without git (a source tarball) both are empty and the binary derives its
# version from Go's build information (cmd/nvmeof-tgt/version.go).
VERSION ?= $(shell git describe --always --dirty 2>/dev/null)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)

# make install: the binary under PREFIX, the unit (its ExecStart rewritten to
# BINDIR), the configuration in /etc/nvmeof-tgt (config.yaml, from
# deploy/config.yaml, only if absent: it starts on any machine with an RDMA
# device and says what to edit; mode 0600, which serve requires once it holds
# a secret; config.example.yaml, every key, always) and
# shell completions. DESTDIR stages it all.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
UNITDIR ?= $(PREFIX)/lib/systemd/system
DATADIR ?= $(PREFIX)/share
# The unit's ConfigurationDirectory= is /etc/nvmeof-tgt whatever the prefix.
CONFDIR := /etc/nvmeof-tgt

# Debian packages: cgo headers for libibverbs/librdmacm (build), and the
# test guest's tools (e2e, demo, bench).
BUILD_PKGS := gcc libibverbs-dev librdmacm-dev
LAB_PKGS := qemu-system-x86 busybox-static cpio kmod xz-utils e2fsprogs rdma-core ibverbs-utils rdmacm-utils perftest nvme-cli fio iproute2 curl
# The guest's one-node Ceph cluster (tests/lab/ceph-up.sh; Debian 12: pacific)
# and librados/librbd's headers for cgo clients of it. On top of LAB_PKGS:
# 85 packages, 55 MB to fetch, 220 MB installed, about a minute to install.
CEPH_PKGS := ceph-mon ceph-osd ceph-mgr ceph-common librados-dev librbd-dev

.PHONY: all build build-rbd deps build-deps lab-deps ceph-deps install unit e2e e2e-net e2e-all lab-selftest test demo bench sockab blktests ceph-smoke fuzz fuzz-long vet clean

all: build

# apt_install installs those of the packages $(1) that are missing.
define apt_install
	@missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null; \
	fi
endef

deps: build-deps lab-deps ceph-deps

build-deps:
	$(call apt_install,$(BUILD_PKGS))
	@command -v $(GO) >/dev/null || { echo "Go is required (https://go.dev/dl, or the Go module proxy's toolchain)"; exit 1; }

lab-deps:
	$(call apt_install,$(LAB_PKGS))

ceph-deps:
	$(call apt_install,$(CEPH_PKGS))

LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

# BIN always; RBD_BIN too where librbd-dev is installed (make build-rbd installs it).
build: build-deps
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/nvmeof-tgt
	@if [ -e $(LIBRBD_H) ]; then \
		echo '$(GO) build -tags rbd -ldflags "$(LDFLAGS)" -o $(RBD_BIN) ./cmd/nvmeof-tgt'; \
		$(GO) build -tags rbd -ldflags "$(LDFLAGS)" -o $(RBD_BIN) ./cmd/nvmeof-tgt; \
	else \
		echo "make build: librbd-dev is not installed: $(RBD_BIN) not built (make build-rbd installs it and builds it)"; \
	fi

build-rbd: build-deps ceph-deps
	$(GO) build -tags rbd -ldflags "$(LDFLAGS)" -o $(RBD_BIN) ./cmd/nvmeof-tgt

# Never installs bin/nvmeof-tgt-faultinject (tests/lab/e2e.sh builds it).
install: build
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(CONFDIR) \
		$(DESTDIR)$(DATADIR)/bash-completion/completions $(DESTDIR)$(DATADIR)/zsh/site-functions \
		$(DESTDIR)$(DATADIR)/fish/vendor_completions.d
	install -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/nvmeof-tgt
	if [ -x $(RBD_BIN) ]; then install -m 0755 $(RBD_BIN) $(DESTDIR)$(BINDIR)/nvmeof-tgt-rbd; fi
	sed 's|^ExecStart=/usr/local/bin/nvmeof-tgt |ExecStart=$(BINDIR)/nvmeof-tgt |' deploy/nvmeof-tgt.service >$(DESTDIR)$(UNITDIR)/nvmeof-tgt.service
	@grep -q '^ExecStart=$(BINDIR)/nvmeof-tgt ' $(DESTDIR)$(UNITDIR)/nvmeof-tgt.service || \
		{ echo "install: deploy/nvmeof-tgt.service has no ExecStart=/usr/local/bin/nvmeof-tgt line to rewrite"; exit 1; }
	chmod 0644 $(DESTDIR)$(UNITDIR)/nvmeof-tgt.service
	install -m 0644 deploy/config.example.yaml $(DESTDIR)$(CONFDIR)/config.example.yaml
	@if [ -e $(DESTDIR)$(CONFDIR)/config.yaml ]; then \
		echo "install: keeping $(DESTDIR)$(CONFDIR)/config.yaml"; \
	else \
		install -m 0600 deploy/config.yaml $(DESTDIR)$(CONFDIR)/config.yaml; \
	fi
	$(BIN) completion bash >$(DESTDIR)$(DATADIR)/bash-completion/completions/nvmeof-tgt
	$(BIN) completion zsh >$(DESTDIR)$(DATADIR)/zsh/site-functions/_nvmeof-tgt
	$(BIN) completion fish >$(DESTDIR)$(DATADIR)/fish/vendor_completions.d/nvmeof-tgt.fish

# config is a leaf: the file format, with none of the parts it configures.
LEAF_FORBIDDEN := nvmeof-tgt/(fabric|rdma|blockdev|control|cmd)
vet: build-deps
	$(GO) vet ./...
	@if $(GO) list -deps ./config | grep -E '$(LEAF_FORBIDDEN)'; then echo "config must not import the packages above"; exit 1; fi
	CGO_ENABLED=0 $(GO) build ./config
	@bad=$$($(GO) list -f '{{if not .Standard}}{{range .Imports}}{{if eq . "unsafe"}}{{$$.ImportPath}}{{end}}{{end}}{{end}}' ./... | grep -v '/internal/' || true); \
	if [ -n "$$bad" ]; then echo "unsafe outside an internal package: $$bad"; exit 1; fi
	# Every tests/ file in one pass: no build constraint there excludes a tag.
	$(GO) vet -tags e2e,netlab,bench,spdk ./tests/...
	$(GO) vet -tags faultinject ./rdma/... ./cmd/...
	@if [ -e $(LIBRBD_H) ]; then \
		echo "$(GO) vet -tags rbd ./..."; $(GO) vet -tags rbd ./... || exit 1; \
		bad=$$($(GO) list -tags rbd -f '{{if not .Standard}}{{range .Imports}}{{if eq . "unsafe"}}{{$$.ImportPath}}{{end}}{{end}}{{end}}' ./... | grep -v '/internal/' || true); \
		if [ -n "$$bad" ]; then echo "unsafe outside an internal package (rbd build): $$bad"; exit 1; fi; \
	else echo "make vet: librbd-dev is not installed: the rbd build is not vetted"; fi

# With librbd-dev, the rbd build's tests too; those that need a cluster skip here and run in
# the guest against its cluster (TestRBDUnit, make e2e). fabric's and control's own files
# differ under the tag only by tests, so only those run again (RBD_TESTS); blockdev's rbd Ring,
# which fabric uses, is covered by blockdev's tests in the rbd pass.
RBD_TEST_FILES = $(shell grep -l '^//go:build.*rbd' fabric/*_test.go control/*_test.go)
RBD_TESTS = $(shell sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p' $(RBD_TEST_FILES) /dev/null | paste -sd'|')
unit: build-deps
	$(GO) test -race -count=1 ./...
	@if [ -e $(LIBRBD_H) ]; then \
		echo "$(GO) test -race -count=1 -tags rbd ./blockdev/... ./control/group/rados/... ./cmd/..."; \
		$(GO) test -race -count=1 -tags rbd ./blockdev/... ./control/group/rados/... ./cmd/... || exit 1; \
		echo "$(GO) test -race -count=1 -tags rbd -run '^($(RBD_TESTS))$$' ./fabric ./control"; \
		$(GO) test -race -count=1 -tags rbd -run '^($(RBD_TESTS))$$' ./fabric ./control; \
	fi

# Every fuzz target in the tree (tests/fuzz/run.sh finds them), 200,000
# executions each. fuzz-long takes each to 10 million, nice'd, and writes
# what each did to tests/fuzz/results.txt (FUZZ_PARALLEL workers, default 1).
# FUZZ_ONLY='/tcp:|:FuzzTCP' (a regexp on package:Target) runs only those and
# appends their table to the file.
fuzz: build-deps
	tests/fuzz/run.sh 200000

fuzz-long: build-deps
	nice -n 19 tests/fuzz/run.sh 10000000 tests/fuzz/results.txt

# ceph-deps before build: with librbd-dev installed, build builds RBD_BIN too.
e2e: lab-deps ceph-deps build
	tests/lab/e2e.sh

# The network suite (the TestNet tests, build tag netlab) in the multi-guest network lab, a
# second boot: README.md, "The network lab".
e2e-net: lab-deps build
	tests/lab/e2e-net.sh

# Both lab suites at once (tests/lab/e2e-all.sh): the one-guest suite and the network lab's,
# each in its own guests; their logs in tests/out-all/.
e2e-all: lab-deps ceph-deps build
	tests/lab/e2e-all.sh

# The labs' own test: a guest that dies at boot is booted again, one that dies later is reported.
lab-selftest: lab-deps
	tests/lab/lab-selftest.sh

# The Ceph packages first: vet and unit then cover the rbd build as well.
test: ceph-deps vet unit lab-selftest e2e-all

demo: build lab-deps
	tests/lab/demo.sh

# Two machines (the default, BENCH_TOPOLOGY=two): nvmeof-tgt, the kernel's nvmet and SPDK's
# nvmf_tgt in turn in a target guest, the host in another, one rxe link; memory, file and RBD
# jobs with CPU per I/O, the memory and file jobs over RDMA and NVMe/TCP (BENCH_TRANSPORTS,
# default rdma,tcp); writes bench/results/<date>-2m.*. SPDK_SRC=TREE (an SPDK v24.05 source
# tree) builds SPDK into SPDK_DIR first (tests/bench/spdk-build.sh); SPDK_DIR=DIR alone uses a
# tree already built; with neither, SPDK is skipped and the run says so.
# BENCH_TOPOLOGY=one: the one-guest benchmark of bench/results/<date>.*, side by side with the
# kernel's nvmet; PEERS="kernel spdk" adds SPDK (memory jobs); BENCH_CPUS is its vCPUs, 2 or 4.
BENCH_TOPOLOGY ?= two
PEERS ?= kernel
SPDK_DIR ?=
SPDK_SRC ?=
BENCH_CPUS ?= 4
bench: lab-deps ceph-deps build
	BENCH_TOPOLOGY="$(BENCH_TOPOLOGY)" BENCH_PEERS="$(PEERS)" BENCH_SPDK_DIR="$(SPDK_DIR)" SPDK_SRC="$(SPDK_SRC)" \
		BENCH_CPUS="$(BENCH_CPUS)" tests/lab/bench.sh

# The NVMe/TCP socket layer's A/B (issue 30, tcp/internal/sockab): Go's netpoller as tcp/ uses
# it against io_uring, over 127.0.0.1 on this machine, no guest. 6 rounds of every case, the
# variant that starts a round rotating; writes bench/results/<date>-tcp-sockets-{raw.txt,table.md}.
# About 8 minutes of 2 CPUs. ROUNDS, BENCHTIME (2s) and BENCH (a case pattern) are optional.
sockab: build-deps
	tcp/internal/sockab/ab.sh

# blktests' NVMe-oF tests in the test guest, against nvmeof-tgt as a remote target
# (tests/lab/blktests.sh; README.md, "blktests"). BLKTESTS_DIR is a blktests checkout: it is not
# packaged for Debian 12, so `make test` and CI do not run this. Results in tests/out/blktests/.
# BLKTESTS_TESTS (default: the list in tests/lab/blktests.sh), BLKTESTS_IMG_SIZE (64M),
# BLKTESTS_BLOCK_SIZE (512) and BLKTESTS_TRTYPE (rdma, or tcp) are optional.
BLKTESTS_DIR ?=
BLKTESTS_TESTS ?=
BLKTESTS_IMG_SIZE ?=
BLKTESTS_BLOCK_SIZE ?=
BLKTESTS_TRTYPE ?=
blktests: build lab-deps
	BLKTESTS_DIR="$(BLKTESTS_DIR)" BLKTESTS_TESTS="$(BLKTESTS_TESTS)" BLKTESTS_IMG_SIZE="$(BLKTESTS_IMG_SIZE)" \
		BLKTESTS_BLOCK_SIZE="$(BLKTESTS_BLOCK_SIZE)" BLKTESTS_TRTYPE="$(BLKTESTS_TRTYPE)" tests/lab/blktests.sh

# The test cluster alone in the guest: ceph-up.sh, rbd create/bench/resize/rm,
# osd blocklist, ceph-down.sh (tests/lab/ceph-smoke.sh).
ceph-smoke: lab-deps ceph-deps
	tests/lab/labvm --share $(CURDIR) --mem 3072 --timeout 900 tests/lab/ceph-smoke.sh $(CURDIR)

clean:
	rm -rf bin tests/out
