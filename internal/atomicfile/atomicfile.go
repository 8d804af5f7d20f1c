// Package atomicfile replaces files so that a crash at any point leaves
// either the old file or the new one, never a torn one.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// crashPoint stops Write at a named point as a crash would: nothing after
// it happens, not even cleanup. Only tests set it (InjectCrash).
var crashPoint = func(path, point string) bool { return false }

// InjectCrash makes Write stop as a crash would wherever crash returns
// true: after the temporary file is "written", after it is "synced" (not
// yet renamed). For tests of callers' crash safety; restore undoes it.
func InjectCrash(crash func(path, point string) bool) (restore func()) {
	old := crashPoint
	crashPoint = crash
	return func() { crashPoint = old }
}

// Write replaces path with data, mode perm: the data goes to a temporary
// file in the same directory, is synced, renamed over path, and the
// directory is synced so that the rename itself is durable.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
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
	if err := tmp.Chmod(perm); err != nil {
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
	return SyncDir(dir)
}

// Remove removes path, and syncs its directory so the removal is durable.
// A path already gone is no error.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir makes the directory's entries durable.
func SyncDir(dir string) error {
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
