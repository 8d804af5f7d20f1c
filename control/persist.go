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
	saved := withRestartKeys(m.running, m.file)
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

// crashPoint, in tests, stops writeAtomic at a named point as a crash
// would: nothing after it happens, not even cleanup.
var crashPoint = func(path, point string) bool { return false }

// writeAtomic replaces path with data so that a crash at any point leaves
// either the old file or the new one, never a torn one: the data goes to a
// temporary file in the same directory, is synced, renamed over path, and
// the directory is synced so that the rename itself is durable.
func writeAtomic(path string, data []byte, private bool) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	mode := os.FileMode(0o600)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	if private {
		mode &^= 0o077
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	crashed := false
	defer func() {
		if err != nil && !crashed {
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if crashed = crashPoint(path, "written"); crashed {
		tmp.Close()
		return fmt.Errorf("crash injected after writing %s", tmp.Name())
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if crashed = crashPoint(path, "synced"); crashed {
		return fmt.Errorf("crash injected before renaming %s", tmp.Name())
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp.Name(), err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
