package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// statusEvery is how often STATUS= is refreshed when the unit sets no
// WatchdogSec; with one, it goes with every ping.
const statusEvery = 10 * time.Second

// notifier keeps systemd told while the target runs (sd_notify(3)): READY=1
// once, then a STATUS= line with the target's counts every tick and, when
// the unit sets WatchdogSec, WATCHDOG=1 at half that interval, but only
// while every poller makes progress. A stuck poller stops the pings, so
// systemd restarts the target (Restart=on-failure).
type notifier struct {
	log      *slog.Logger
	every    time.Duration
	watchdog bool
	// stalled names the pollers that made no progress since its previous
	// call (rdma.Transport.Stalled); nil when nothing is watched.
	stalled func() []string
	status  func() string
	send    func(state string) error
	// sock is what send writes to; nil when a test replaces send.
	sock *sdSocket

	stop, done chan struct{}
}

// newNotifier returns nil when systemd does not listen (no NOTIFY_SOCKET).
func newNotifier(log *slog.Logger, stalled func() []string, status func() string) *notifier {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return nil
	}
	sock := &sdSocket{addr: &net.UnixAddr{Name: os.Getenv("NOTIFY_SOCKET"), Net: "unixgram"}}
	n := &notifier{log: log, every: statusEvery, stalled: stalled, status: status, send: sock.send, sock: sock}
	// WATCHDOG_PID, when set, must be ours: a watchdog meant for a parent
	// (a wrapper script) is not this process's to ping.
	wd, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("systemd watchdog ignored", "err", err)
	}
	if wd > 0 {
		n.every, n.watchdog = wd/2, true
	}
	return n
}

// sdSocket sends sd_notify datagrams to NOTIFY_SOCKET over one connection,
// made at the first send and again after a send fails (systemd re-executed
// and its socket is new). daemon.SdNotify dials for every message, which
// for a status every tick is a socket made and closed every few seconds.
// Used by one goroutine at a time.
type sdSocket struct {
	addr *net.UnixAddr
	conn *net.UnixConn
}

// send writes state, dialling first if there is no connection; a write
// that fails is tried once more on a new connection.
func (s *sdSocket) send(state string) error {
	var err error
	for range 2 {
		if s.conn == nil {
			if s.conn, err = net.DialUnix("unixgram", nil, s.addr); err != nil {
				return err
			}
		}
		if _, err = s.conn.Write([]byte(state)); err == nil {
			return nil
		}
		s.close()
	}
	return err
}

func (s *sdSocket) close() {
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

// start sends READY=1 and starts the ticks; stop ends them.
func (n *notifier) start() {
	n.stop, n.done = make(chan struct{}), make(chan struct{})
	if err := n.send(daemon.SdNotifyReady + "\nSTATUS=" + n.status()); err != nil {
		n.log.Warn("sd_notify", "err", err)
	}
	if n.watchdog {
		n.log.Info("systemd watchdog on", "ping_every", n.every)
	}
	go n.run()
}

func (n *notifier) close() {
	close(n.stop)
	<-n.done
	if n.sock != nil {
		n.sock.close()
	}
}

func (n *notifier) run() {
	defer close(n.done)
	tick := time.NewTicker(n.every)
	defer tick.Stop()
	var wasStalled []string
	sendFailed := false
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
		}
		var stalled []string
		if n.stalled != nil {
			stalled = n.stalled()
		}
		// Transitions only: a stall lasts until systemd kills the target.
		if len(stalled) > 0 && len(wasStalled) == 0 {
			msg := "pollers make no progress"
			if n.watchdog {
				msg += ": systemd watchdog pings withheld"
			}
			n.log.Error(msg, "pollers", stalled)
		} else if len(stalled) == 0 && len(wasStalled) > 0 {
			n.log.Warn("pollers make progress again", "pollers", wasStalled)
		}
		wasStalled = stalled
		err := n.send(notifyState(n.watchdog, stalled, n.status()))
		if err != nil && !sendFailed {
			n.log.Warn("sd_notify", "err", err)
		}
		sendFailed = err != nil
	}
}

// notifyState is one tick's message: the ping, unless a poller is stalled,
// and the status, which names the stalled pollers first.
func notifyState(watchdog bool, stalled []string, status string) string {
	if len(stalled) > 0 {
		return "STATUS=stalled: " + strings.Join(stalled, ", ") + "; " + status
	}
	if watchdog {
		return daemon.SdNotifyWatchdog + "\nSTATUS=" + status
	}
	return "STATUS=" + status
}

// startNotify starts telling systemd about the target, READY=1 first; the
// function it returns stops the ticks.
func (s *server) startNotify() (stop func()) {
	n := newNotifier(s.log, s.stalled, s.status)
	if n == nil {
		return func() {}
	}
	n.start()
	return n.close
}

// stalled names the RDMA pollers that stopped making progress.
func (s *server) stalled() []string {
	if rt := s.rdma(); rt != nil {
		return rt.Stalled()
	}
	return nil
}

// status is the STATUS= text systemctl status shows.
func (s *server) status() string {
	st := s.tgt.Stats()
	return fmt.Sprintf("controllers: %d, queues: %d", st.Controllers, st.Queues)
}
