package config

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"syscall"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme/dhchap"
)

// Host is an entry of a hosts list: a host NQN, written alone, or a map
// that also carries the host's DH-HMAC-CHAP secrets:
//
//	hosts:
//	  - nqn.2014-08.org.nvmexpress:uuid:...                  # no authentication
//	  - {nqn: ..., dhchap_key: "DHHC-1:01:...:"}             # the host authenticates
//	  - {nqn: ..., dhchap_key_file: /etc/nvmeof-tgt/h2.key,  # and the controller too
//	     dhchap_ctrl_key_file: /etc/nvmeof-tgt/h2.ctrl.key}
//
// A secret is given inline or in a file (its first line), not both. Files
// holding secrets, this configuration too when it has them inline, must
// not be readable by group or others.
type Host struct {
	NQN               string `mapstructure:"nqn"`
	DHCHAPKey         string `mapstructure:"dhchap_key"`
	DHCHAPKeyFile     string `mapstructure:"dhchap_key_file"`
	DHCHAPCtrlKey     string `mapstructure:"dhchap_ctrl_key"`
	DHCHAPCtrlKeyFile string `mapstructure:"dhchap_ctrl_key_file"`
}

// Discovery configures the discovery subsystem: it is open to every host,
// and the hosts listed here with a key must authenticate to it.
type Discovery struct {
	Hosts []Host `mapstructure:"hosts"`
}

var hostType = reflect.TypeFor[Host]()

// Redacted is a copy of c with every inline secret replaced, for showing
// the configuration (files named stay named).
func (c *Config) Redacted() *Config {
	d := c.Clone()
	red := func(hosts []Host) {
		for i := range hosts {
			if hosts[i].DHCHAPKey != "" {
				hosts[i].DHCHAPKey = "<redacted>"
			}
			if hosts[i].DHCHAPCtrlKey != "" {
				hosts[i].DHCHAPCtrlKey = "<redacted>"
			}
		}
	}
	for i := range d.Subsystems {
		red(d.Subsystems[i].Hosts)
	}
	red(d.Discovery.Hosts)
	return d
}

// HostNQNs lists the NQNs of hosts.
func HostNQNs(hosts []Host) []string {
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = h.NQN
	}
	return out
}

// FindHost returns the entry of nqn in hosts, or nil.
func FindHost(hosts []Host, nqn string) *Host {
	for i := range hosts {
		if hosts[i].NQN == nqn {
			return &hosts[i]
		}
	}
	return nil
}

// HasSecret reports whether the entry carries a key, inline or in a file.
func (h Host) HasSecret() bool {
	return h.DHCHAPKey != "" || h.DHCHAPKeyFile != "" || h.DHCHAPCtrlKey != "" || h.DHCHAPCtrlKeyFile != ""
}

// HasSecretFile reports whether a secret is read from a file, whose content
// may change while the entry does not.
func (h Host) HasSecretFile() bool { return h.DHCHAPKeyFile != "" || h.DHCHAPCtrlKeyFile != "" }

// inlineSecret reports whether the entry holds a secret in the file itself.
func (h Host) inlineSecret() bool { return h.DHCHAPKey != "" || h.DHCHAPCtrlKey != "" }

// HasInlineSecrets reports whether the configuration holds a secret
// itself, so that its file must be private.
func (c *Config) HasInlineSecrets() bool {
	for _, s := range c.Subsystems {
		for _, h := range s.Hosts {
			if h.inlineSecret() {
				return true
			}
		}
	}
	for _, h := range c.Discovery.Hosts {
		if h.inlineSecret() {
			return true
		}
	}
	return false
}

// check is Validate's part of a host entry: forms and combinations, without
// reading files. Messages never hold a secret.
func (h Host) check(p *problems, k string) {
	both := func(inline, file, key string) {
		if inline != "" && file != "" {
			p.add(k+"."+key, "given inline and as %s_file: set one", key)
		}
		if inline != "" {
			if _, err := dhchap.ParseSecret(inline); err != nil {
				p.add(k+"."+key, "%v", err)
			}
		}
		if file != "" && !strings.HasPrefix(file, "/") {
			p.add(k+"."+key+"_file", "%q: want an absolute path", file)
		}
	}
	both(h.DHCHAPKey, h.DHCHAPKeyFile, "dhchap_key")
	both(h.DHCHAPCtrlKey, h.DHCHAPCtrlKeyFile, "dhchap_ctrl_key")
	if (h.DHCHAPCtrlKey != "" || h.DHCHAPCtrlKeyFile != "") && h.DHCHAPKey == "" && h.DHCHAPKeyFile == "" {
		p.add(k+".dhchap_ctrl_key", "a controller key needs a host key: the host authenticates first")
	}
}

