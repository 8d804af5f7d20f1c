// Command labnet boots the network lab: several QEMU guests like labvm's (Debian's 6.12 kernel
// under TCG, the machine's root read-only over 9p under a tmpfs overlay), joined by
// point-to-point virtual Ethernet links with Soft-RoCE on each, and runs a script in one of
// them (the driver) while it keeps the others (agents) under its power control.
//
//	labnet boot --guest NAME[,off][,cpus=N][,mem=MB][,disk=PATH][,disk-size=SIZE]...
//	            --link NAME=GUEST:GUEST... --driver GUEST
//	            [--cpus N] [--mem MB] [--disk-size SIZE] [--share DIR]... [--timeout D]
//	            [--console-dir DIR] [--kmsg] [--labvm PATH] [--keep] SCRIPT [ARGS...]
//	labnet agent ADDR:PORT
//	labnet exec [--timeout D] GUEST COMMAND [ARGS...]          (in the driver)
//	labnet order GUEST kill|boot|carrier-off LINK|carrier-on LINK  (in the driver)
//
// A link is a virtio-net NIC in each of its two guests, joined through a pair of UDP sockets on
// 127.0.0.1 that labnet makes, connects to each other and hands to both QEMUs (-netdev
// dgram,local.type=fd). UDP rather than a stream netdev: a frame is a datagram, so a link loses
// frames the way Ethernet does instead of queueing them behind a peer that is down; and the
// sockets are labnet's, held for the whole run, so a guest that loses power and boots again
// gets the very same link (nothing to reconnect, no listener that has to be up first, no port
// another process could take in between). netlab.Build gives the addresses and names.
//
// In each guest: labvm's setup (modules, configfs, tmpfs), the NICs with their addresses, an rxe
// device on each data NIC, its own ext4 disk at /scratch, each --share at its own path. The
// driver runs SCRIPT; every other guest runs `labnet agent` on its management link, which runs
// commands for the driver (netlab.Agent). The driver orders power cuts, boots and carrier
// changes through its control share (netlab.RequestPower, netlab.RequestCarrier); labnet
// carries them out on the guests' QEMUs (SIGKILL, a new QEMU on the same disk and links, QMP's
// set_link). The kernel cache is labvm's (the same kernel and initramfs).
//
// Exit status: SCRIPT's, 124 on timeout, 125 if a guest could not be set up, 1 if the driver
// stopped before SCRIPT finished.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nvmeof-tgt/nvmeof-tgt/tests/netlab"
)

//go:embed guest.sh
var guestScript []byte

