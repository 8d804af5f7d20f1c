package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestNewNotifier(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	tests := []struct {
		name         string
		socket       string
		usec, pid    string
		wantNil      bool
		wantWatchdog bool
		wantEvery    time.Duration
	}{
		{name: "no systemd", wantNil: true},
		{name: "no watchdog", socket: "@x", wantEvery: statusEvery},
		{name: "watchdog", socket: "@x", usec: "30000000", wantWatchdog: true, wantEvery: 15 * time.Second},
		{name: "watchdog for us", socket: "@x", usec: "1000000", pid: self, wantWatchdog: true, wantEvery: 500 * time.Millisecond},
		{name: "watchdog for another process", socket: "@x", usec: "1000000", pid: "1", wantEvery: statusEvery},
		{name: "bad interval", socket: "@x", usec: "soon", wantEvery: statusEvery},
		{name: "watchdog without a socket", usec: "1000000", wantNil: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("NOTIFY_SOCKET", tc.socket)
			t.Setenv("WATCHDOG_USEC", tc.usec)
			t.Setenv("WATCHDOG_PID", tc.pid)
			n := newNotifier(discard, nil, func() string { return "" })
			if tc.wantNil {
				if n != nil {
					t.Fatalf("got a notifier (every %v), want none", n.every)
				}
				return
			}
			if n == nil {
				t.Fatal("no notifier")
			}
			if n.watchdog != tc.wantWatchdog || n.every != tc.wantEvery {
				t.Errorf("watchdog %v every %v, want %v %v", n.watchdog, n.every, tc.wantWatchdog, tc.wantEvery)
			}
		})
	}
}

func TestNotifyState(t *testing.T) {
	tests := []struct {
		watchdog bool
		stalled  []string
		want     string
	}{
		{true, nil, "WATCHDOG=1\nSTATUS=controllers: 1, queues: 3"},
		{false, nil, "STATUS=controllers: 1, queues: 3"},
		{true, []string{"rxe0 poller 0"}, "STATUS=stalled: rxe0 poller 0; controllers: 1, queues: 3"},
		{false, []string{"rxe0 poller 0", "rxe0 poller 2"}, "STATUS=stalled: rxe0 poller 0, rxe0 poller 2; controllers: 1, queues: 3"},
	}
	for _, tc := range tests {
		if got := notifyState(tc.watchdog, tc.stalled, "controllers: 1, queues: 3"); got != tc.want {
			t.Errorf("notifyState(%v, %q) = %q, want %q", tc.watchdog, tc.stalled, got, tc.want)
		}
	}
}

// fakeHealth is a poller set the test stalls and frees.
type fakeHealth struct {
	mu      sync.Mutex
	stalled []string
}

func (h *fakeHealth) set(s ...string) { h.mu.Lock(); h.stalled = s; h.mu.Unlock() }
func (h *fakeHealth) Stalled() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.stalled)
}

// TestNotifierLoop runs the notifier against a fake systemd socket: READY=1
// with a status, pings at half the watchdog interval while healthy, none
// while a poller is stalled, and again once it recovers.
func TestNotifierLoop(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "100000") // pings every 50ms
	t.Setenv("WATCHDOG_PID", "")

	h := &fakeHealth{}
	n := newNotifier(discard, h.Stalled, func() string { return "controllers: 2, queues: 6" })
	if n == nil || !n.watchdog || n.every != 50*time.Millisecond {
		t.Fatalf("notifier %+v, want a watchdog every 50ms", n)
	}
	buf := make([]byte, 4096)
	read := func() (string, time.Time) {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		k, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("notify socket: %v", err)
		}
		return string(buf[:k]), time.Now()
	}
	n.start()
	stopped := false
	defer func() {
		if !stopped {
			n.close()
		}
	}()

	if msg, _ := read(); msg != "READY=1\nSTATUS=controllers: 2, queues: 6" {
		t.Fatalf("first message %q, want READY=1 and the status", msg)
	}
	const healthy = "WATCHDOG=1\nSTATUS=controllers: 2, queues: 6"
	_, last := read()
	var gaps []time.Duration
	for range 5 {
		msg, at := read()
		if msg != healthy {
			t.Fatalf("message %q, want %q", msg, healthy)
		}
		gaps = append(gaps, at.Sub(last))
		last = at
	}
	slices.Sort(gaps)
	if med := gaps[len(gaps)/2]; med < 25*time.Millisecond || med > 200*time.Millisecond {
		t.Errorf("pings %v apart (median of %v), want about 50ms", med, gaps)
	}

	h.set("rxe0 poller 0")
	// A ping read before the stall may be on its way still.
	msg, _ := read()
	if msg == healthy {
		msg, _ = read()
	}
	for range 3 {
		if want := "STATUS=stalled: rxe0 poller 0; controllers: 2, queues: 6"; msg != want {
			t.Fatalf("stalled: message %q, want %q", msg, want)
		}
		msg, _ = read()
	}

	h.set()
	for msg != healthy {
		msg, _ = read()
		if strings.HasPrefix(msg, "STATUS=stalled") {
			continue
		}
		if msg != healthy {
			t.Fatalf("recovered: message %q, want %q", msg, healthy)
		}
	}

	n.close()
	stopped = true
	conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	for {
		if _, err := conn.Read(buf); err != nil {
			break // drained, and nothing more comes
		}
	}
	conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if k, err := conn.Read(buf); err == nil {
		t.Errorf("message %q after close", buf[:k])
	}
}

// TestNotifierConnection: the notifier dials NOTIFY_SOCKET once and keeps
// the connection, rather than dialling for each message (a tick every few
// seconds for the life of the target); a send that fails (systemd
// re-executed, its socket made anew) dials again.
func TestNotifierConnection(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	listen := func() *net.UnixConn {
		t.Helper()
		c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	first := listen()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "40000") // a message every 20ms
	t.Setenv("WATCHDOG_PID", "")
	n := newNotifier(discard, nil, func() string { return "controllers: 0, queues: 0" })
	if n == nil {
		t.Fatal("no notifier")
	}
	buf := make([]byte, 4096)
	read := func(c *net.UnixConn, what string) string {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		k, err := c.Read(buf)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return string(buf[:k])
	}
	n.start()
	defer n.close()
	if msg := read(first, "READY=1"); !strings.HasPrefix(msg, "READY=1") {
		t.Fatalf("first message %q, want READY=1", msg)
	}
	// The path goes, the socket stays: only a connection made before
	// reaches it.
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		read(first, fmt.Sprintf("ping %d after the socket's path was removed (dialled again instead of kept?)", i+1))
	}
	// A new socket at the path, the old one gone: the next send fails and
	// the notifier dials again.
	first.Close()
	second := listen()
	if msg := read(second, "ping on the new socket"); !strings.HasPrefix(msg, "WATCHDOG=1") {
		t.Fatalf("message %q on the new socket, want a ping", msg)
	}
}
