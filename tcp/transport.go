// Package tcp is the NVMe/TCP transport (NVMe/TCP Transport Specification
// 1.0): a listener per port, connection initialization (ICReq/ICResp),
// PDU framing with header and data digests, command capsules with
// in-capsule data, R2T and H2CData for host writes, C2HData for host
// reads, and termination requests.
//
// Each connection is one queue with two goroutines: a reader, which parses
// the host's PDUs and hands commands to the core (fabric), and a writer,
// which sends what the core and the reader queued (R2Ts, data and
// responses) with one vectored write per batch. Nothing is started per
// I/O, and nothing is allocated per I/O once a connection has warmed up:
// requests, their PDU headers and the data buffers (pool.go) are reused.
package tcp

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Config sizes the transport. Zero values take the defaults (limits.TCP*
// and fabric's).
type Config struct {
	// InCapsuleDataSize is the most in-capsule data of a command capsule
	// (IOCCSZ), on every queue.
	InCapsuleDataSize uint32
	// MaxQueueDepth is the deepest I/O queue (commands).
	MaxQueueDepth int
	// MaxIOQueueID is the highest I/O queue ID, and so the most I/O queues
	// of a controller.
	MaxIOQueueID int
	// MDTS is the largest transfer in bytes.
	MDTS uint32
	// MaxH2CData is MAXH2CDATA: the most data of one H2CData PDU.
	MaxH2CData uint32
	// IOUnitSize is the size of one pool buffer; BufferPoolSize bounds
	// the pool's buffers out at once (see limits.TCPBufferPoolSize).
	IOUnitSize     uint32
	BufferPoolSize uint64
	// MaxConnections bounds the connections of all tcp ports together,
	// MaxConnectionsPerAddress those from one host address.
	MaxConnections           int
	MaxConnectionsPerAddress int
	// ICReqTimeout bounds the wait for a new connection's ICReq.
	ICReqTimeout time.Duration
	// SendTimeout bounds the wait for a host to take what is sent to it,
	// and for the data of its R2Ts.
	SendTimeout time.Duration
	// Logger receives the transport's log; nil discards.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.InCapsuleDataSize == 0 {
		c.InCapsuleDataSize = limits.TCPInCapsuleDataSize
	}
	if c.MaxQueueDepth == 0 {
		c.MaxQueueDepth = fabric.DefaultMaxQueueDepth
	}
	if c.MaxIOQueueID == 0 {
		c.MaxIOQueueID = fabric.DefaultMaxIOQueues
	}
	if c.MDTS == 0 {
		c.MDTS = fabric.DefaultMDTS
	}
	if c.MaxH2CData == 0 {
		c.MaxH2CData = limits.TCPMaxH2CData
	}
	if c.IOUnitSize == 0 {
		c.IOUnitSize = limits.TCPIOUnitSize
	}
	if c.BufferPoolSize == 0 {
		c.BufferPoolSize = limits.TCPBufferPoolSize
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = limits.TCPMaxConnections
	}
	if c.MaxConnectionsPerAddress == 0 {
		c.MaxConnectionsPerAddress = limits.TCPMaxConnectionsPerAddress
	}
	if c.ICReqTimeout == 0 {
		c.ICReqTimeout = limits.TCPICReqTimeout
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = limits.TCPSendTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

func pow2(v uint32) bool { return v != 0 && v&(v-1) == 0 }

func (c *Config) validate() error {
	var errs []error
	if c.InCapsuleDataSize%16 != 0 || c.InCapsuleDataSize < limits.TCPInCapsuleDataSizeMin || c.InCapsuleDataSize > limits.TCPInCapsuleDataSizeMax {
		errs = append(errs, fmt.Errorf("in-capsule data size %d: want a multiple of 16 in %d..%d", c.InCapsuleDataSize, limits.TCPInCapsuleDataSizeMin, limits.TCPInCapsuleDataSizeMax))
	}
	if c.MaxQueueDepth < limits.TCPQueueDepthMin || c.MaxQueueDepth > limits.TCPQueueDepthMax {
		errs = append(errs, fmt.Errorf("max queue depth %d: want %d..%d", c.MaxQueueDepth, limits.TCPQueueDepthMin, limits.TCPQueueDepthMax))
	}
	if c.MaxIOQueueID < limits.TCPIOQueuesMin || c.MaxIOQueueID > limits.TCPIOQueuesMax {
		errs = append(errs, fmt.Errorf("max I/O queue ID %d: want %d..%d", c.MaxIOQueueID, limits.TCPIOQueuesMin, limits.TCPIOQueuesMax))
	}
	if !pow2(c.MDTS) || c.MDTS < limits.TCPMDTSMin || c.MDTS > limits.TCPMDTSMax {
		errs = append(errs, fmt.Errorf("mdts %d: want a power of two in %d..%d", c.MDTS, limits.TCPMDTSMin, limits.TCPMDTSMax))
	}
	if c.MaxH2CData%4 != 0 || c.MaxH2CData < limits.TCPMaxH2CDataMin || c.MaxH2CData > limits.TCPMaxH2CDataMax {
		errs = append(errs, fmt.Errorf("max H2C data %d: want a multiple of 4 in %d..%d", c.MaxH2CData, limits.TCPMaxH2CDataMin, limits.TCPMaxH2CDataMax))
	}
	if !pow2(c.IOUnitSize) || c.IOUnitSize < limits.TCPIOUnitSizeMin || c.IOUnitSize > c.MDTS {
		errs = append(errs, fmt.Errorf("io unit size %d: want a power of two in %d..mdts (%d)", c.IOUnitSize, limits.TCPIOUnitSizeMin, c.MDTS))
	}
	if c.BufferPoolSize < uint64(c.MDTS) {
		errs = append(errs, fmt.Errorf("buffer pool %d: smaller than mdts %d", c.BufferPoolSize, c.MDTS))
	}
	if c.MaxConnections < limits.TCPMaxConnectionsMin || c.MaxConnections > limits.TCPMaxConnectionsMax {
		errs = append(errs, fmt.Errorf("max connections %d: want %d..%d", c.MaxConnections, limits.TCPMaxConnectionsMin, limits.TCPMaxConnectionsMax))
	}
	if c.MaxConnectionsPerAddress < 1 || c.MaxConnectionsPerAddress > c.MaxConnections {
		errs = append(errs, fmt.Errorf("max connections per address %d: want 1..max connections (%d)", c.MaxConnectionsPerAddress, c.MaxConnections))
	}
	if c.ICReqTimeout < limits.TCPICReqTimeoutMin || c.ICReqTimeout > limits.TCPICReqTimeoutMax {
		errs = append(errs, fmt.Errorf("icreq timeout %v: want %v..%v", c.ICReqTimeout, limits.TCPICReqTimeoutMin, limits.TCPICReqTimeoutMax))
	}
	if c.SendTimeout <= 0 {
		errs = append(errs, fmt.Errorf("send timeout %v: want > 0", c.SendTimeout))
	}
	return errors.Join(errs...)
}

// Limits are the controller limits c gives its ports. NVMe/TCP moves data
// with Transport SGL Data Blocks, and a host that disables SQ flow control
// has its reads answered by their data alone (C2HData's SUCCESS flag).
func (c Config) Limits() fabric.TransportLimits {
	return fabric.TransportLimits{
		MDTS:              c.MDTS,
		MaxQueueDepth:     uint32(c.MaxQueueDepth),
		MaxIOQueues:       uint16(c.MaxIOQueueID),
		InCapsuleDataSize: c.InCapsuleDataSize,
		DisableSQFlow:     true,
		TransportSGL:      true,
	}
}

// Stats are the transport's counters, for metrics.
type Stats struct {
	// Accepted counts connections taken; Refused those closed at once for
	// a connection limit; Closed those torn down (Live is the difference
	// between accepted and closed ones).
	Accepted, Refused, Closed atomic.Uint64
	Live                      atomic.Int64
	// ICReqTimeouts counts connections closed for sending no ICReq in
	// time; TermReqsSent the C2HTermReqs sent for a fatal error of the
	// host's, TermReqsReceived the host's H2CTermReqs.
	ICReqTimeouts, TermReqsSent, TermReqsReceived atomic.Uint64
	// HeaderDigestErrors and DataDigestErrors count PDUs whose digest did
	// not match.
	HeaderDigestErrors, DataDigestErrors atomic.Uint64
	// DataOnlyReads counts the reads answered by their C2HData alone, with
	// the SUCCESS flag and no response capsule.
	DataOnlyReads atomic.Uint64
	// ReaderSends and WriterSends count the vectored writes of PDUs by a
	// connection's reader (before its next read: the PDUs of what it just
	// took, no hand-off) and by its writer (what completed while the
	// reader waited on the socket).
	ReaderSends, WriterSends atomic.Uint64
	// BufferWaits counts commands that waited for data buffers (for
	// the pool, or for room in their connection's share of it);
	// BufferBytes is the pool's bytes out (held by commands).
	BufferWaits atomic.Uint64
	BufferBytes atomic.Int64
	// SendTimeouts counts connections closed because their host took
	// nothing sent for SendTimeout; DataTimeouts those closed because it
	// sent no data for its R2Ts for as long.
	SendTimeouts, DataTimeouts atomic.Uint64
}

// Transport is the NVMe/TCP transport. One Transport serves every tcp port.
type Transport struct {
	cfg   Config
	log   *slog.Logger
	pool  *bufPool
	stats Stats

	mu        sync.Mutex
	listeners map[*listener]struct{}
	// conns counts the connections of every port, byAddr those of each
	// host address; they bound what a peer may open (conn.go).
	conns  int
	byAddr map[string]int
	closed bool
}

// New creates the transport.
func New(cfg Config) (*Transport, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("tcp config: %w", err)
	}
	t := &Transport{cfg: cfg, log: cfg.Logger, listeners: map[*listener]struct{}{}, byAddr: map[string]int{}}
	unit := int(cfg.IOUnitSize)
	maxUnits := (int(cfg.MDTS) + unit - 1) / unit
	share := shareOf(int(cfg.BufferPoolSize/uint64(unit)), cfg.MaxQueueDepth, maxUnits)
	t.pool = newBufPool(unit, int64(cfg.BufferPoolSize), share, &t.stats)
	return t, nil
}

// Name is "tcp".
func (t *Transport) Name() string { return "tcp" }

// Limits implements fabric.Limiter.
func (t *Transport) Limits() fabric.TransportLimits { return t.cfg.Limits() }

// Stats returns the live counters.
func (t *Transport) Stats() *Stats { return &t.stats }

// Listen listens on the port's address.
func (t *Transport) Listen(tgt *fabric.Target, p *fabric.Port) (fabric.Listener, error) {
	ip := net.ParseIP(p.Address)
	if ip == nil {
		return nil, fmt.Errorf("tcp listen: bad address %q", p.Address)
	}
	port, err := strconv.Atoi(p.Service)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("tcp listen: bad port %q", p.Service)
	}
	p.TRType = nvme.TRTypeTCP
	p.AdrFam = nvme.AdrFamIPv4
	if ip.To4() == nil {
		p.AdrFam = nvme.AdrFamIPv6
	}
	p.TSAS = nvme.TCPTSAS(nvme.TCPSecTypeNone)
	return t.listen(tgt, p, &net.TCPAddr{IP: ip, Port: port})
}

// claim counts a new connection from addr, if the limits allow it.
func (t *Transport) claim(addr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.conns >= t.cfg.MaxConnections || t.byAddr[addr] >= t.cfg.MaxConnectionsPerAddress {
		return false
	}
	t.conns++
	t.byAddr[addr]++
	return true
}

// unclaim gives a connection's place back.
func (t *Transport) unclaim(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.conns--
	if t.byAddr[addr]--; t.byAddr[addr] <= 0 {
		delete(t.byAddr, addr)
	}
}

// Connections reports how many connections the transport holds, in all
// and from addr.
func (t *Transport) Connections(addr string) (total, fromAddr int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conns, t.byAddr[addr]
}

// Close closes every listener, and with them every connection.
func (t *Transport) Close() error {
	t.mu.Lock()
	t.closed = true
	ls := make([]*listener, 0, len(t.listeners))
	for l := range t.listeners {
		ls = append(ls, l)
	}
	t.mu.Unlock()
	var errs []error
	for _, l := range ls {
		if err := l.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
