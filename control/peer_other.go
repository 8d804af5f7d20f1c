//go:build !linux

package control

import (
	"errors"
	"net"
)

// peerOf: SO_PEERCRED is Linux's; elsewhere the peer is not known.
func peerOf(net.Conn) (*Peer, error) { return nil, errors.ErrUnsupported }
