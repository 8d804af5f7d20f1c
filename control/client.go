package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
)

// ClientTimeout bounds one request: a change that opens or grows a large
// file takes a while, but a target that never answers must not hang a
// script.
const ClientTimeout = 2 * time.Minute

// Client calls the management API (docs/api.md) on its Unix socket, with
// the server's own request and response types: one method per route.
//
// An answer that is not a success is an *APIError; a socket that cannot
// be reached is an *UnreachableError.
type Client struct {
	socket string
	hc     *http.Client
}

// NewClient returns a client of the API on the Unix socket path.
func NewClient(socket string) *Client {
	var d net.Dialer
	return &Client{socket: socket, hc: &http.Client{
		Timeout: ClientTimeout,
		// The API sends no redirect, and following one would send a
		// change to another resource.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			return fmt.Errorf("the target answered with a redirect to %s; not followed", req.URL.Path)
		},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := d.DialContext(ctx, "unix", socket)
			if err != nil {
				return nil, &UnreachableError{Socket: socket, Err: err}
			}
			return c, nil
		}},
	}}
}

// APIError is an error the API answered with: its HTTP status and body.
type APIError struct {
	Code int
	ErrorResponse
}

func (e *APIError) Error() string { return e.ErrorResponse.Error }

// UnreachableError is a socket that is missing, refuses, or is not the
// caller's to use.
type UnreachableError struct {
	Socket string
	Err    error
}

