package control

import (
	"context"
	"net"
	"net/http"
)

// The audit trail: every change, applied or refused, is logged once with
// who asked for it, besides the log lines of its steps.

// Caller is who asked for a change.
type Caller struct {
	// Source is "api" for a request on the API socket, "signal" for
	// SIGHUP.
	Source string
	// Peer is the API client's process; nil when it is not known (a
	// signal does not say who sent it).
	Peer *Peer
	// Method and Path are the API request's.
	Method, Path string
}

// Peer is the process at the other end of a Unix socket, with the
// credentials it had when it connected (SO_PEERCRED, unix(7)).
type Peer struct {
	UID, GID, PID int
}

type peerKey struct{}

// ConnContext is the API server's http.Server.ConnContext: it records the
// peer of each connection, which apiCaller puts in the audit log.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	p, err := peerOf(c)
	if err != nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, p)
}

// apiCaller is who made an API request. The path names subsystems and
// hosts, never a secret (those travel in bodies); the query is left out.
func apiCaller(r *http.Request) Caller {
	p, _ := r.Context().Value(peerKey{}).(*Peer)
	return Caller{Source: "api", Peer: p, Method: r.Method, Path: r.URL.Path}
}

func (c Caller) attrs() []any {
	a := []any{"source", c.Source}
	if c.Peer != nil {
		a = append(a, "uid", c.Peer.UID, "pid", c.Peer.PID)
	}
	if c.Method != "" {
		a = append(a, "method", c.Method, "path", c.Path)
	}
	return a
}

// audit logs a change (what: "change" or "reload") once, with its caller
// and outcome. It never logs a secret: steps and errors name hosts and
// files, not keys (config's messages never hold one).
func (m *Manager) audit(c Caller, what string, res Result, err error) {
	attrs := append(c.attrs(), "applied", res.Applied)
	switch {
	case err == nil:
		msg := "configuration changed"
		if what == "reload" {
			msg = "configuration reloaded"
		}
		m.log.Info(msg, append(attrs, "restart", res.Restart, "persisted", res.Persisted)...)
	case len(res.Applied) == 0:
		m.log.Warn(what+" failed: the running configuration stays", append(attrs, "err", err)...)
	default:
		m.log.Error(what+" failed midway: the steps applied stay", append(attrs, "err", err)...)
	}
}
