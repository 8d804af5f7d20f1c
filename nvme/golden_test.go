package nvme

import (
	"path/filepath"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/internal/golden"
)

// checkGolden compares b with testdata/name, a dump of b's non-zero 16-byte
// rows, or rewrites it under -update.
func checkGolden(t *testing.T, name string, b []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), golden.HexRows(b))
}