// Secrets reads the entry's secrets, from files where given: zero
// secrets where it has none.
func (h Host) Secrets() (key, ctrlKey dhchap.Secret, err error) {
	if key, err = readSecret(h.DHCHAPKey, h.DHCHAPKeyFile); err != nil {
		return key, ctrlKey, fmt.Errorf("host %s dhchap_key: %w", h.NQN, err)
	}
	if ctrlKey, err = readSecret(h.DHCHAPCtrlKey, h.DHCHAPCtrlKeyFile); err != nil {
		return key, ctrlKey, fmt.Errorf("host %s dhchap_ctrl_key: %w", h.NQN, err)
	}
	return key, ctrlKey, nil
}

func readSecret(inline, file string) (dhchap.Secret, error) {
	if file != "" {
		b, err := readPrivate(file)
		if err != nil {
			return dhchap.Secret{}, err
		}
		inline, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
		s, err := dhchap.ParseSecret(strings.TrimSpace(inline))
		if err != nil {
			return dhchap.Secret{}, fmt.Errorf("%s: %w", file, err)
		}
		return s, nil
	}
	if inline == "" {
		return dhchap.Secret{}, nil
	}
	return dhchap.ParseSecret(inline)
}

// CheckPrivate refuses a file holding secrets that group or others may
// read or write, or that another user owns (and so may rewrite): the
// owner must be the target's effective user or root.
func CheckPrivate(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return checkPrivate(path, st)
}

// readPrivate reads a file holding secrets, checked as CheckPrivate does
// on the file opened, so that what is checked is what is read. The path
// may come from a gateway group's state, which whoever writes the pool
// controls, and is read as root under the manager's lock: it must name a
// regular file of at most limits.SecretFileMax bytes. Symlinks are
// followed, to such a file only (a Kubernetes Secret volume projects each
// key as a symlink): what they lead to is checked, not the link.
func readPrivate(path string) ([]byte, error) {
	// Stat first: a FIFO, a device node or a socket is refused without
	// being opened (a FIFO's open waits for a writer, a device's open
	// acts on the device).
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%v)", path, st.Mode().Type())
	}
	// Should it have become a FIFO or a terminal since, O_NONBLOCK and
	// O_NOCTTY keep the open from waiting or taking it; fstat then checks
	// what was opened.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fst, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fst.Mode().IsRegular() || !os.SameFile(st, fst) {
		return nil, fmt.Errorf("%s is not a regular file (%v), or changed while opened", path, fst.Mode().Type())
	}
	if err := checkPrivate(path, fst); err != nil {
		return nil, err
	}
	tooLarge := fmt.Errorf("%s is larger than %d bytes: a key file holds one secret", path, limits.SecretFileMax)
	if fst.Size() > limits.SecretFileMax {
		return nil, tooLarge
	}
	// A size is not a bound: procfs files say 0 and read on.
	b, err := io.ReadAll(io.LimitReader(f, limits.SecretFileMax+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limits.SecretFileMax {
		return nil, tooLarge
	}
	return b, nil
}

func checkPrivate(path string, st fs.FileInfo) error {
	if m := st.Mode().Perm(); m&0o077 != 0 {
		return fmt.Errorf("%s holds secrets and is mode %04o: allow the owner only (chmod 600)", path, m)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		if euid := uint32(os.Geteuid()); sys.Uid != euid && sys.Uid != 0 {
			return fmt.Errorf("%s holds secrets and is owned by uid %d, not by the target's user (uid %d) or root: chown it", path, sys.Uid, euid)
		}
	}
	return nil
}

// AuthNames reads the subsystem's allowed hashes and DH groups, most
// preferred first; none: every one.
func (s Subsystem) AuthNames() ([]dhchap.Hash, []dhchap.Group, error) {
	var hs []dhchap.Hash
	var gs []dhchap.Group
	for _, n := range s.DHCHAPHashes {
		h, err := dhchap.ParseHash(n)
		if err != nil {
			return nil, nil, err
		}
		hs = append(hs, h)
	}
	for _, n := range s.DHCHAPDHGroups {
		if n == "" {
			n = dhchap.Null.String() // YAML reads a bare null as nothing
		}
		g, err := dhchap.ParseGroup(n)
		if err != nil {
			return nil, nil, err
		}
		gs = append(gs, g)
	}
	return hs, gs, nil
}