func main() {
	if len(os.Args) >= 2 {
		switch os.Args[1] {
		case "agent":
			os.Exit(agentMain(os.Args[2:]))
		case "boot":
			os.Exit(bootMain(os.Args[2:]))
		case "exec":
			os.Exit(execMain(os.Args[2:]))
		case "order":
			os.Exit(orderMain(os.Args[2:]))
		case "-h", "--help", "help":
			usage(os.Stdout)
			os.Exit(0)
		}
	}
	usage(os.Stderr)
	os.Exit(2)
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: labnet boot --guest NAME[,off][,cpus=N][,mem=MB][,disk=PATH][,disk-size=SIZE]...
                   --link NAME=GUEST:GUEST... --driver GUEST [flags] SCRIPT [ARGS...]
       labnet agent ADDR:PORT
       labnet exec [--timeout D] GUEST COMMAND [ARGS...]   (in the driver: a command in GUEST)
       labnet order GUEST kill|boot|carrier-off LINK|carrier-on LINK   (in the driver)
`)
}

// orderMain sends the launcher an order, from the driver.
func orderMain(args []string) int {
	if len(args) < 2 {
		usage(os.Stderr)
		return 2
	}
	dir := os.Getenv("LAB_ORDER_DIR")
	if dir == "" {
		return fail("not in the network lab's driver (LAB_ORDER_DIR)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	switch guest, action := args[0], args[1]; {
	case (action == netlab.CarrierOff || action == netlab.CarrierOn) && len(args) == 3:
		err = netlab.RequestCarrier(ctx, dir, guest, args[2], action == netlab.CarrierOn)
	case (action == netlab.PowerKill || action == netlab.PowerBoot) && len(args) == 2:
		_, err = netlab.RequestPower(ctx, dir, guest, action)
	default:
		usage(os.Stderr)
		return 2
	}
	if err != nil {
		return fail("%v", err)
	}
	return 0
}

// execMain runs a command in another guest through its agent, for scripts and people in the
// driver: its output and exit status are the command's.
func execMain(args []string) int {
	fs := flag.NewFlagSet("labnet exec", flag.ContinueOnError)
	timeout := fs.Duration("timeout", netlab.DefaultTimeout, "the command's limit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() < 2 {
		usage(os.Stderr)
		return 2
	}
	lab, err := netlab.Load(os.Getenv("LAB_NET"))
	if err != nil {
		return fail("not in the network lab's driver (LAB_NET): %v", err)
	}
	g, ok := lab.Guest(fs.Arg(0))
	if !ok || g.Agent == "" {
		return fail("no agent on guest %q", fs.Arg(0))
	}
	c := &netlab.Client{Addr: g.Agent}
	// The driver's script may start before the other guests are up.
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := c.WaitUp(wctx); err != nil {
		return fail("%v", err)
	}
	resp, err := c.Run(context.Background(), *timeout, fs.Args()[1:]...)
	os.Stdout.Write(resp.Stdout)
	os.Stderr.Write(resp.Stderr)
	switch {
	case err != nil:
		return fail("%v", err)
	case resp.TimedOut:
		fmt.Fprintf(os.Stderr, "labnet exec: timed out after %v\n", *timeout)
		return exitTimeout
	case resp.Signal != 0:
		return 128 + resp.Signal
	}
	return resp.Exit
}

func agentMain(args []string) int {
	if len(args) != 1 {
		usage(os.Stderr)
		return 2
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "labnet agent: %v\n", err)
		return 1
	}
	fmt.Printf("labnet: agent listening on %s\n", ln.Addr())
	a := &netlab.Agent{Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if err := a.Serve(context.Background(), ln); err != nil {
		fmt.Fprintf(os.Stderr, "labnet agent: %v\n", err)
		return 1
	}
	return 0
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// Exit statuses besides the script's.
const (
	exitTimeout  = 124
	exitSetup    = 125
	exitSignaled = 130
)

func bootMain(args []string) int {
	fs := flag.NewFlagSet("labnet boot", flag.ContinueOnError)
	var guestArgs, linkArgs, shares listFlag
	fs.Var(&guestArgs, "guest", "a guest: NAME[,off][,cpus=N][,mem=MB][,disk=PATH][,disk-size=SIZE] (repeat)")
	fs.Var(&linkArgs, "link", "a link: NAME=GUEST:GUEST (repeat)")
	fs.Var(&shares, "share", "a directory every guest mounts read-write at the same path (repeat)")
	driver := fs.String("driver", "", "the guest that runs SCRIPT")
	cpus := fs.Int("cpus", 1, "vCPUs of each guest unless its --guest says")
	mem := fs.Int("mem", 2048, "MiB of each guest unless its --guest says")
	diskSize := fs.String("disk-size", "2G", "size of each guest's disk unless its --guest says")
	timeout := fs.Duration("timeout", 20*time.Minute, "the whole run's limit")
	consoleDir := fs.String("console-dir", "", "where each guest's raw console log goes (console-GUEST.log; default: the run's directory, removed)")
	kmsg := fs.Bool("kmsg", false, "show the driver's kernel log lines too")
	labvm := fs.String("labvm", "tests/lab/labvm", "labvm, whose kernel cache (NVMEOF_LAB_CACHE) the guests boot")
	keep := fs.Bool("keep", false, "keep the run's directory (control shares, disk images)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() < 1 {
		usage(os.Stderr)
		return 2
	}
	script, scriptArgs := fs.Arg(0), fs.Args()[1:]
	if _, err := os.Stat(script); err != nil {
		return fail("%v", err)
	}
	ds, err := netlab.ParseSize(*diskSize)
	if err != nil {
		return fail("--disk-size %s: %v", *diskSize, err)
	}
	var gspecs []netlab.GuestSpec
	for _, s := range guestArgs {
		g, err := netlab.ParseGuest(s)
		if err != nil {
			return fail("%v", err)
		}
		gspecs = append(gspecs, g)
	}
	var lspecs []netlab.LinkSpec
	for _, s := range linkArgs {
		l, err := netlab.ParseLink(s)
		if err != nil {
			return fail("%v", err)
		}
		lspecs = append(lspecs, l)
	}
	lab, err := netlab.Build(gspecs, lspecs, *driver, *cpus, *mem, ds)
	if err != nil {
		return fail("%v", err)
	}
	for i, s := range shares {
		if shares[i], err = filepath.Abs(s); err != nil {
			return fail("--share %s: %v", s, err)
		}
	}

	kdir, lock, err := prepareKernel(*labvm)
	if err != nil {
		return fail("%v", err)
	}
	defer lock.Close()

	work, err := os.MkdirTemp(os.Getenv("TMPDIR"), "labnet.")
	if err != nil {
		return fail("%v", err)
	}
	if !*keep {
		defer os.RemoveAll(work)
	} else {
		defer fmt.Fprintf(os.Stderr, "labnet: kept %s\n", work)
	}
	if *consoleDir == "" {
		*consoleDir = work
	} else if err := os.MkdirAll(*consoleDir, 0o755); err != nil {
		return fail("%v", err)
	}
	l := &launcher{lab: lab, kdir: kdir, work: work, consoleDir: *consoleDir, kmsg: *kmsg,
		shares: shares, events: make(chan event, 64), guests: map[string]*guest{}}
	defer l.close()
	if err := l.setup(script, scriptArgs); err != nil {
		return fail("%v", err)
	}
	return l.run(*timeout)
}

func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "labnet: "+format+"\n", args...)
	return 1
}

// prepareKernel finds labvm's kernel cache (NVMEOF_LAB_CACHE, default /var/cache/nvmeof-tgt-lab)
// and returns the kernel's directory, holding a shared lock on the cache (labvm's own) so that
// no labvm rebuilds it under the guests. A directory is current when its stamp is this labvm's
// sha256, as labvm itself decides. If none is, labvm is run once, on an empty script, to
// rebuild it: labvm has no mode that builds without booting, and adding one would change its
// stamp, making every other labvm in use on the machine rebuild the cache in turn.
func prepareKernel(labvm string) (string, *os.File, error) {
	b, err := os.ReadFile(labvm)
	if err != nil {
		return "", nil, fmt.Errorf("labvm: %w", err)
	}
	sum := sha256.Sum256(b)
	want := hex.EncodeToString(sum[:])
	cache := os.Getenv("NVMEOF_LAB_CACHE")
	if cache == "" {
		cache = "/var/cache/nvmeof-tgt-lab"
	}
	for attempt := 0; ; attempt++ {
		lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
		if err == nil {
			if err := unix.Flock(int(lock.Fd()), unix.LOCK_SH); err != nil {
				lock.Close()
				return "", nil, fmt.Errorf("lock the kernel cache: %w", err)
			}
			if kdir := currentKernel(cache, want); kdir != "" {
				return kdir, lock, nil
			}
			lock.Close()
		}
		if attempt == 2 {
			return "", nil, fmt.Errorf("no current kernel in %s after running labvm (another labvm version keeps rebuilding it?)", cache)
		}
		fmt.Fprintf(os.Stderr, "labnet: the kernel cache is not labvm's current one: booting labvm once to rebuild it\n")
		empty, err := os.CreateTemp("", "labnet-empty-")
		if err != nil {
			return "", nil, err
		}
		empty.Close()
		cmd := exec.Command(labvm, "--timeout", "300", empty.Name())
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		// The broken boots are the lab's guests', not this one's.
		cmd.Env = append(os.Environ(), breakBootsEnv+"=0")
		err = cmd.Run()
		os.Remove(empty.Name())
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", labvm, err)
		}
	}
}

// currentKernel is the kernel directory in cache whose stamp is want, the newest if several.
func currentKernel(cache, want string) string {
	dirs, _ := filepath.Glob(filepath.Join(cache, "linux-image-*"))
	best := ""
	for _, d := range dirs {
		stamp, _ := os.ReadFile(filepath.Join(d, "stamp"))
		if strings.TrimSpace(string(stamp)) != want {
			continue
		}
		ok := true
		for _, f := range []string{"kver", "vmlinuz", "initramfs.gz", "modules"} {
			if _, err := os.Stat(filepath.Join(d, f)); err != nil {
				ok = false
			}
		}
		if ok && d > best { // not a true version order; one kernel package is what labvm keeps
			best = d
		}
	}
	return best
}

type launcher struct {
	lab        *netlab.Lab
	kdir       string
	work       string
	consoleDir string
	kmsg       bool
	shares     []string
	events     chan event
	guests     map[string]*guest
	order      []*guest
	start      time.Time
	outMu      sync.Mutex
}

// guest is one guest's QEMU, across its boots.
type guest struct {
	netlab.Guest
	driver bool
	ctl    string     // its control share
	disk   string     // its disk image
	nics   []*os.File // its ends of its links, in NIC order: QEMU's fds 3, 4, ...
	nicFDs []int

	cmd     *exec.Cmd
	done    chan struct{} // closed when this boot's QEMU has exited
	boots   int
	bootAt  time.Time
	ready   bool // this boot reached "guest ready"
	upOnce  bool // some boot did
	killed  bool // this boot was ended by a power request
	retried bool // this power-on's first boot died before it was ready, and it was booted again
	running bool
}

type eventKind int

const (
	evReady eventKind = iota
	evExit
)

type event struct {
	g    *guest
	boot int
	kind eventKind
	err  error // evExit: QEMU's
}

func (l *launcher) printf(format string, args ...any) {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	fmt.Printf(format, args...)
}

// setup writes every guest's control share and disk, and makes the links.
func (l *launcher) setup(script string, args []string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, lg := range l.lab.Guests {
		g := &guest{Guest: lg, driver: lg.Name == l.lab.Driver}
		g.ctl = filepath.Join(l.work, lg.Name, "ctl")
		if err := os.MkdirAll(g.ctl, 0o755); err != nil {
			return err
		}
		l.guests[lg.Name] = g
		l.order = append(l.order, g)
		if err := l.writeControl(g, self, script, args); err != nil {
			return fmt.Errorf("guest %s: %w", g.Name, err)
		}
		if err := l.makeDisk(g); err != nil {
			return fmt.Errorf("guest %s: %w", g.Name, err)
		}
	}
	for _, k := range l.lab.Links {
		a, b, err := udpPair()
		if err != nil {
			return fmt.Errorf("link %s: %w", k.Name, err)
		}
		for i, f := range []*os.File{a, b} {
			g := l.guests[k.Ends[i].Guest]
			g.nics = append(g.nics, f)
			g.nicFDs = append(g.nicFDs, int(f.Fd()))
		}
	}
	return nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (l *launcher) writeControl(g *guest, self, script string, args []string) error {
	if err := os.WriteFile(filepath.Join(g.ctl, "stage2"), guestScript, 0o755); err != nil {
		return err
	}
	if err := l.lab.Save(filepath.Join(g.ctl, "lab.json")); err != nil {
		return err
	}
	env := map[string]string{"LAB_GUEST": g.Name, "LAB_ROLE": "agent", "LAB_AGENT_LISTEN": g.Agent}
	if g.driver {
		env = map[string]string{"LAB_GUEST": g.Name, "LAB_ROLE": "driver", "LAB_NET": "/labvm/lab.json",
			"LAB_SCRATCH": "/scratch", "LAB_ORDER_DIR": netlab.OrderDir}
	}
	var e bytes.Buffer
	for _, k := range []string{"LAB_GUEST", "LAB_ROLE", "LAB_AGENT_LISTEN", "LAB_NET", "LAB_SCRATCH", "LAB_ORDER_DIR"} {
		if v, ok := env[k]; ok {
			fmt.Fprintf(&e, "export %s=%s\n", k, shellQuote(v))
		}
	}
	var nics bytes.Buffer
	for _, n := range l.lab.NICs(g.Name) {
		rdma := n.RDMADev
		if rdma == "" {
			rdma = "-"
		}
		fmt.Fprintf(&nics, "%s %s %s/24 %s\n", n.MAC, n.Netdev, n.Addr, rdma)
	}
	var sh bytes.Buffer
	for i, s := range l.shares {
		fmt.Fprintf(&sh, "share%d %s\n", i+1, s)
	}
	files := map[string][]byte{"env": e.Bytes(), "nics": nics.Bytes(), "shares": sh.Bytes()}
	if g.driver {
		b, err := os.ReadFile(script)
		if err != nil {
			return err
		}
		var a bytes.Buffer
		for _, s := range args {
			a.WriteString(s)
			a.WriteByte(0)
		}
		cwd, _ := os.Getwd()
		files["script"], files["args"], files["cwd"] = b, a.Bytes(), []byte(cwd+"\n")
		if err := os.MkdirAll(filepath.Join(g.ctl, "orders"), 0o777); err != nil {
			return err
		}
	} else {
		b, err := os.ReadFile(self)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(g.ctl, "labnet"), b, 0o755); err != nil {
			return err
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(g.ctl, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// makeDisk makes the guest's disk image, an empty ext4 filesystem, unless --guest disk=PATH
// names one that exists.
func (l *launcher) makeDisk(g *guest) error {
	g.disk = g.Disk
	if g.disk == "" {
		g.disk = filepath.Join(l.work, g.Name, "disk.img")
	} else if _, err := os.Stat(g.disk); err == nil {
		return nil
	}
	f, err := os.OpenFile(g.disk, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	err = f.Truncate(g.DiskSize)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	out, err := exec.Command("mkfs.ext4", "-q", "-F", "-L", "lab-"+g.Name, "-m", "0",
		"-E", "lazy_itable_init=0,lazy_journal_init=0", g.disk).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4 %s: %v: %s", g.disk, err, out)
	}
	return nil
}

// udpPair makes the two ends of a link: UDP sockets on 127.0.0.1, each bound to a port the
// kernel picks and connected to the other, so each takes datagrams from its peer only.
func udpPair() (*os.File, *os.File, error) {
	var fds [2]int
	var addrs [2]unix.Sockaddr
	for i := range fds {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, nil, err
		}
		fds[i] = fd
		// Room for a burst while the guest's emulated CPU is busy; a bigger buffer would
		// only hold more stale frames for a NIC that is down.
		const buf = 1 << 20
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, buf) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, buf)
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, buf)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return nil, nil, err
		}
		if addrs[i], err = unix.Getsockname(fd); err != nil {
			return nil, nil, err
		}
	}
	for i := range fds {
		if err := unix.Connect(fds[i], addrs[1-i]); err != nil {
			return nil, nil, err
		}
	}
	return os.NewFile(uintptr(fds[0]), "link"), os.NewFile(uintptr(fds[1]), "link"), nil
}

// drain throws away what the guest's ends of its links received while it was off: frames
// from before its power cut are no use to its next boot.
func (g *guest) drain() {
	buf := make([]byte, 65536)
	for _, fd := range g.nicFDs {
		for {
			if _, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT); err != nil {
				break
			}
		}
	}
}

// breakBootsEnv, for the labs' own test (tests/lab/lab-selftest.sh), as in labvm: the first N
// boots of each guest get an init that does not exist, and the kernel panics at boot.
const (
	breakBootsEnv = "NVMEOF_LAB_BREAK_BOOTS"
	brokenInit    = "/labvm-broken-boot"
)

// qemuOpt escapes a value for QEMU's option syntax.
func qemuOpt(s string) string { return strings.ReplaceAll(s, ",", ",,") }

func (l *launcher) qemuArgs(g *guest) []string {
	// tsc=reliable: as in labvm (a TSC the watchdog marks unstable has crashed TCG guests).
	appendLine := "console=ttyS0 quiet panic=-1 mitigations=off tsc=reliable"
	if n, _ := strconv.Atoi(os.Getenv(breakBootsEnv)); g.boots < n {
		appendLine += " rdinit=" + brokenInit
	}
	args := []string{"-name", "labnet-" + g.Name, "-accel", "tcg,thread=multi", "-cpu", "max",
		"-m", strconv.Itoa(g.MemMB), "-smp", strconv.Itoa(g.CPUs),
		"-nographic", "-no-reboot", "-nic", "none",
		"-kernel", filepath.Join(l.kdir, "vmlinuz"), "-initrd", filepath.Join(l.kdir, "initramfs.gz"),
		"-append", appendLine,
		"-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
		"-virtfs", "local,path=" + qemuOpt(filepath.Join(l.kdir, "modules")) + ",mount_tag=labmods,security_model=none,readonly=on",
		"-virtfs", "local,path=" + qemuOpt(g.ctl) + ",mount_tag=labctl,security_model=none",
		// writeback: the guest sees a volatile write cache and its flushes become fdatasync of
		// the image, which a test of power loss on this disk needs (labvm's scratch disk is
		// cache=unsafe, which ignores them).
		"-drive", "file=" + qemuOpt(g.disk) + ",if=virtio,format=raw,cache=writeback",
	}
	// QMP, for the carrier orders (set_link).
	args = append(args, "-qmp", "unix:"+qemuOpt(g.qmpSock())+",server=on,wait=off")
	for i, n := range l.lab.NICs(g.Name) {
		// The NIC's id is its netdev's name in the guest, which set_link takes.
		// romfile=: no iPXE option ROM to load and run under emulation; the kernel boots directly.
		args = append(args, "-netdev", fmt.Sprintf("dgram,id=nd-%s,local.type=fd,local.str=%d", n.Netdev, 3+i),
			"-device", fmt.Sprintf("virtio-net-pci,id=%s,netdev=nd-%s,mac=%s,romfile=", n.Netdev, n.Netdev, n.MAC))
	}
	for i, s := range l.shares {
		args = append(args, "-virtfs", fmt.Sprintf("local,path=%s,mount_tag=share%d,security_model=none,multidevs=remap", qemuOpt(s), i+1))
	}
	return args
}

// qmpSock is the guest's QMP socket, beside (not in) its control share.
func (g *guest) qmpSock() string { return filepath.Join(filepath.Dir(g.ctl), "qmp.sock") }

// setLink sets the carrier of the guest's NIC on link through QMP (set_link).
func (l *launcher) setLink(g *guest, link string, up bool) error {
	if !g.running {
		return errors.New("not running")
	}
	k, ok := l.lab.Link(link)
	if !ok {
		return fmt.Errorf("no link %q", link)
	}
	e, ok := k.End(g.Name)
	if !ok {
		return fmt.Errorf("link %s does not reach %s", link, g.Name)
	}
	if k.Mgmt {
		return fmt.Errorf("link %s is a management link: no fault touches it", link)
	}
	return qmp(g.qmpSock(), fmt.Sprintf(`{"execute":"set_link","arguments":{"name":%q,"up":%t}}`, e.Netdev, up))
}

// qmp runs one QMP command: the greeting, qmp_capabilities, then cmd; events in between are
// skipped.
func qmp(sock, cmd string) error {
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return fmt.Errorf("qmp: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	dec := json.NewDecoder(c)
	var greeting map[string]json.RawMessage
	if err := dec.Decode(&greeting); err != nil {
		return fmt.Errorf("qmp greeting: %w", err)
	}
	for _, m := range []string{`{"execute":"qmp_capabilities"}`, cmd} {
		if _, err := io.WriteString(c, m+"\n"); err != nil {
			return fmt.Errorf("qmp: %w", err)
		}
		for {
			var r struct {
				Return json.RawMessage `json:"return"`
				Error  *struct {
					Desc string `json:"desc"`
				} `json:"error"`
			}
			if err := dec.Decode(&r); err != nil {
				return fmt.Errorf("qmp: %w", err)
			}
			if r.Error != nil {
				return fmt.Errorf("qmp %s: %s", m, r.Error.Desc)
			}
			if r.Return != nil {
				break
			}
		}
	}
	return nil
}

// boot starts the guest's QEMU.
func (l *launcher) boot(g *guest) error {
	if g.running {
		return errors.New("already running")
	}
	g.drain()
	_ = os.Remove(filepath.Join(g.ctl, "status"))
	_ = os.Remove(filepath.Join(g.ctl, "ready"))
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command("qemu-system-x86_64", l.qemuArgs(g)...)
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.ExtraFiles = g.nics
	// If labnet dies, its guests go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return fmt.Errorf("start qemu: %w", err)
	}
	g.boots++
	g.cmd, g.done, g.bootAt = cmd, make(chan struct{}), time.Now()
	g.ready, g.killed, g.running = false, false, true
	boot, done := g.boots, g.done
	read := make(chan struct{})
	go func() { l.console(g, boot, pr); close(read) }()
	go func() {
		err := cmd.Wait()
		// The pipe's reader has the guest's last words (a panic's), which the exit's handler
		// shows; with the pipe an *os.File, Wait does not wait for them.
		select {
		case <-read:
		case <-time.After(5 * time.Second):
		}
		close(done)
		l.events <- event{g: g, boot: boot, kind: evExit, err: err}
	}()
	return nil
}

// kill cuts the guest's power: SIGKILL to its QEMU.
func (l *launcher) kill(g *guest) error {
	if !g.running {
		return errors.New("not running")
	}
	g.killed = true
	_ = g.cmd.Process.Kill()
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		return errors.New("qemu still running 30 s after SIGKILL")
	}
	g.running = false
	return nil
}

var (
	escapes = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]|\x1bc|\r`)
	kline   = regexp.MustCompile(`^\[ *[0-9]+\.[0-9]+\] `)
)

