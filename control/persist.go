package control

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/internal/atomicfile"
)

// persist writes the running configuration to the file serve was started
// with, replacing it atomically and keeping the previous one as FILE.bak.
// Keys that take effect only at the next start are written as the file
// last had them. A file edited since the target last loaded or wrote it is
// left alone (ErrEdited): the edit would be lost, and FILE.bak with it.
// Comments in the file are not kept. m.mu is held.
func (m *Manager) persist() error {
	if m.path == "" {
		return nil
	}
	old, err := m.unedited()
	if err != nil {
		return err
	}
	src := m.running
	if m.gw != nil {
		src = m.local // the gateway's own part; the group keeps the rest
	}
	saved := withRestartKeys(src, m.file)
	data, err := config.Marshal(saved)
	if err != nil {
		return err
	}
	data = append([]byte("# Written by nvmeof-tgt with the running configuration; the previous file is\n# kept as "+filepath.Base(m.path)+".bak.\n"), data...)
	if err := writeAtomic(m.path+".bak", old, true); err != nil {
		return err
	}
	// A file with secrets inline is kept private: serve refuses it otherwise.
	err = writeAtomic(m.path, data, saved.HasInlineSecrets())
	if err != nil {
		// Syncing the directory may fail after the rename: the file
		// is the new one all the same.
		if now, rerr := os.ReadFile(m.path); rerr != nil || !bytes.Equal(now, data) {
			return err
		}
	}
	m.file, m.sum = saved, sha256.Sum256(data)
	return err
}

// ErrEdited refuses an API change while the configuration file is not what
// the target last loaded or wrote: rewriting it would lose an edit made by
// hand, which a reload applies.
var ErrEdited = errors.New("changed since the target last loaded or wrote it")

// unedited returns the content of the configuration file, or ErrEdited if
// it is not what the target last loaded or wrote. m.mu is held.
func (m *Manager) unedited() ([]byte, error) {
	data, err := os.ReadFile(m.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s %w: it was removed; restore it (`nvmeof-tgt config save` prints the running configuration)", m.path, ErrEdited)
	case err != nil:
		return nil, err
	case sha256.Sum256(data) != m.sum:
		return nil, fmt.Errorf("%s %w (edited by hand?): run `nvmeof-tgt reload` first to apply the edit, then make the change again", m.path, ErrEdited)
	}
	return data, nil
}

// writeAtomic replaces path with data so that a crash at any point leaves
// either the old file or the new one, never a torn one. The file keeps its
// mode (0600 when new); private takes group and other access away.
func writeAtomic(path string, data []byte, private bool) error {
	mode := os.FileMode(0o600)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	if private {
		mode &^= 0o077
	}
	return atomicfile.Write(path, data, mode)
}
