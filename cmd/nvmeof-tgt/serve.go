package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma"
)

// fileWorkers is how many goroutines run blocking I/O per file or block
// device namespace: enough to keep a queue depth of 32 busy on each of a
// few queues.
const fileWorkers = 32

func serveCmd() *cobra.Command {
	var cfgFile string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the target (the embedded default configuration without --config)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var cfg *config.Config
			var err error
			if cfgFile != "" {
				cfg, err = config.LoadFile(cfgFile)
			} else {
				cfg, err = config.LoadDefault()
			}
			if err != nil {
				return err
			}
			return serve(cmd.Context(), cfg)
		},
	}
	c.Flags().StringVarP(&cfgFile, "config", "c", "", "configuration file (YAML); NVMEOF_TGT_* variables override it")
	return c
}

func newLogger(c config.Log) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.Level)); err != nil {
		lvl = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

func serve(ctx context.Context, cfg *config.Config) error {
	log := newLogger(cfg.Log)
	slog.SetDefault(log)
	raiseMemlock(log)

	srv, err := build(cfg, log)
	if err != nil {
		return err
	}
	srv.run(ctx, cfg)
	return srv.shutdown()
}

// server is a built target and what serves it. Fields are nil until built.
type server struct {
	log     *slog.Logger
	tgt     *fabric.Target
	rt      *rdma.Transport // only with an rdma port
	metrics *http.Server    // only with metrics.listen set
}

// build creates the target, its namespaces, ports and the metrics
// endpoint. On failure it releases whatever it made.
func build(cfg *config.Config, log *slog.Logger) (_ *server, err error) {
	s := &server{log: log}
	defer func() {
		if err != nil {
			// The failure is what the operator needs; close errors would
			// only obscure it.
			s.close()
		}
	}()
	rcfg := rdmaConfig(cfg.RDMA, log)
	s.tgt = fabric.NewTarget(fabric.Options{
		KATOMax:          cfg.Controller.KeepAliveTimeoutMax,
		FirmwareRevision: firmwareRevision(),
		Logger:           log,
	})
	if err := addSubsystems(s.tgt, cfg, log); err != nil {
		return nil, err
	}
	if err := s.addPorts(cfg.Ports, rcfg); err != nil {
		return nil, err
	}
	if cfg.Metrics.Listen != "" {
		if err := s.startMetrics(cfg.Metrics); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// addPorts listens on every port; the rdma transport is created with the
// first rdma port and serves them all.
func (s *server) addPorts(ports []config.Port, rcfg rdma.Config) error {
	loop := fabric.NewLoopTransport(loopLimits(rcfg))
	for i, p := range ports {
		var tr fabric.Transport
		switch p.Transport {
		case "rdma":
			if s.rt == nil {
				rt, err := rdma.New(rcfg)
				if err != nil {
					return err
				}
				s.rt = rt
			}
			tr = s.rt
		case "loop":
			tr = loop
		default:
			return fmt.Errorf("ports[%d].transport: unknown transport %q", i, p.Transport)
		}
		fp := &fabric.Port{Address: p.Address, Service: strconv.Itoa(p.Port)}
		if err := s.tgt.AddPort(tr, fp); err != nil {
			if errors.Is(err, rdma.ErrNoDevice) {
				return fmt.Errorf("ports[%d]: %w: no RDMA device serves %s (set one up, e.g. Soft-RoCE with `nvmeof-tgt softroce add`)", i, err, p.Address)
			}
			if errors.Is(err, rdma.ErrNotSupported) {
				return fmt.Errorf("ports[%d]: %w (this binary was built without cgo)", i, err)
			}
			return fmt.Errorf("ports[%d]: %w", i, err)
		}
	}
	return nil
}

// startMetrics serves Prometheus metrics, and pprof if asked, on m.Listen.
func (s *server) startMetrics(m config.Metrics) error {
	reg := newRegistry(s.tgt, s.rt, sysInfiniband)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if m.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	ln, err := net.Listen("tcp", m.Listen)
	if err != nil {
		return fmt.Errorf("metrics.listen: %w", err)
	}
	s.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go s.metrics.Serve(ln)
	s.log.Info("metrics listening", "address", ln.Addr().String())
	return nil
}

// run tells systemd the target is ready and waits for SIGTERM, SIGINT or
// the end of ctx.
func (s *server) run(ctx context.Context, cfg *config.Config) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	if _, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
		s.log.Warn("sd_notify", "err", err)
	}
	s.log.Info("target ready", "subsystems", len(cfg.Subsystems), "ports", len(cfg.Ports))

	select {
	case got := <-sig:
		s.log.Info("shutting down", "signal", got.String())
	case <-ctxDone(ctx):
	}
}

// shutdown tells systemd the target is stopping and closes it; an error
// makes the command fail.
func (s *server) shutdown() error {
	daemon.SdNotify(false, daemon.SdNotifyStopping)
	if err := s.close(); err != nil {
		s.log.Error("shutdown", "err", err)
		return err
	}
	s.log.Info("stopped")
	return nil
}

// close releases what build made: the target first, whose listeners
// disconnect every host, then the RDMA transport under them, then the
// metrics endpoint (its shutdown errors are not the target's).
func (s *server) close() error {
	var errs []error
	if s.tgt != nil {
		if err := s.tgt.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.rt != nil {
		if err := s.rt.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.metrics != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s.metrics.Shutdown(sctx)
		cancel()
	}
	return errors.Join(errs...)
}

// rdmaConfig is the RDMA transport's configuration. The transport hands
// fabric the controller limits (MDTS, queue sizes) of its ports itself.
func rdmaConfig(c config.RDMA, log *slog.Logger) rdma.Config {
	return rdma.Config{
		InCapsuleDataSize:  uint32(c.InCapsuleDataSize),
		MaxQueueDepth:      c.MaxQueueDepth,
		MaxIOQueueID:       c.MaxIOQueues,
		MaxQueues:          c.MaxQueues,
		MDTS:               uint32(c.MDTS),
		IOUnitSize:         uint32(c.IOUnitSize),
		BufferPoolSize:     uint64(c.BufferPoolSize),
		Pollers:            c.Pollers,
		PollIdle:           c.PollIdle,
		PollNap:            c.PollNap,
		SendWithInvalidate: c.SendWithInvalidate,
		IOUring:            c.IOUring,
		Logger:             log,
	}
}

// loopLimits gives loop ports (for tests) the limits of the rdma ones, as
// the rdma section has always applied to every port, but no in-capsule
// data: a loop capsule carries none.
func loopLimits(rc rdma.Config) fabric.TransportLimits {
	l := rc.Limits()
	l.InCapsuleDataSize = 0
	return l
}

func ctxDone(ctx context.Context) <-chan struct{} {
	if ctx == nil {
		return nil
	}
	return ctx.Done()
}

func firmwareRevision() string {
	if len(version) > 8 {
		return version[:8]
	}
	return version
}

// raiseMemlock lifts RLIMIT_MEMLOCK: every buffer is registered (pinned).
// systemd sets LimitMEMLOCK=infinity; by hand, root may raise it here.
func raiseMemlock(log *slog.Logger) {
	inf := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &inf); err != nil {
		var cur unix.Rlimit
		unix.Getrlimit(unix.RLIMIT_MEMLOCK, &cur)
		log.Warn("cannot raise RLIMIT_MEMLOCK; registration may fail", "err", err, "limit", cur.Cur)
	}
}

func addSubsystems(tgt *fabric.Target, cfg *config.Config, log *slog.Logger) error {
	for i, sc := range cfg.Subsystems {
		s, err := tgt.AddSubsystem(fabric.SubsystemConfig{
			NQN: sc.NQN, Serial: sc.Serial, Model: sc.Model, AllowAnyHost: sc.AllowAnyHost, Hosts: sc.Hosts,
		})
		if err != nil {
			return fmt.Errorf("subsystems[%d]: %w", i, err)
		}
		for j, nc := range sc.Namespaces {
			key := fmt.Sprintf("subsystems[%d].namespaces[%d]", i, j)
			dev, workers, err := openBackend(nc, log)
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			u := nc.ResolvedUUID(sc.NQN)
			if _, err := s.AddNamespace(fabric.NamespaceConfig{
				NSID: nc.NSID, Device: dev, UUID: u, NGUID: nc.NGUID(sc.NQN), ReadOnly: nc.ReadOnly, Workers: workers,
			}); err != nil {
				dev.Close()
				return fmt.Errorf("%s: %w", key, err)
			}
			log.Info("namespace added", "subnqn", sc.NQN, "nsid", nc.NSID, "backend", nc.Backend,
				"path", nc.Path, "bytes", dev.Size(), "block_size", dev.BlockSize(), "uuid", u.String())
		}
	}
	return nil
}

// openBackend opens a namespace's device and says how many workers it
// needs: memory never blocks and runs inline.
func openBackend(nc config.Namespace, log *slog.Logger) (blockdev.Device, int, error) {
	o := blockdev.Options{Path: nc.Path, Size: int64(nc.Size), BlockSize: nc.BlockSize, ReadOnly: nc.ReadOnly, Buffered: nc.BufferedIO, Logger: log}
	switch nc.Backend {
	case config.BackendMemory:
		d, err := blockdev.NewMemory(int64(nc.Size), nc.BlockSize)
		return d, 0, err
	case config.BackendFile:
		d, err := blockdev.OpenFile(o)
		return d, fileWorkers, err
	case config.BackendBlock:
		// A block device uses its own logical block size.
		o.BlockSize = 0
		d, err := blockdev.OpenBlockDevice(o)
		return d, fileWorkers, err
	}
	// config.Load inferred any backend left unset.
	return nil, 0, fmt.Errorf("unknown backend %q", nc.Backend)
}