// console copies one boot's console to the guest's log and shows labnet's own lines; the
// driver's output after "guest ready" (its script's) is shown whole, less kernel lines.
func (l *launcher) console(g *guest, boot int, r io.ReadCloser) {
	defer r.Close()
	logf, err := os.OpenFile(filepath.Join(l.consoleDir, "console-"+g.Name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		l.printf("labnet: %s: console log: %v\n", g.Name, err)
		logf = nil
	} else {
		defer logf.Close()
		fmt.Fprintf(logf, "=== labnet: %s boot %d at %s\n", g.Name, boot, time.Now().Format(time.RFC3339))
	}
	br := bufio.NewReader(r)
	ready := false
	for {
		raw, err := br.ReadString('\n')
		if raw != "" {
			if logf != nil {
				_, _ = logf.WriteString(raw)
			}
			line := escapes.ReplaceAllString(strings.TrimRight(raw, "\n"), "")
			switch {
			case !ready || !g.driver:
				// The firmware's last words may share labnet's first line.
				if i := strings.Index(line, "labnet: "); i >= 0 {
					l.printf("%s\n", line[i:])
					if !ready && strings.Contains(line, "guest ready") {
						ready = true
						l.events <- event{g: g, boot: boot, kind: evReady}
					}
				}
			case l.kmsg || !kline.MatchString(line):
				l.printf("%s\n", line)
			}
		}
		if err != nil {
			return
		}
	}
}

// consoleTail is the end of the guest's console log, each line marked "labnet: GUEST console: "
// so that a summary (e2e-all.sh) can pick it out of the test's output; or, for a boot that died
// and was booted again (not a failure), "labnet: GUEST boot console: ".
func (l *launcher) consoleTail(g *guest, n int, recovered bool) string {
	b, _ := os.ReadFile(filepath.Join(l.consoleDir, "console-"+g.Name+".log"))
	lines := strings.Split(strings.TrimRight(escapes.ReplaceAllString(string(b), ""), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	mark := " console: "
	if recovered {
		mark = " boot console: "
	}
	for i, line := range lines {
		lines[i] = "labnet: " + g.Name + mark + strings.TrimRight(line, "\r")
	}
	return strings.Join(lines, "\n")
}

// run boots the guests that are not off and supervises them until the driver stops.
func (l *launcher) run(timeout time.Duration) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	l.start = time.Now()
	waiting := 0
	for _, g := range l.order {
		if g.Off {
			continue
		}
		if err := l.boot(g); err != nil {
			fmt.Fprintf(os.Stderr, "labnet: %s: %v\n", g.Name, err)
			return exitSetup
		}
		waiting++
	}
	l.printf("labnet: booting %d guests\n", waiting)
	deadline := time.After(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	orderDir := filepath.Join(l.guests[l.lab.Driver].ctl, "orders")
	for {
		select {
		case ev := <-l.events:
			g := ev.g
			if ev.boot != g.boots {
				continue // an earlier boot's news
			}
			switch ev.kind {
			case evReady:
				g.ready, g.retried = true, false
				l.printf("labnet: %s up %.1fs after its QEMU started (boot %d)\n", g.Name, time.Since(g.bootAt).Seconds(), g.boots)
				if !g.upOnce {
					g.upOnce = true
					if waiting--; waiting == 0 {
						l.printf("labnet: all guests up %.1fs after the lab started\n", time.Since(l.start).Seconds())
					}
				}
			case evExit:
				g.running = false
				if !g.killed && !g.retried && diedBooting(g) {
					// Under TCG on a loaded machine the kernel has died at boot (see tsc=reliable
					// in qemuArgs); nothing of the lab's has run in it then, so it gets one more
					// boot. A guest that dies once it is ready is reported, never booted again.
					g.retried = true
					fmt.Fprintf(os.Stderr, "labnet: %s died while booting (qemu: %v); its console:\n%s\nlabnet: %s: booting it again\n",
						g.Name, ev.err, l.consoleTail(g, 60, true), g.Name)
					err := l.boot(g)
					if err == nil {
						continue
					}
					fmt.Fprintf(os.Stderr, "labnet: %s: %v\n", g.Name, err)
				}
				if g.driver {
					return l.driverStatus(g, ev.err)
				}
				if g.killed {
					continue
				}
				st, _ := os.ReadFile(filepath.Join(g.ctl, "status"))
				fmt.Fprintf(os.Stderr, "labnet: %s stopped by itself (qemu: %v, status %q); its console:\n%s\n",
					g.Name, ev.err, strings.TrimSpace(string(st)), l.consoleTail(g, 40, false))
				if !g.upOnce {
					return exitSetup
				}
			}
		case <-tick.C:
			calls, err := netlab.Orders(orderDir)
			if err != nil {
				fmt.Fprintf(os.Stderr, "labnet: power requests: %v\n", err)
			}
			for _, c := range calls {
				l.power(c)
			}
		case <-deadline:
			fmt.Fprintf(os.Stderr, "labnet: timed out after %v\n", timeout)
			return exitTimeout
		case s := <-sigs:
			fmt.Fprintf(os.Stderr, "labnet: %v\n", s)
			return exitSignaled
		}
	}
}

// diedBooting says whether the guest's last boot ended before its setup was done (the guest
// writes ready to its control share just before it says so, and status when it fails).
func diedBooting(g *guest) bool {
	for _, f := range []string{"ready", "status"} {
		if _, err := os.Stat(filepath.Join(g.ctl, f)); err == nil {
			return false
		}
	}
	return true
}

// power carries out an order of the driver's.
func (l *launcher) power(c netlab.Call) {
	g, ok := l.guests[c.Guest]
	var err error
	switch {
	case !ok:
		err = fmt.Errorf("no guest %q", c.Guest)
	case g.driver && (c.Action == netlab.PowerKill || c.Action == netlab.PowerBoot):
		err = errors.New("the driver's power is not under its own control")
	case c.Action == netlab.PowerKill:
		err = l.kill(g)
	case c.Action == netlab.PowerBoot:
		if !g.running {
			g.retried = false // a new power-on (a refused one must not reset a retry under way)
		}
		err = l.boot(g)
	case c.Action == netlab.CarrierOff || c.Action == netlab.CarrierOn:
		err = l.setLink(g, c.Link, c.Action == netlab.CarrierOn)
	default:
		err = fmt.Errorf("unknown action %q", c.Action)
	}
	r := netlab.Reply{}
	if ok {
		r.Boots = g.boots
	}
	if err != nil {
		r.Error = err.Error()
	}
	what := c.Action + " " + c.Guest
	if c.Link != "" {
		what += " link " + c.Link
	}
	l.printf("labnet: %s: %s\n", what, errOrOK(err))
	if err := c.Reply(r); err != nil {
		fmt.Fprintf(os.Stderr, "labnet: answer to %s: %v\n", what, err)
	}
}

func errOrOK(err error) string {
	if err == nil {
		return "done"
	}
	return err.Error()
}

// driverStatus is the run's exit status once the driver has stopped.
func (l *launcher) driverStatus(g *guest, qerr error) int {
	l.printf("labnet: the lab ran %.0fs\n", time.Since(l.start).Seconds())
	b, err := os.ReadFile(filepath.Join(g.ctl, "status"))
	if err != nil {
		// A guest whose kernel panics exits (panic=-1, -no-reboot): its console says why.
		if !g.ready {
			fmt.Fprintf(os.Stderr, "labnet: %s never got ready; its console:\n%s\n", g.Name, l.consoleTail(g, 60, false))
		} else {
			fmt.Fprintf(os.Stderr, "labnet: %s's console, its end:\n%s\n", g.Name, l.consoleTail(g, 80, false))
		}
		fmt.Fprintf(os.Stderr, "labnet: the driver stopped before SCRIPT finished (qemu: %v; console in %s)\n", qerr, l.consoleDir)
		return 1
	}
	rc, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 1
	}
	return rc
}

// close stops every guest still running and closes the links.
func (l *launcher) close() {
	for _, g := range l.order {
		if g.running {
			_ = g.cmd.Process.Kill()
			<-g.done
		}
		for _, f := range g.nics {
			f.Close()
		}
	}
}
