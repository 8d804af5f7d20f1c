package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/control"
)

// apiTimeout bounds one request: a change that opens or grows a large file
// takes a while, but a target that never answers must not hang a script.
const apiTimeout = 2 * time.Minute

// apiClient calls the management API (docs/api.md) on its Unix socket.
type apiClient struct {
	socket string
	hc     *http.Client
}

func newAPIClient(socket string) *apiClient {
	var d net.Dialer
	return &apiClient{socket: socket, hc: &http.Client{
		Timeout: apiTimeout,
		// The API sends no redirect; following one re-sends a change
		// to another resource.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			return fmt.Errorf("the target answered with a redirect to %s; not followed", req.URL.Path)
		},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := d.DialContext(ctx, "unix", socket)
			if err != nil {
				return nil, &unreachableError{socket: socket, err: err}
			}
			return c, nil
		}},
	}}
}

// unreachableError is a socket that is missing, refuses, or is not ours
// to use.
type unreachableError struct {
	socket string
	err    error
}

func (e *unreachableError) Error() string {
	if errors.Is(e.err, os.ErrPermission) {
		return fmt.Sprintf("cannot reach the target at %s: permission denied (the socket is root's)", e.socket)
	}
	return fmt.Sprintf("cannot reach the target at %s: is nvmeof-tgt serve running?", e.socket)
}

func (e *unreachableError) Unwrap() error { return e.err }

// apiError is an error the API answered with.
type apiError struct {
	code int
	body []byte // the JSON as sent, for --json
	control.ErrorResponse
}

func (e *apiError) Error() string { return e.ErrorResponse.Error }

// do sends in (JSON, when not nil) and returns the body of a 2xx answer.
// Any other answer is an *apiError.
func (c *apiClient) do(ctx context.Context, method, path string, in any) ([]byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	// The host is unused on a Unix socket; "localhost" is what curl
	// --unix-socket examples use too.
	req, err := http.NewRequestWithContext(ctx, method, "http://localhost"+path, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *unreachableError
		if errors.As(err, &ue) {
			return nil, ue
		}
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 == 2 {
		return out, nil
	}
	e := &apiError{code: resp.StatusCode, body: out}
	if json.Unmarshal(out, &e.ErrorResponse) != nil || e.ErrorResponse.Error == "" {
		e.ErrorResponse.Error = fmt.Sprintf("%s %s: %s", method, path, resp.Status)
	}
	return nil, e
}

// get decodes the answer to a GET into v and returns it as sent.
func (c *apiClient) get(ctx context.Context, path string, v any) ([]byte, error) {
	raw, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	if v != nil {
		if err := json.Unmarshal(raw, v); err != nil {
			return nil, fmt.Errorf("GET %s: %w", path, err)
		}
	}
	return raw, nil
}
