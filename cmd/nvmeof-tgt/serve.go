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
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/control"
	"github.com/nvmeof-tgt/nvmeof-tgt/control/group"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/internal/dirlock"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp"
)

func serveCmd() *cobra.Command {
	var cfgFile string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the target (the embedded default configuration without --config)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var cfg *config.Config
			var loaded []byte
			var err error
			if cfgFile != "" {
				cfg, loaded, err = config.LoadFileContent(cfgFile)
			} else {
				cfg, err = config.LoadDefault()
			}
			if err == nil {
				err = cfg.CheckPaths()
			}
			if err == nil {
				err = errors.Join(unserved(cfg)...)
			}
			if err == nil && cfgFile != "" && cfg.HasInlineSecrets() {
				err = config.CheckPrivate(cfgFile)
			}
			if err != nil {
				return err
			}
			return serve(cmd.Context(), cfg, configFile{path: cfgFile, loaded: loaded})
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

// configFile is the file serve was started with ("" for the embedded
// default) and the content its configuration was loaded from.
type configFile struct {
	path   string
	loaded []byte
}

func serve(ctx context.Context, cfg *config.Config, file configFile) error {
	log := newLogger(cfg.Log)
	slog.SetDefault(log)
	raiseMemlock(log)

	srv, err := build(cfg, file, log)
	if err != nil {
		return err
	}
	runErr := srv.run(ctx)
	return errors.Join(runErr, srv.shutdown())
}

// server is a built target and what serves it. Fields are nil until built.
type server struct {
	log     *slog.Logger
	tgt     *fabric.Target
	m       *control.Manager
	rcfg    rdma.Config
	rtMu    sync.Mutex      // guards rt: ports are added by the API's goroutines too
	rt      *rdma.Transport // made with the first rdma port
	tcfg    tcp.Config
	tt      *tcp.Transport // made with the first tcp port; guarded by rtMu
	loop    *fabric.LoopTransport
	metrics *http.Server // only with metrics.listen set
	api     *http.Server // only with api.socket set
	apiLn   net.Listener // api's, which removes the socket on Close
	// group is the gateway group's store, only with gateway_group set;
	// fenced says this gateway was blocklisted by another.
	group  group.Store
	fenced chan error
	// stateLock holds state_dir for this process (none without one).
	stateLock *dirlock.Lock
}

// build creates the target and serves cfg on it, then the metrics
// endpoint. file is the configuration file, which reload reads and API
// changes are saved to. On failure it releases whatever it made.
func build(cfg *config.Config, file configFile, log *slog.Logger) (_ *server, err error) {
	s := &server{log: log, rcfg: rdmaConfig(cfg.RDMA, log), tcfg: tcpConfig(cfg.TCP, log), fenced: make(chan error, 1)}
	defer func() {
		if err != nil {
			// The failure is what the operator needs; close errors would
			// only obscure it.
			s.close()
		}
	}()
	if s.stateLock, err = lockStateDir(cfg.StateDir, file.path); err != nil {
		return nil, err
	}
	s.loop = fabric.NewLoopTransport(loopLimits(s.rcfg))
	s.tgt = fabric.NewTarget(control.TargetOptions(cfg, firmwareRevision(), log))
	gopts, store, err := groupOptions(cfg, log, func(err error) {
		select {
		case s.fenced <- err:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	s.group = store
	s.m, err = control.New(s.tgt, cfg, control.Options{Path: file.path, Loaded: file.loaded, Transport: s.transport, Logger: log, Group: gopts})
	switch {
	case errors.Is(err, rdma.ErrNoDevice):
		return nil, noDeviceHelp(err, cfg, file.path, sysInfiniband)
	case errors.Is(err, rdma.ErrNotSupported):
		return nil, fmt.Errorf("%w (this binary was built without cgo)", err)
	case err != nil:
		return nil, err
	}
	if cfg.Metrics.Listen != "" {
		if err := s.startMetrics(cfg.Metrics); err != nil {
			return nil, err
		}
	}
	if cfg.API.Socket != "" {
		if err := s.startAPI(cfg.API.Socket); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// lockStateDir takes the state directory for this process before anything
// reads or writes it: two processes with one state_dir would overwrite
// each other's reservation files, and one restarted would restore the
// other's reservations. The lock goes with the process, however it ends.
func lockStateDir(dir, cfgPath string) (*dirlock.Lock, error) {
	if dir == "" {
		return nil, nil // no state kept
	}
	me := dirlock.Holder{PID: os.Getpid(), Config: "(the embedded default)"}
	if cfgPath != "" {
		me.Config = cfgPath
		if abs, err := filepath.Abs(cfgPath); err == nil {
			me.Config = abs
		}
	}
	l, err := dirlock.Acquire(dir, me)
	switch {
	case errors.Is(err, dirlock.ErrHeld):
		return nil, fmt.Errorf("state_dir %w: give each nvmeof-tgt process on this machine its own state_dir", err)
	case err != nil:
		return nil, fmt.Errorf("state_dir: %w", err)
	}
	return l, nil
}

// noDeviceHelp says what to do when no RDMA device serves a port: set one
// up when the machine has none (ibRoot, /sys/class/infiniband, lists
// none), or else edit the port's address in the configuration file.
func noDeviceHelp(err error, cfg *config.Config, path, ibRoot string) error {
	if !hasRDMADevice(ibRoot) {
		return fmt.Errorf("%w: this machine has no RDMA device: set one up (a NIC's driver, or Soft-RoCE with `nvmeof-tgt softroce add`)", err)
	}
	file := path
	if file == "" {
		file = "a configuration of your own, given with --config"
	}
	// control names the step that failed after its port ("add port rdma 10.0.0.1:4420: ...").
	key := "ports[].address"
	for i, p := range cfg.Ports {
		name := "port " + p.Transport + " " + net.JoinHostPort(p.Address, strconv.Itoa(p.Port)) + ":"
		if p.Transport == "rdma" && strings.Contains(err.Error(), name) {
			key = fmt.Sprintf("ports[%d].address", i)
			break
		}
	}
	return fmt.Errorf("%w: no RDMA device has that address: edit %s in %s to an address of an RDMA device (`rdma link show` names their netdevs, `ip -br addr` their addresses), or 0.0.0.0 for all of them", err, key, file)
}

// hasRDMADevice reports whether the kernel lists an RDMA device under
// ibRoot.
func hasRDMADevice(ibRoot string) bool {
	devs, _ := os.ReadDir(ibRoot)
	return len(devs) > 0
}

// startAPI serves the management API (docs/api.md) on a Unix socket.
func (s *server) startAPI(path string) error {
	l, err := control.ListenAPI(path)
	if err != nil {
		return fmt.Errorf("api.socket: %w", err)
	}
	// ConnContext: the audit log names the peer process of each change.
	s.api = &http.Server{Handler: s.m.Handler(), ConnContext: control.ConnContext, ReadHeaderTimeout: 5 * time.Second}
	s.apiLn = l
	go s.api.Serve(l)
	s.log.Info("management API listening", "socket", path)
	return nil
}

// rdma is the RDMA transport, or nil before the first rdma port: the
// management API may add one later.
func (s *server) rdma() *rdma.Transport {
	s.rtMu.Lock()
	defer s.rtMu.Unlock()
	return s.rt
}

// tcp is the TCP transport, or nil before the first tcp port.
func (s *server) tcp() *tcp.Transport {
	s.rtMu.Lock()
	defer s.rtMu.Unlock()
	return s.tt
}

// transport returns the transport of a port; the RDMA transport, which
// registers its pools, is made with the first rdma port and serves them all,
// the TCP transport with the first tcp port.
func (s *server) transport(name string) (fabric.Transport, error) {
	switch name {
	case "tcp":
		s.rtMu.Lock()
		defer s.rtMu.Unlock()
		if s.tt == nil {
			tt, err := tcp.New(s.tcfg)
			if err != nil {
				return nil, err
			}
			s.tt = tt
		}
		return s.tt, nil
	case "rdma":
		s.rtMu.Lock()
		defer s.rtMu.Unlock()
		if s.rt == nil {
			rt, err := rdma.New(s.rcfg)
			if err != nil {
				return nil, err
			}
			s.rt = rt
		}
		return s.rt, nil
	case "loop":
		return s.loop, nil
	}
	return nil, fmt.Errorf("unknown transport %q", name)
}

// startMetrics serves Prometheus metrics, and pprof if asked, on m.Listen.
func (s *server) startMetrics(m config.Metrics) error {
	reg := newRegistry(s.tgt, s.rdma, s.tcp, sysInfiniband)
	if s.m.Group() != nil {
		reg.MustRegister(newGroupCollector(s.m.Group))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(reg))
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

// run tells systemd the target is ready and serves until SIGTERM, SIGINT
// or the end of ctx. SIGHUP reloads the configuration file.
func (s *server) run(ctx context.Context) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sig)
	// READY=1, then STATUS= and the watchdog's pings (watchdog.go).
	stopNotify := s.startNotify()
	defer stopNotify()
	cfg := s.m.Running()
	s.log.Info("target ready", "subsystems", len(cfg.Subsystems), "ports", len(cfg.Ports))
	for {
		select {
		case got := <-sig:
			if got == syscall.SIGHUP {
				s.reload()
				continue
			}
			s.log.Info("shutting down", "signal", got.String())
		case <-ctxDone(ctx):
		case err := <-s.fenced:
			// Another gateway took this one's ANA group over and
			// blocklisted its clients: nothing it serves can be written
			// any more. Exit failed, so that systemd restarts it as a
			// new client, which takes its group back.
			s.log.Error("fenced by the gateway group: exiting to be restarted", "err", err)
			return fmt.Errorf("fenced by the gateway group: %w", err)
		}
		return nil
	}
}

// reload applies the configuration file again (SIGHUP). A file that does
// not load is refused whole and the target goes on as it was. The manager
// logs the outcome.
func (s *server) reload() {
	daemon.SdNotify(false, daemon.SdNotifyReloading)
	defer daemon.SdNotify(false, daemon.SdNotifyReady)
	s.m.Reload(control.Caller{Source: "signal"})
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

// close releases what build made: the API and metrics endpoints (their
// shutdown errors are not the target's), then the target, whose listeners
// disconnect every host, then the transports under them.
func (s *server) close() error {
	// The API first: no change may start while the target closes. Its
	// listener removes the socket as it closes.
	for _, h := range []*http.Server{s.api, s.metrics} {
		if h != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			h.Shutdown(sctx)
			cancel()
		}
	}
	// Shutdown closes only a listener Serve has taken: stopped before its
	// goroutine runs, the socket would outlive shutdown. A second Close is
	// harmless.
	if s.apiLn != nil {
		s.apiLn.Close()
	}
	var errs []error
	if s.m != nil {
		s.m.Close() // no group change applied from here on
	}
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
	if s.tt != nil {
		if err := s.tt.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.group != nil {
		// Hosts are gone and the images closed: the others may take
		// this gateway's group over at once.
		if s.m != nil {
			s.m.LeaveGroup()
		}
		if c, ok := s.group.(interface{ Close() }); ok {
			c.Close()
		}
	}
	// Last: nothing writes to the state directory any more.
	s.stateLock.Close()
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
		SRQ:                c.SRQ,
		Logger:             log,
	}
}

// tcpConfig is the TCP transport's configuration; like the RDMA transport
// it hands fabric its ports' controller limits itself.
func tcpConfig(c config.TCP, log *slog.Logger) tcp.Config {
	return tcp.Config{
		InCapsuleDataSize:        uint32(c.InCapsuleDataSize),
		MaxQueueDepth:            c.MaxQueueDepth,
		MaxIOQueueID:             c.MaxIOQueues,
		MDTS:                     uint32(c.MDTS),
		MaxH2CData:               uint32(c.MaxH2CData),
		IOUnitSize:               uint32(c.IOUnitSize),
		BufferPoolSize:           uint64(c.BufferPoolSize),
		MaxConnections:           c.MaxConnections,
		MaxConnectionsPerAddress: c.MaxConnectionsPerAddress,
		ICReqTimeout:             c.ICReqTimeout,
		Logger:                   log,
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
