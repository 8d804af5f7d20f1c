package tcp

import (
	"bytes"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme/dhchap"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp/tcptest"
)

func secret(t *testing.T, fill byte) dhchap.Secret {
	t.Helper()
	s, err := dhchap.NewSecret(dhchap.SHA256, bytes.Repeat([]byte{fill}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDHCHAP: in-band authentication over TCP, as over RDMA (the protocol
// is fabric's, its DH computations in fabric's pool, the response handed
// to the connection from there): the admin and the I/O queue authenticate,
// bidirectionally, with an FFDHE group, before any other command; a host
// with the wrong key is refused.
func TestDHCHAP(t *testing.T) {
	const authNQN = "nqn.2026-11.io.example:auth"
	r := newRig(t, Config{}, fabric.Options{})
	key, ctrlKey := secret(t, 0x11), secret(t, 0x22)
	sub, err := r.tgt.AddSubsystem(fabric.SubsystemConfig{NQN: authNQN, Hosts: []string{testHostNQN},
		HostAuth: map[string]fabric.HostAuth{testHostNQN: {Key: key, CtrlKey: ctrlKey}}})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := blockdev.NewMemory(1<<20, 512)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.AddNamespace(fabric.NamespaceConfig{NSID: 1, Device: dev}); err != nil {
		t.Fatal(err)
	}
	auth := tcptest.Auth{HostNQN: testHostNQN, SubNQN: authNQN, Key: key, CtrlKey: ctrlKey, Groups: []byte{1}}

	a := r.dial(t, tcptest.Options{})
	rsp, err := a.Connect(0, 31, 0, 0, authNQN, testHostNQN, testHostID, nvme.CNTLIDDynamic)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Enable(); err == nil {
		t.Fatal("CC.EN taken before authentication")
	}
	if why, err := a.Authenticate(auth); err != nil || why != 0 {
		t.Fatalf("admin queue: failure %d, %v", why, err)
	}
	if err := a.Enable(); err != nil {
		t.Fatal(err)
	}
	io := r.dial(t, tcptest.Options{HeaderDigest: true, DataDigest: true})
	if _, err := io.Connect(1, 63, 0, 0, authNQN, testHostNQN, testHostID, nvme.CNTLID(rsp.DW0())); err != nil {
		t.Fatal(err)
	}
	auth.TID = 1
	if why, err := io.Authenticate(auth); err != nil || why != 0 {
		t.Fatalf("I/O queue: failure %d, %v", why, err)
	}
	data := bytes.Repeat([]byte{0x5a}, 8192)
	if rsp, err := io.Do(tcptest.IO(nvme.OpWrite, 1, 1, 0, 16), data, true, false); err != nil || !rsp.Status().IsSuccess() {
		t.Fatalf("write: %v %v", err, rsp.Status())
	}

	bad := r.dial(t, tcptest.Options{})
	if _, err := bad.Connect(0, 31, 0, 0, authNQN, testHostNQN, testHostID, nvme.CNTLIDDynamic); err != nil {
		t.Fatal(err)
	}
	wrong := auth
	wrong.Key, wrong.CtrlKey = secret(t, 0x33), dhchap.Secret{}
	if why, err := bad.Authenticate(wrong); err != nil || why != nvme.AuthFailFailed {
		t.Fatalf("wrong key: failure %d, %v; want %d", why, err, nvme.AuthFailFailed)
	}
	if st := r.tgt.Stats(); st.AuthSucceeded != 2 || st.AuthFailed != 1 {
		t.Errorf("authentications: %d succeeded, %d failed", st.AuthSucceeded, st.AuthFailed)
	}
}
