//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAuth: DH-HMAC-CHAP with the Linux host (nvme connect --dhchap-secret,
// --dhchap-ctrl-secret), configured by a reload of the target's file. Every
// hash and the groups null, ffdhe2048 and ffdhe4096 are negotiated, as the
// host's log confirms (sha384 with ffdhe2048, bidirectional, over NVMe/TCP:
// the admin and the I/O queues authenticate over TCP); wrong or missing keys
// are refused; discovery authenticates too; a key rotated by the API applies
// to the next connect.
func TestAuth(t *testing.T) {
	requireTgt(t, "keys reloaded from nvmeof-tgt's file and rotated through its API (TestAuthPeer runs the kernel target)")
	requireNVMeTCP(t)
	h, other := newHost(t), newHost(t)
	base := nqn("auth-base")
	p, dir := startTgt(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{{
		NQN: base, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 16*mib, 0, "")},
	}}})
	hostKey := genKey(t, 1, h.NQN)
	ctrlKey := genKey(t, 3, h.NQN)
	wrongKey := genKey(t, 1, h.NQN)
	keyFile := filepath.Join(dir, "h.key")
	if err := os.WriteFile(keyFile, []byte(hostKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	type sub struct {
		name, hash, group string
		bidi              bool
		transport         string
	}
	subs := []sub{
		{nqn("auth-sha256"), "sha256", "null", false, "rdma"},
		{nqn("auth-sha384"), "sha384", "ffdhe2048", true, "tcp"},
		{nqn("auth-sha512"), "sha512", "null", false, "rdma"},
		{nqn("auth-ffdhe4096"), "sha512", "ffdhe4096", true, "rdma"},
	}
	portOf := map[string]int{"rdma": portRDMA, "tcp": portTCP}
	saved, err := os.ReadFile(p.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(saved), "subsystems:\n",
		fmt.Sprintf("  - {transport: \"tcp\", address: %q, port: %d}\nsubsystems:\n", labAddr, portTCP), 1)
	for _, s := range subs {
		entry := fmt.Sprintf("{nqn: %q, dhchap_key_file: %q}", h.NQN, keyFile)
		if s.bidi {
			entry = fmt.Sprintf("{nqn: %q, dhchap_key: %q, dhchap_ctrl_key: %q}", h.NQN, hostKey, ctrlKey)
		}
		cfg = withSubsystem(t, cfg, fmt.Sprintf("{nqn: %q, hosts: [%s, %q], dhchap_hashes: [%s], dhchap_dhgroups: [%q], namespaces: [{nsid: 1, backend: memory, size: 16MiB}]}",
			s.name, entry, other.NQN, s.hash, s.group))
	}
	cfg += fmt.Sprintf("\ndiscovery:\n  hosts:\n    - {nqn: %q, dhchap_key: %q}\n", h.NQN, hostKey)

	// A file with secrets inline that others can read is refused whole.
	if err := os.WriteFile(p.cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p.cfgPath, 0o644); err != nil { // WriteFile keeps an existing file's mode
		t.Fatal(err)
	}
	if out, err := p.ctlErr("reload"); err == nil || !strings.Contains(string(out)+err.Error(), "chmod 600") {
		t.Fatalf("reload of a world-readable file with secrets: %v\n%s", err, out)
	}
	if err := os.Chmod(p.cfgPath, 0o600); err != nil {
		t.Fatal(err)
	}
	p.ctl(t, "reload")
	if b, _ := os.ReadFile(p.logPath); strings.Contains(string(b), hostKey[10:30]) || strings.Contains(string(b), ctrlKey[10:30]) {
		t.Fatal("a secret is in the target's log")
	}

	// ffdhe4096 goes last: the host's DH is slowest there under emulation.
	connectCase := func(s sub) {
		t.Run(s.hash+"-"+s.group+"-"+s.transport, func(t *testing.T) {
			flags := []string{"--dhchap-secret=" + hostKey}
			if s.bidi {
				flags = append(flags, "--dhchap-ctrl-secret="+ctrlKey)
			}
			connect := func(h host, flags ...string) (*controller, error) {
				return h.connectOver(t, s.transport, s.name, portOf[s.transport], flags...)
			}
			before := dmesgText(t)
			c, err := connect(h, flags...)
			if err != nil {
				t.Fatalf("connect with the right key: %v", err)
			}
			dev := c.blockDev(t, 1)
			want := fmt.Sprintf("qid 0: authenticated with hash hmac(%s) dhgroup %s", s.hash, s.group)
			if log := strings.TrimPrefix(dmesgText(t), before); !strings.Contains(log, want) {
				t.Fatalf("host log lacks %q:\n%s", want, log)
			}
			if s.bidi && !strings.Contains(strings.TrimPrefix(dmesgText(t), before), "qid 0: controller authenticated") {
				t.Fatal("the host did not authenticate the controller")
			}
			runFio(t, dev, dir, fioCase{rw: "randwrite", bs: 4096, iodepth: 8, size: 4 * mib})
			c.disconnect(t)

			refused := func(what string, flags ...string) {
				t.Helper()
				if c, err := connect(h, flags...); err == nil {
					t.Fatalf("%s: connected as %s", what, c.name)
				}
			}
			refused("wrong host key", "--dhchap-secret="+wrongKey)
			refused("no key")
			if s.bidi {
				before := dmesgText(t)
				refused("wrong controller key", "--dhchap-secret="+hostKey, "--dhchap-ctrl-secret="+genKey(t, 3, h.NQN))
				if log := strings.TrimPrefix(dmesgText(t), before); !strings.Contains(log, "qid 0: controller authentication failed") {
					t.Fatalf("with a wrong controller key the host did not refuse the controller:\n%s", log)
				}
			}
			// A host without a key on the subsystem connects without one.
			oc, err := connect(other)
			if err != nil {
				t.Fatalf("a host without a key: %v", err)
			}
			oc.blockDev(t, 1)
			oc.disconnect(t)
		})
	}
	for _, s := range subs[:len(subs)-1] {
		connectCase(s)
	}

	// nvme-cli (libnvme) never hands a DH-HMAC-CHAP secret to a discovery controller, with
	// discover or with connect (libnvme's build_options adds dhchap_secret only when not
	// discovering), so the host would fail with "no key". The test writes the options to
	// /dev/nvme-fabrics itself, as libnvme does, with the secret, and reads the log through the
	// discovery controller that makes.
	t.Run("discovery", func(t *testing.T) {
		before := dmesgText(t)
		name, err := h.fabricsConnect(discoveryNQN, "dhchap_secret="+hostKey)
		if err != nil {
			t.Fatalf("discovery controller with the key: %v", err)
		}
		t.Cleanup(func() { _ = writeAttr("/sys/class/nvme/"+name+"/delete_controller", "1") })
		if log := strings.TrimPrefix(dmesgText(t), before); !strings.Contains(log, name+": qid 0: authenticated") {
			t.Fatalf("the host did not authenticate to the discovery controller:\n%s", log)
		}
		var log discoveryLog
		nvmeJSON(t, &log, "discover", "-d", name, "-o", "json")
		if !slices.ContainsFunc(log.Records, func(r discoveryRecord) bool { return r.Subnqn == subs[0].name }) {
			t.Fatalf("discovery with the key lists %+v", log.Records)
		}
		if err := writeAttr("/sys/class/nvme/"+name+"/delete_controller", "1"); err != nil {
			t.Fatal(err)
		}
		if name, err := h.fabricsConnect(discoveryNQN, "dhchap_secret="+wrongKey); err == nil {
			_ = writeAttr("/sys/class/nvme/"+name+"/delete_controller", "1")
			t.Fatalf("discovery controller with a wrong key: made %s", name)
		}
		args := append([]string{"discover"}, fabricFlags()...)
		if r := run(t, connectTimeout, "nvme", append(args, h.flags()...)...); r.err == nil {
			t.Fatal("discovery without a key succeeded for a host that must authenticate")
		}
		other.discover(t) // hosts not listed discover without a key
	})

	t.Run("rotation", func(t *testing.T) {
		newKey := genKey(t, 2, h.NQN)
		body := fmt.Sprintf(`{"dhchap_key": %q}`, newKey)
		out := mustRun(t, cmdTimeout, "curl", "-sS", "-f", "--unix-socket", p.apiSock, "-X", "PUT", "-d", body,
			"http://localhost/v1/subsystems/"+subs[0].name+"/hosts/"+h.NQN)
		t.Logf("PUT host: %s", out)
		if strings.Contains(string(out), "DHHC-1") {
			t.Fatal("the API's answer shows a secret")
		}
		if c, err := h.connectWith(t, subs[0].name, portRDMA, "--dhchap-secret="+hostKey); err == nil {
			t.Fatalf("the old key still connects after rotation (%s)", c.name)
		}
		c, err := h.connectWith(t, subs[0].name, portRDMA, "--dhchap-secret="+newKey)
		if err != nil {
			t.Fatalf("connect with the rotated key: %v", err)
		}
		c.disconnect(t)
		// Saved to the file, which stays private.
		if st, err := os.Stat(p.cfgPath); err != nil || st.Mode().Perm()&0o077 != 0 {
			t.Fatalf("config file after rotation: %v %v", st, err)
		}
		if out := mustRun(t, cmdTimeout, "curl", "-sS", "--unix-socket", p.apiSock, "http://localhost/v1/config"); strings.Contains(string(out), "DHHC-1") {
			t.Fatal("GET /v1/config shows a secret")
		}
	})

	connectCase(subs[len(subs)-1])

	m := scrapeMetrics(t)
	ok, _ := metricSum(m, "nvmeof_tgt_auth_total", `result="success"`)
	bad, _ := metricSum(m, "nvmeof_tgt_auth_total", `result="failure"`)
	t.Logf("authentications: %v succeeded, %v failed", ok, bad)
	if ok < 7 || bad < 7 {
		t.Fatalf("nvmeof_tgt_auth_total success %v failure %v", ok, bad)
	}
}

// TestAuthPeer runs the same DH-HMAC-CHAP cases against nvmeof-tgt and against the kernel's
// nvmet (E2E_TARGET=kernel), configured at start: the kernel target is the reference peer, so
// a case that fails on both is the host's or the test's, not nvmeof-tgt's. Each case: the
// right keys connect, the host's log names the negotiated hash and group, and data written is
// read back; a wrong host key is refused; a wrong controller key makes the host refuse the
// target.
func TestAuthPeer(t *testing.T) {
	type authCase struct {
		name, hash, group string
		bidi              bool
	}
	cases := []authCase{
		{"sha384-ffdhe2048-bidi", "sha384", "ffdhe2048", true},
		{"sha256-ffdhe3072", "sha256", "ffdhe3072", false},
		{"sha512-ffdhe4096-bidi", "sha512", "ffdhe4096", true},
	}
	spec := Spec{Port: rdmaPort()}
	hosts := make([]host, len(cases))
	for i, c := range cases {
		// nvmet keeps a host's hash and group on the host, not the subsystem: a host per case.
		hosts[i] = newHost(t)
		a := HostAuth{Key: genKey(t, 1, hosts[i].NQN), Hash: c.hash, DHGroup: c.group}
		if c.bidi {
			a.CtrlKey = genKey(t, 2, hosts[i].NQN)
		}
		spec.Subsystems = append(spec.Subsystems, Subsystem{NQN: nqn("authpeer-" + c.name),
			Hosts: []string{hosts[i].NQN}, Auth: map[string]HostAuth{hosts[i].NQN: a},
			Namespaces: []Namespace{memNS(1, 16*mib, 0, "")}})
	}
	startTarget(t, spec)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, sub := hosts[i], spec.Subsystems[i]
			a := sub.Auth[h.NQN]
			flags := []string{"--dhchap-secret=" + a.Key}
			if c.bidi {
				flags = append(flags, "--dhchap-ctrl-secret="+a.CtrlKey)
			}
			before := dmesgText(t)
			start := time.Now()
			ctrl, err := h.connectWith(t, sub.NQN, portRDMA, flags...)
			if err != nil {
				t.Fatalf("connect with the right keys: %v", err)
			}
			t.Logf("connected with %s/%s in %v", c.hash, c.group, time.Since(start).Round(time.Millisecond))
			log := strings.TrimPrefix(dmesgText(t), before)
			want := fmt.Sprintf("qid 0: authenticated with hash hmac(%s) dhgroup %s", c.hash, c.group)
			if !strings.Contains(log, want) {
				t.Fatalf("host log lacks %q:\n%s", want, log)
			}
			if c.bidi && !strings.Contains(log, "qid 0: controller authenticated") {
				t.Fatal("the host did not authenticate the controller")
			}
			capWriteRead(t, ctrl, uint64(i))
			ctrl.disconnect(t)

			// Seen in the guest with ffdhe2048, 3072 and 4096, not every time: after nvmet fails
			// the transaction it tears the controller down at once ("ctrl 1 fatal error
			// occurred"), and the 6.12 host's nvme connect hangs in its authentication work for
			// over 6 minutes (hung task in nvme_auth_wait). nvmeof-tgt answers Failure1 and
			// leaves the queue to the host, which refuses the same keys in under a second.
			requireTgt(t, "wrong keys", "a host hang")
			if c, err := h.connectWith(t, sub.NQN, portRDMA, "--dhchap-secret="+genKey(t, 1, h.NQN)); err == nil {
				t.Fatalf("a wrong host key connected as %s", c.name)
			}
			if c.bidi {
				wrong := []string{"--dhchap-secret=" + a.Key, "--dhchap-ctrl-secret=" + genKey(t, 2, h.NQN)}
				before := dmesgText(t)
				if c, err := h.connectWith(t, sub.NQN, portRDMA, wrong...); err == nil {
					t.Fatalf("a wrong controller key connected as %s", c.name)
				}
				if log := strings.TrimPrefix(dmesgText(t), before); !strings.Contains(log, "qid 0: controller authentication failed") {
					t.Fatalf("with a wrong controller key the host did not refuse the controller:\n%s", log)
				}
			}
		})
	}
}

// fabricsConnect creates a controller as nvme-cli does underneath, by writing its options to
// /dev/nvme-fabrics, with extra options ("dhchap_secret=..."); it returns the controller's name.
func (h host) fabricsConnect(subnqn string, extra ...string) (string, error) {
	opts := append([]string{"transport=rdma", "traddr=" + labAddr, "trsvcid=" + strconv.Itoa(portRDMA),
		"nqn=" + subnqn, "hostnqn=" + h.NQN, "hostid=" + h.ID}, extra...)
	f, err := os.OpenFile("/dev/nvme-fabrics", os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Write([]byte(strings.Join(opts, ","))); err != nil {
		return "", fmt.Errorf("write /dev/nvme-fabrics: %w", err)
	}
	b := make([]byte, 128)
	n, err := f.Read(b)
	if err != nil {
		return "", fmt.Errorf("read /dev/nvme-fabrics: %w", err)
	}
	// "instance=N,cntlid=M"
	inst, _, _ := strings.Cut(strings.TrimSpace(string(b[:n])), ",")
	num, ok := strings.CutPrefix(inst, "instance=")
	if !ok {
		return "", fmt.Errorf("/dev/nvme-fabrics answered %q", b[:n])
	}
	return "nvme" + num, nil
}
