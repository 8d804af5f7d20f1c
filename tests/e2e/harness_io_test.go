//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Data-path helpers: patterns written and read back with O_DIRECT through the block device, and
// fio with verification.

const ddBlock = 64 * kib // every dd offset and length is a multiple of this

// pattern returns n reproducible pseudo-random bytes.
func pattern(n int, seed uint64) []byte {
	r := rand.New(rand.NewChaCha8([32]byte{0: byte(seed), 1: byte(seed >> 8), 31: 0xe2}))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// ddWrite writes data at byte offset off of dev with O_DIRECT and waits for it to be durable.
func ddWrite(t *testing.T, dev string, off int64, data []byte) {
	t.Helper()
	if off%ddBlock != 0 || len(data)%ddBlock != 0 {
		t.Fatalf("ddWrite: offset %d and length %d must be multiples of %d", off, len(data), ddBlock)
	}
	src := filepath.Join(t.TempDir(), "pattern")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, cmdTimeout, "dd", "if="+src, "of="+dev, "bs="+strconv.Itoa(ddBlock),
		"seek="+strconv.FormatInt(off/ddBlock, 10), "oflag=direct", "conv=notrunc,fsync", "status=none")
}

// ddRead reads n bytes at byte offset off of dev with O_DIRECT.
func ddRead(t *testing.T, dev string, off int64, n int) []byte {
	t.Helper()
	if off%ddBlock != 0 || n%ddBlock != 0 {
		t.Fatalf("ddRead: offset %d and length %d must be multiples of %d", off, n, ddBlock)
	}
	dst := filepath.Join(t.TempDir(), "readback")
	mustRun(t, cmdTimeout, "dd", "if="+dev, "of="+dst, "bs="+strconv.Itoa(ddBlock),
		"skip="+strconv.FormatInt(off/ddBlock, 10), "count="+strconv.Itoa(n/ddBlock), "iflag=direct", "status=none")
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != n {
		t.Fatalf("read %d bytes at %d of %s, want %d", len(b), off, dev, n)
	}
	return b
}

// checkSame reports where got and want first differ; base is got's offset on the device.
func checkSame(t *testing.T, what string, base int64, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	end := min(i+16, len(got), len(want))
	t.Errorf("%s: first difference at device byte %d (LBA512 %d): got % x, want % x",
		what, base+int64(i), (base+int64(i))/512, got[i:end], want[i:end])
}

// fioCase is one fio job with verification.
type fioCase struct {
	rw      string // write or randwrite
	bs      int
	iodepth int
	size    int64
}

func (c fioCase) name() string {
	return fmt.Sprintf("%s-%s-qd%d", c.rw, sizeName(int64(c.bs)), c.iodepth)
}

func sizeName(n int64) string {
	switch {
	case n%mib == 0:
		return fmt.Sprintf("%dm", n/mib)
	case n%kib == 0:
		return fmt.Sprintf("%dk", n/kib)
	}
	return strconv.FormatInt(n, 10)
}

// fioReport is the part of fio's --output-format=json report that is checked.
type fioReport struct {
	Jobs []struct {
		Jobname string   `json:"jobname"`
		Error   int      `json:"error"`
		Read    fioStats `json:"read"`
		Write   fioStats `json:"write"`
	} `json:"jobs"`
}

type fioStats struct {
	IOBytes  uint64  `json:"io_bytes"`
	TotalIOs uint64  `json:"total_ios"`
	ShortIOs uint64  `json:"short_ios"`
	DropIOs  uint64  `json:"drop_ios"`
	BW       float64 `json:"bw_bytes"`
	IOPS     float64 `json:"iops"`
}

