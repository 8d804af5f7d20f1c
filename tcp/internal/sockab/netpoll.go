package sockab

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// readBufSize is the reader's buffer, tcp/conn.go's.
const readBufSize = 32 << 10

// npServer is the netpoller variant: the shape of tcp/ without its
// protocol, a reader and a writer goroutine per connection. With inline
// (the netpoller-inline variant, a diagnostic) one goroutine per
// connection reads, executes and writes: what the hand-off to a writer
// costs.
type npServer struct {
	ln     net.Listener
	inline bool
	sndbuf int
	mu     sync.Mutex
	conn   map[*npConn]struct{}
	wg     sync.WaitGroup
}

// npConn is one connection. The reader takes a free request, reads the
// command (and a write's data) into it, executes it and queues it for the
// writer under mu, as tcp/conn.go's capsule, toCore and QueueResponse do;
// the writer sends what is queued in one writev and frees it, as
// tcp/writer.go's writeLoop does.
type npConn struct {
	nc   net.Conn
	disk []byte

	// Reader only.
	br  *bufio.Reader
	hdr [CmdSize]byte

	mu      sync.Mutex
	reqs    [slots]npReq
	free    []*npReq
	freed   sync.Cond
	wq      []*npReq
	wake    sync.Cond
	closing bool

	// Writer only.
	wqSpare []*npReq
	bufs    [][]byte
	nb      net.Buffers
}

type npReq struct {
	rsp      [RespHdrSize]byte
	buf      []byte
	withData bool
}

func startNetpoller(inline bool, sndbuf int) (*npServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &npServer{ln: ln, inline: inline, sndbuf: sndbuf, conn: map[*npConn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func (s *npServer) Addr() string { return s.ln.Addr().String() }

func (s *npServer) Describe() string {
	if s.inline {
		return "netpoller-inline: one goroutine per connection reads, executes and writes, one writev a batch"
	}
	return "netpoller: a reader and a writer goroutine per connection, one writev a batch"
}

func (s *npServer) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		if s.sndbuf > 0 {
			nc.(*net.TCPConn).SetWriteBuffer(s.sndbuf)
		}
		c := newNPConn(nc)
		s.mu.Lock()
		s.conn[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if s.inline {
				c.serveInline()
				c.nc.Close()
			} else {
				c.serve()
			}
			s.mu.Lock()
			delete(s.conn, c)
			s.mu.Unlock()
		}()
	}
}

func (s *npServer) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conn {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func newNPConn(nc net.Conn) *npConn {
	c := &npConn{nc: nc, disk: newDisk(), br: bufio.NewReaderSize(nc, readBufSize)}
	c.freed.L = &c.mu
	c.wake.L = &c.mu
	for i := range c.reqs {
		c.reqs[i].buf = make([]byte, BlockSize)
		c.free = append(c.free, &c.reqs[i])
	}
	return c
}

// serve is the reader; it starts the writer and stops it at the end.
func (c *npConn) serve() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.writeLoop()
	}()
	c.readLoop()
	c.mu.Lock()
	c.closing = true
	c.wake.Signal()
	c.mu.Unlock()
	c.nc.Close()
	<-done
}

// readCmd reads the next command capsule's header and checks it: its PLEN.
func (c *npConn) readCmd() (int, error) {
	if _, err := io.ReadFull(c.br, c.hdr[:]); err != nil {
		return 0, err
	}
	return checkCmd(nvme.TCPHeader(c.hdr[:]))
}

func (c *npConn) readLoop() error {
	for {
		plen, err := c.readCmd()
		if err != nil {
			return err
		}
		r := c.take()
		if r == nil {
			return net.ErrClosed
		}
		if plen == WriteCmdSize {
			if _, err := io.ReadFull(c.br, r.buf); err != nil {
				return err
			}
		}
		if r.withData, err = execute(c.disk, nvme.TCPHeader(c.hdr[:]), r.buf, r.rsp[:]); err != nil {
			return err
		}
		c.mu.Lock()
		c.wq = append(c.wq, r)
		if len(c.wq) == 1 {
			c.wake.Signal()
		}
		c.mu.Unlock()
	}
}

// take is a free request, waiting for the writer to free one; nil once
// the connection closes.
func (c *npConn) take() *npReq {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.free) == 0 && !c.closing {
		c.freed.Wait()
	}
	if c.closing {
		return nil
	}
	r := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	return r
}

func (c *npConn) writeLoop() {
	for {
		c.mu.Lock()
		for len(c.wq) == 0 && !c.closing {
			c.wake.Wait()
		}
		if c.closing {
			c.mu.Unlock()
			return
		}
		batch := c.wq
		c.wq = c.wqSpare[:0]
		c.mu.Unlock()

		bufs := c.bufs[:0]
		for _, r := range batch {
			bufs = append(bufs, r.rsp[:])
			if r.withData {
				bufs = append(bufs, r.buf)
			}
		}
		c.nb = bufs
		_, err := c.nb.WriteTo(c.nc)
		clear(bufs)
		c.bufs = bufs[:0]
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				c.nc.Close()
			}
			c.mu.Lock()
			c.closing = true
			c.freed.Broadcast()
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		for i, r := range batch {
			c.free = append(c.free, r)
			batch[i] = nil
		}
		c.freed.Signal()
		c.mu.Unlock()
		c.wqSpare = batch[:0]
	}
}

// serveInline answers on the reading goroutine: the responses of the
// commands received so far go out in one writev once the next command is
// not all buffered (reading it might wait) or every request is taken.
func (c *npConn) serveInline() error {
	n := 0
	for {
		plen, err := c.readCmd()
		if err != nil {
			return err
		}
		r := &c.reqs[n]
		if plen == WriteCmdSize {
			if _, err := io.ReadFull(c.br, r.buf); err != nil {
				return err
			}
		}
		if r.withData, err = execute(c.disk, nvme.TCPHeader(c.hdr[:]), r.buf, r.rsp[:]); err != nil {
			return err
		}
		c.bufs = append(c.bufs, r.rsp[:])
		if r.withData {
			c.bufs = append(c.bufs, r.buf)
		}
		n++
		if n < slots && c.nextBuffered() {
			continue
		}
		c.nb = c.bufs
		_, err = c.nb.WriteTo(c.nc)
		clear(c.bufs)
		c.bufs = c.bufs[:0]
		n = 0
		if err != nil {
			return err
		}
	}
}

// nextBuffered reports whether the next command is all in the reader's
// buffer.
func (c *npConn) nextBuffered() bool {
	if c.br.Buffered() < CmdSize {
		return false
	}
	b, _ := c.br.Peek(CmdSize)
	return c.br.Buffered() >= int(nvme.TCPHeader(b).PLEN())
}
