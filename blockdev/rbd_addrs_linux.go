//go:build linux && cgo && rbd

package blockdev

import (
	"errors"
	"fmt"
)

// RBDClientAddrs are the addresses of the cluster connections open now
// (rados_getaddrs), one string per connection: a gateway group records
// them in the gateway's lease, so that fencing the gateway blocklists its
// data path as well as its group client.
func RBDClientAddrs() []string {
	// Each connection held while its address is read: its last image
	// may close meanwhile.
	rbdConns.mu.Lock()
	var conns []*rbdConn
	for _, c := range rbdConns.m {
		select {
		case <-c.ready:
			if c.err == nil && c.refs > 0 {
				c.refs++
				conns = append(conns, c)
			}
		default: // still connecting: the next call sees it
		}
	}
	rbdConns.mu.Unlock()
	var out []string
	for _, c := range conns {
		if a, err := c.conn.Addrs(); err == nil && a != "" {
			out = append(out, a)
		}
		c.release()
	}
	return out
}

// RBDWaitForLatestOSDMap waits until every cluster connection open now has
// the newest OSD map (a gateway group runs it after fencing another
// gateway, before serving that gateway's namespaces).
func RBDWaitForLatestOSDMap() error {
	rbdConns.mu.Lock()
	var conns []*rbdConn
	for _, c := range rbdConns.m {
		select {
		case <-c.ready:
			if c.err == nil && c.refs > 0 {
				c.refs++
				conns = append(conns, c)
			}
		default: // still connecting: it reads the newest map as it connects
		}
	}
	rbdConns.mu.Unlock()
	var errs []error
	for _, c := range conns {
		if err := c.conn.WaitForLatestOSDMap(); err != nil {
			errs = append(errs, fmt.Errorf("rbd client: wait for the newest OSD map: %w", err))
		}
		c.release()
	}
	return errors.Join(errs...)
}