// runFio writes c.size bytes to dev through the kernel initiator, reads them back and checks
// every block's crc32c, then asserts that the report shows no error and the expected bytes.
func runFio(t *testing.T, dev, outDir string, c fioCase) {
	t.Helper()
	report := filepath.Join(outDir, "fio-"+c.name()+".json")
	args := []string{
		"--name=" + c.name(), "--filename=" + dev,
		"--ioengine=libaio", "--direct=1",
		"--rw=" + c.rw, "--bs=" + strconv.Itoa(c.bs), "--iodepth=" + strconv.Itoa(c.iodepth),
		"--size=" + strconv.FormatInt(c.size, 10), "--offset=0",
		"--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--verify_state_save=0",
		"--output-format=json", "--output=" + report,
	}
	r := run(t, fioTimeout, "fio", args...)
	raw, rerr := os.ReadFile(report)
	if r.err != nil {
		t.Fatalf("fio %s: %v\nreport:\n%s", c.name(), r.err, limit(raw))
	}
	if rerr != nil {
		t.Fatalf("fio report: %v", rerr)
	}
	var rep fioReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("fio report %s: %v", report, err)
	}
	if len(rep.Jobs) != 1 {
		t.Fatalf("fio report has %d jobs, want 1", len(rep.Jobs))
	}
	j := rep.Jobs[0]
	if j.Error != 0 {
		t.Errorf("fio job error = %d, want 0", j.Error)
	}
	want := uint64(c.size)
	if j.Write.IOBytes != want {
		t.Errorf("fio wrote %d bytes, want %d", j.Write.IOBytes, want)
	}
	// The verify pass reads everything back.
	if j.Read.IOBytes != want {
		t.Errorf("fio verify read %d bytes, want %d", j.Read.IOBytes, want)
	}
	if n := j.Write.ShortIOs + j.Read.ShortIOs + j.Write.DropIOs + j.Read.DropIOs; n != 0 {
		t.Errorf("fio: %d short or dropped I/Os", n)
	}
	t.Logf("fio %s: write %.1f MB/s %.0f IOPS, verify %.1f MB/s (%v)", c.name(),
		j.Write.BW/1e6, j.Write.IOPS, j.Read.BW/1e6, r.took.Round(1e6))
}

// backgroundFio runs a time-based random-write job on dev that verifies
// what it wrote as it goes (verify_backlog), and reports its result when
// it ends.
func backgroundFio(t *testing.T, dev, outDir string, runtime time.Duration) <-chan error {
	return backgroundFioVerify(t, dev, outDir, runtime, "--verify=crc32c")
}

// backgroundFioVerify is backgroundFio with fio's verify options (e.g.
// --verify=pattern --verify_pattern=...).
func backgroundFioVerify(t *testing.T, dev, outDir string, runtime time.Duration, verify ...string) <-chan error {
	report := filepath.Join(outDir, "fio-live.json")
	args := []string{"--name=live", "--filename=" + dev, "--ioengine=libaio", "--direct=1",
		"--rw=randwrite", "--bs=4k", "--iodepth=8", "--size=32m", "--time_based",
		"--runtime=" + strconv.Itoa(int(runtime.Seconds()))}
	args = append(args, verify...)
	args = append(args, "--verify_backlog=128", "--verify_fatal=1", "--verify_state_save=0",
		"--output-format=json", "--output="+report)
	done := make(chan error, 1)
	go func() {
		r := execCmd(runtime+fioTimeout, "fio", args...)
		if r.err != nil {
			done <- fmt.Errorf("fio: %v\n%s", r.err, limit(r.stderr))
			return
		}
		var rep fioReport
		raw, err := os.ReadFile(report)
		if err == nil {
			err = json.Unmarshal(raw, &rep)
		}
		switch {
		case err != nil:
			done <- fmt.Errorf("fio report: %v", err)
		case len(rep.Jobs) != 1 || rep.Jobs[0].Error != 0:
			done <- fmt.Errorf("fio job failed: %s", limit(raw))
		case rep.Jobs[0].Write.IOBytes == 0 || rep.Jobs[0].Read.IOBytes == 0:
			done <- fmt.Errorf("fio wrote %d and verified %d bytes: want both", rep.Jobs[0].Write.IOBytes, rep.Jobs[0].Read.IOBytes)
		default:
			t.Logf("fio live: wrote %d MiB, verified %d MiB", rep.Jobs[0].Write.IOBytes>>20, rep.Jobs[0].Read.IOBytes>>20)
			done <- nil
		}
	}()
	return done
}

// capWriteRead writes a pattern through c's namespace 1 and reads it back.
func capWriteRead(t *testing.T, c *controller, seed uint64) {
	t.Helper()
	dev := c.blockDev(t, 1)
	want := pattern(ddBlock, seed)
	ddWrite(t, dev, 0, want)
	checkSame(t, dev, 0, ddRead(t, dev, 0, ddBlock), want)
}

// fioReadReport is the part of fio's JSON report the latency probes read: one job's reads.
type fioReadReport struct {
	Jobs []struct {
		Error int `json:"error"`
		Read  struct {
			IOPS     float64 `json:"iops"`
			TotalIOs uint64  `json:"total_ios"`
			Clat     struct {
				Max        float64            `json:"max"`
				Percentile map[string]float64 `json:"percentile"`
			} `json:"clat_ns"`
		} `json:"read"`
	} `json:"jobs"`
}

// fioJSON is the JSON report in fio's --output file: fio writes its verify failures there too,
// ahead of the report and without a line break after the last one.
func fioJSON(raw []byte) []byte {
	i := bytes.Index(raw, []byte(`"fio version"`))
	if i < 0 {
		return raw
	}
	if j := bytes.LastIndexByte(raw[:i], '{'); j >= 0 {
		return raw[j:]
	}
	return raw
}
