package tcp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
)

// closeTimeout bounds how long closing a listener waits for its
// connections to finish (their commands in the backends to come back).
const closeTimeout = 15 * time.Second

// refusalLogEvery spaces the warnings about connections refused for a
// limit: a peer opening connections in a loop would otherwise fill the log.
const refusalLogEvery = 10 * time.Second

// listener is one tcp port: its socket and the goroutine that accepts.
type listener struct {
	t    *Transport
	tgt  *fabric.Target
	port *fabric.Port
	ln   *net.TCPListener
	log  *slog.Logger

	mu      sync.Mutex
	conns   map[*conn]struct{}
	closing bool
	// lastRefusal is when a refusal was last logged; refusedSince counts
	// those since.
	lastRefusal  time.Time
	refusedSince int

	live      sync.WaitGroup // connections not finished
	accepting chan struct{}  // closed when the accept loop returns
	// stop ends the sweep; swept is closed when it has.
	stop, swept chan struct{}
	closeOnce   sync.Once
	closeErr    error
}

func (t *Transport) listen(tgt *fabric.Target, p *fabric.Port, addr *net.TCPAddr) (*listener, error) {
	ln, err := net.ListenTCP("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp listen: %w", err)
	}
	if addr.Port == 0 {
		// An ephemeral port (tests): the discovery log shows the real one.
		p.Service = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
	l := &listener{t: t, tgt: tgt, port: p, ln: ln, log: t.log.With("port", ln.Addr().String()),
		conns: map[*conn]struct{}{}, accepting: make(chan struct{}), stop: make(chan struct{}), swept: make(chan struct{})}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		ln.Close()
		return nil, errors.New("tcp: transport closed")
	}
	t.listeners[l] = struct{}{}
	t.mu.Unlock()
	go l.accept()
	go l.sweep()
	return l, nil
}

// sweep looks at the listener's connections now and then for hosts that
// hold R2Ts without sending their data (conn.checkDataStall): one
// goroutine per port, nothing per I/O.
func (l *listener) sweep() {
	defer close(l.swept)
	tick := time.NewTicker(min(l.t.cfg.SendTimeout/4, time.Second))
	defer tick.Stop()
	var cs []*conn
	for {
		select {
		case <-l.stop:
			return
		case now := <-tick.C:
			l.mu.Lock()
			cs = cs[:0]
			for c := range l.conns {
				cs = append(cs, c)
			}
			l.mu.Unlock()
			for _, c := range cs {
				c.checkDataStall(now)
			}
			clear(cs)
		}
	}
}

// Addr is the address the listener accepts on.
func (l *listener) Addr() net.Addr { return l.ln.Addr() }

// accept takes connections until the listener closes. A connection past
// the transport's limits is closed at once: it holds nothing.
func (l *listener) accept() {
	defer close(l.accepting)
	var backoff time.Duration
	for {
		nc, err := l.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors, say: wait a little, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.log.Warn("accept failed", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		addr := ""
		if ra, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
			addr = ra.IP.String()
		}
		if !l.admit(nc, addr) {
			continue
		}
		c := newConn(l, nc, addr)
		l.mu.Lock()
		if l.closing {
			l.mu.Unlock()
			nc.Close()
			l.t.unclaim(addr)
			continue
		}
		l.conns[c] = struct{}{}
		l.live.Add(1)
		l.mu.Unlock()
		l.t.stats.Accepted.Add(1)
		l.t.stats.Live.Add(1)
		go c.serve()
	}
}

// admit counts a new connection against the limits, or closes it.
func (l *listener) admit(nc *net.TCPConn, addr string) bool {
	if l.t.claim(addr) {
		return true
	}
	nc.Close()
	l.t.stats.Refused.Add(1)
	l.mu.Lock()
	l.refusedSince++
	logIt := time.Since(l.lastRefusal) >= refusalLogEvery
	n := l.refusedSince
	if logIt {
		l.lastRefusal = time.Now()
		l.refusedSince = 0
	}
	l.mu.Unlock()
	if logIt {
		total, fromAddr := l.t.Connections(addr)
		l.log.Warn("connections refused: limit reached", "remote", addr, "refused", n, "connections", total,
			"max", l.t.cfg.MaxConnections, "from_address", fromAddr, "max_per_address", l.t.cfg.MaxConnectionsPerAddress)
	}
	return false
}

// gone forgets a finished connection.
func (l *listener) gone(c *conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	l.live.Done()
}

// Close stops accepting, closes every connection and waits for them to
// finish.
func (l *listener) Close() error {
	l.closeOnce.Do(func() {
		l.ln.Close()
		<-l.accepting
		close(l.stop)
		<-l.swept
		l.mu.Lock()
		l.closing = true
		cs := make([]*conn, 0, len(l.conns))
		for c := range l.conns {
			cs = append(cs, c)
		}
		l.mu.Unlock()
		for _, c := range cs {
			c.close("target shutting down")
		}
		done := make(chan struct{})
		go func() { l.live.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(closeTimeout):
			l.closeErr = fmt.Errorf("tcp listener %s: connections still draining after %v", l.ln.Addr(), closeTimeout)
		}
		l.t.mu.Lock()
		delete(l.t.listeners, l)
		l.t.mu.Unlock()
	})
	return l.closeErr
}