func (e *UnreachableError) Error() string {
	if errors.Is(e.Err, os.ErrPermission) {
		return fmt.Sprintf("cannot reach the target at %s: permission denied (the socket is root's)", e.Socket)
	}
	return fmt.Sprintf("cannot reach the target at %s: is nvmeof-tgt serve running?", e.Socket)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// StatusCode is the HTTP status of an *APIError in err's chain, or 0.
func StatusCode(err error) int {
	var e *APIError
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// IsNotFound reports an answer of 404: no such subsystem, namespace,
// host, port or path.
func IsNotFound(err error) bool { return StatusCode(err) == http.StatusNotFound }

// IsConflict reports an answer of 409: what a change adds exists already.
func IsConflict(err error) bool { return StatusCode(err) == http.StatusConflict }

// IsInvalid reports an answer of 400 or 413: the request, or the
// configuration it would make, is refused as invalid.
func IsInvalid(err error) bool {
	c := StatusCode(err)
	return c == http.StatusBadRequest || c == http.StatusRequestEntityTooLarge
}

// IsUnreachable reports that the target's socket could not be reached.
func IsUnreachable(err error) bool {
	var e *UnreachableError
	return errors.As(err, &e)
}

// EncodeJSON writes v as the API writes its answers, indented, so that a
// client that prints what it decoded prints what the API sent.
func EncodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Status is GET /v1/status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var v Status
	return v, c.call(ctx, routeStatus, nil, &v)
}

// Config is GET /v1/config: the running configuration as YAML.
func (c *Client) Config(ctx context.Context) ([]byte, error) {
	var v []byte
	return v, c.call(ctx, routeConfig, nil, &v)
}

// Reload is POST /v1/reload.
func (c *Client) Reload(ctx context.Context) (Result, error) {
	return c.change(ctx, routeReload, nil)
}

// Subsystems is GET /v1/subsystems.
func (c *Client) Subsystems(ctx context.Context) ([]SubsystemStatus, error) {
	var v []SubsystemStatus
	return v, c.call(ctx, routeSubsystems, nil, &v)
}

// AddSubsystem is POST /v1/subsystems.
func (c *Client) AddSubsystem(ctx context.Context, req SubsystemRequest) (Result, error) {
	return c.change(ctx, routeAddSubsystem, req)
}

// Subsystem is GET /v1/subsystems/{nqn}.
func (c *Client) Subsystem(ctx context.Context, nqn string) (SubsystemStatus, error) {
	var v SubsystemStatus
	return v, c.call(ctx, routeSubsystem, nil, &v, nqn)
}

// RemoveSubsystem is DELETE /v1/subsystems/{nqn}.
func (c *Client) RemoveSubsystem(ctx context.Context, nqn string) (Result, error) {
	return c.change(ctx, routeRemoveSubsystem, nil, nqn)
}

// Namespaces is GET /v1/subsystems/{nqn}/namespaces.
func (c *Client) Namespaces(ctx context.Context, nqn string) ([]NamespaceStatus, error) {
	var v []NamespaceStatus
	return v, c.call(ctx, routeNamespaces, nil, &v, nqn)
}

// AddNamespace is POST /v1/subsystems/{nqn}/namespaces.
func (c *Client) AddNamespace(ctx context.Context, nqn string, req NamespaceRequest) (Result, error) {
	return c.change(ctx, routeAddNamespace, req, nqn)
}

// RemoveNamespace is DELETE /v1/subsystems/{nqn}/namespaces/{nsid}.
func (c *Client) RemoveNamespace(ctx context.Context, nqn string, nsid uint32) (Result, error) {
	return c.change(ctx, routeRemoveNamespace, nil, nqn, strconv.FormatUint(uint64(nsid), 10))
}

// ResizeNamespace is POST /v1/subsystems/{nqn}/namespaces/{nsid}/resize.
func (c *Client) ResizeNamespace(ctx context.Context, nqn string, nsid uint32, req ResizeRequest) (Result, error) {
	return c.change(ctx, routeResizeNamespace, req, nqn, strconv.FormatUint(uint64(nsid), 10))
}

// Hosts is GET /v1/subsystems/{nqn}/hosts.
func (c *Client) Hosts(ctx context.Context, nqn string) ([]HostInfo, error) {
	var v []HostInfo
	return v, c.call(ctx, routeHosts, nil, &v, nqn)
}

// AddHost is POST /v1/subsystems/{nqn}/hosts.
func (c *Client) AddHost(ctx context.Context, nqn string, req HostRequest) (Result, error) {
	return c.change(ctx, routeAddHost, req, nqn)
}

// SetHost is PUT /v1/subsystems/{nqn}/hosts/{host}, the host being
// req.NQN: it replaces the host's secrets.
func (c *Client) SetHost(ctx context.Context, nqn string, req HostRequest) (Result, error) {
	return c.change(ctx, routeSetHost, req, nqn, req.NQN)
}

// RemoveHost is DELETE /v1/subsystems/{nqn}/hosts/{host}.
func (c *Client) RemoveHost(ctx context.Context, nqn, host string) (Result, error) {
	return c.change(ctx, routeRemoveHost, nil, nqn, host)
}

// Ports is GET /v1/ports.
func (c *Client) Ports(ctx context.Context) ([]PortStatus, error) {
	var v []PortStatus
	return v, c.call(ctx, routePorts, nil, &v)
}

// AddPort is POST /v1/ports.
func (c *Client) AddPort(ctx context.Context, req PortRequest) (Result, error) {
	return c.change(ctx, routeAddPort, req)
}

// RemovePort is DELETE /v1/ports/{transport}/{address}/{port}.
func (c *Client) RemovePort(ctx context.Context, p PortRequest) (Result, error) {
	return c.change(ctx, routeRemovePort, nil, p.Transport, p.Address, strconv.Itoa(p.Port))
}

// PortANA is the ANA state of each group through a port, by group ID.
func (c *Client) PortANA(ctx context.Context, id int) (map[string]string, error) {
	var out map[string]string
	err := c.call(ctx, routePortANA, nil, &out, strconv.Itoa(id))
	return out, err
}

// SetANAState sets one ANA group's state through a port.
func (c *Client) SetANAState(ctx context.Context, id int, group string, state string) (Result, error) {
	return c.change(ctx, routeSetANAState, ANAStateRequest{State: state}, strconv.Itoa(id), group)
}

// SetSubsystemPorts sets the ports that serve a subsystem (none: every port).
func (c *Client) SetSubsystemPorts(ctx context.Context, nqn string, ports []int) (Result, error) {
	return c.change(ctx, routeSetSubPorts, SubsystemPortsRequest{Ports: ports}, nqn)
}

// SetANAGroup moves a namespace to another ANA group.
func (c *Client) SetANAGroup(ctx context.Context, nqn string, nsid, group uint32) (Result, error) {
	return c.change(ctx, routeSetANAGroup, ANAGroupRequest{ANAGroup: group}, nqn, strconv.FormatUint(uint64(nsid), 10))
}

// AddNamespaceHost shows a namespace to one more host (masking it to that
// host alone if it had no mask).
func (c *Client) AddNamespaceHost(ctx context.Context, nqn string, nsid uint32, host string) (Result, error) {
	return c.change(ctx, routeAddNSHost, NSHostRequest{NQN: host}, nqn, strconv.FormatUint(uint64(nsid), 10))
}

// RemoveNamespaceHost hides a namespace from a host of its mask.
func (c *Client) RemoveNamespaceHost(ctx context.Context, nqn string, nsid uint32, host string) (Result, error) {
	return c.change(ctx, routeRemoveNSHost, nil, nqn, strconv.FormatUint(uint64(nsid), 10), host)
}

// SetNamespaceQoS sets a namespace's limits, all hosts together.
func (c *Client) SetNamespaceQoS(ctx context.Context, nqn string, nsid uint32, req QoSRequest) (Result, error) {
	return c.change(ctx, routeSetNSQoS, req, nqn, strconv.FormatUint(uint64(nsid), 10))
}

// SetNamespaceHostQoS sets one host's limits on a namespace; host
// QoSDefaultHost sets those of every host without its own.
func (c *Client) SetNamespaceHostQoS(ctx context.Context, nqn string, nsid uint32, host string, req QoSRequest) (Result, error) {
	return c.change(ctx, routeSetNSHostQoS, req, nqn, strconv.FormatUint(uint64(nsid), 10), host)
}

// RemoveNamespaceHostQoS removes a host's own limits on a namespace (or,
// for QoSDefaultHost, the default).
func (c *Client) RemoveNamespaceHostQoS(ctx context.Context, nqn string, nsid uint32, host string) (Result, error) {
	return c.change(ctx, routeRemoveNSHostQoS, nil, nqn, strconv.FormatUint(uint64(nsid), 10), host)
}

// FenceGateway fences a dead gateway of the group on the operator's word.
func (c *Client) FenceGateway(ctx context.Context, id int) (Result, error) {
	return c.change(ctx, routeFenceGateway, nil, strconv.Itoa(id))
}

// change makes a change and returns its Result.
func (c *Client) change(ctx context.Context, r route, in any, args ...string) (Result, error) {
	var res Result
	return res, c.call(ctx, r, in, &res, args...)
}

// call sends in (as JSON, when not nil) to the route filled with args, and
// decodes a success into out; a *[]byte gets the body as sent.
func (c *Client) call(ctx context.Context, r route, in, out any, args ...string) error {
	path := r.url(args...)
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: %w", r.method, path, err)
		}
		body = bytes.NewReader(b)
	}
	// The host is unused on a Unix socket; "localhost" is what curl
	// --unix-socket examples use too.
	req, err := http.NewRequestWithContext(ctx, r.method, "http://localhost"+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", r.method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *UnreachableError
		if errors.As(err, &ue) {
			return ue
		}
		var uerr *url.Error // which repeats the method and URL
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("%s %s: %w", r.method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", r.method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Code: resp.StatusCode}
		if json.Unmarshal(raw, &e.ErrorResponse) != nil || e.ErrorResponse.Error == "" {
			e.ErrorResponse = ErrorResponse{Error: fmt.Sprintf("%s %s: %s", r.method, path, resp.Status)}
		}
		return e
	}
	if b, ok := out.(*[]byte); ok {
		*b = raw
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: %w", r.method, path, err)
	}
	return nil
}
