package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a log sink the API server's goroutines write to while
// the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// records are the log lines with message msg.
func (l *lockedBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// TestAuditLog: every change through the API socket, applied or refused,
// and every reload, is logged once with who asked for it (the peer
// process from SO_PEERCRED: here the test itself) and never a secret.
func TestAuditLog(t *testing.T) {
	var logBuf lockedBuffer
	b := newBench(t, baseYAML)
	b.m.log = slog.New(slog.NewJSONHandler(&logBuf, nil))

	sock := filepath.Join(shortDir(t), "api.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: b.m.Handler(), ConnContext: ConnContext}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	send := func(method, path, body string, want int) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d, want %d", method, path, resp.StatusCode, want)
		}
	}
	const key = "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"
	nsPath := "/v1/subsystems/" + subA + "/namespaces"
	hostPath := "/v1/subsystems/" + subA + "/hosts/" + hst1
	send("POST", nsPath, `{"nsid": 3, "backend": "memory", "size": "1MiB"}`, 201)
	send("PUT", hostPath, `{"dhchap_key": "`+key+`"}`, 200)
	send("POST", nsPath, `{"nsid": 3, "backend": "memory", "size": "1MiB"}`, 409)
	send("POST", "/v1/reload", "", 200)
	if _, err := b.m.Reload(Caller{Source: "signal"}); err != nil {
		t.Fatal(err)
	}

	uid, pid := float64(os.Getuid()), float64(os.Getpid())
	fromAPI := func(r map[string]any, method, path string) bool {
		return r["source"] == "api" && r["uid"] == uid && r["pid"] == pid && r["method"] == method && r["path"] == path
	}
	changed := logBuf.records(t, "configuration changed")
	if len(changed) != 2 || !fromAPI(changed[0], "POST", nsPath) || !fromAPI(changed[1], "PUT", hostPath) ||
		!strings.Contains(changed[0]["applied"].([]any)[0].(string), "add namespace 3 to "+subA) || changed[0]["persisted"] != true {
		t.Fatalf("applied changes logged as %v", changed)
	}
	refused := logBuf.records(t, "change failed: the running configuration stays")
	if len(refused) != 1 || !fromAPI(refused[0], "POST", nsPath) || !strings.Contains(refused[0]["err"].(string), "already exists") ||
		refused[0]["level"] != "WARN" {
		t.Fatalf("refused change logged as %v", refused)
	}
	reloaded := logBuf.records(t, "configuration reloaded")
	if len(reloaded) != 2 || !fromAPI(reloaded[0], "POST", "/v1/reload") ||
		reloaded[1]["source"] != "signal" || reloaded[1]["uid"] != nil {
		t.Fatalf("reloads logged as %v", reloaded)
	}
	if log := logBuf.String(); strings.Contains(log, key) || strings.Contains(log, key[10:40]) {
		t.Fatalf("a secret is in the log:\n%s", log)
	}
}
