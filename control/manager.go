package control

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
)

// Options configure a Manager.
type Options struct {
	// Path is the configuration file serve was started with: reload reads
	// it, and changes made through the API are written back to it. Empty
	// (the embedded default) keeps changes in memory only.
	Path string
	// Loaded is the content of Path the configuration was loaded from
	// (config.LoadFileContent): API changes are refused while the file
	// holds anything else, an edit by hand that reload applies. Nil: New
	// reads Path.
	Loaded []byte
	// Transport returns the transport for a port's transport name.
	Transport func(name string) (fabric.Transport, error)
	// Logger receives the log; nil discards it.
	Logger *slog.Logger
	// Group is what a gateway of a group (gateway_group) needs; a
	// configuration with a group and no Group fails (ErrNoGroup).
	Group *GroupOptions
}

// Manager owns the running configuration of a target. Its methods are safe
// for concurrent use; changes are made one at a time.
type Manager struct {
	tgt       *fabric.Target
	path      string
	transport func(string) (fabric.Transport, error)
	log       *slog.Logger

	mu      sync.Mutex
	running *config.Config
	// file is the configuration the file holds as the target last loaded
	// or wrote it, and sum the SHA-256 of that content: persist keeps the
	// file's restart-only keys, and refuses a file edited since.
	file *config.Config
	sum  [sha256.Size]byte

	// gw is the gateway group's side, nil for a target on its own; local
	// is then the gateway's own configuration (its file's), which running
	// composes with the group's state (gateway.go).
	gw    *gateway
	local *config.Config
}

// Result says what a change did.
type Result struct {
	// Applied lists the steps made, in order.
	Applied []string `json:"applied"`
	// Restart names the keys that changed but take effect only at the
	// next start.
	Restart []string `json:"restart,omitempty"`
	// Persisted reports that the running configuration was written to
	// the configuration file.
	Persisted bool `json:"persisted"`
}

// New serves cfg on tgt: everything in it is set up by the same steps a
// later change uses. On error, what was set up stays on tgt, for the
// caller to close.
func New(tgt *fabric.Target, cfg *config.Config, o Options) (*Manager, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m := &Manager{tgt: tgt, path: o.Path, transport: o.Transport, log: o.Logger, file: cfg.Clone()}
	if o.Path != "" {
		if o.Loaded == nil {
			var err error
			if o.Loaded, err = os.ReadFile(o.Path); err != nil {
				return nil, err
			}
		}
		m.sum = sha256.Sum256(o.Loaded)
	}
	empty := cfg.Clone()
	empty.Ports, empty.Referrals, empty.Subsystems = nil, nil, nil
	m.running = empty
	if cfg.GatewayGroup.Enabled() {
		var o2 GroupOptions
		if o.Group != nil {
			o2 = *o.Group
		}
		if err := m.gatewayNew(cfg, o2); err != nil {
			return nil, err
		}
		return m, nil
	}
	steps, _, err := m.plan(empty, cfg, changeOpts{})
	if err != nil {
		return nil, err
	}
	if _, err := m.apply(steps); err != nil {
		return nil, err
	}
	return m, nil
}

// Running returns a copy of the running configuration.
func (m *Manager) Running() *config.Config {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running.Clone()
}

// Close stops following the gateway group, if any: no change is applied
// after it returns. The target itself is the caller's to close.
func (m *Manager) Close() {
	if m.gw != nil {
		m.closeGateway()
	}
}

// Path is the configuration file changes are written to ("" for none).
func (m *Manager) Path() string { return m.path }

// ErrInvalid wraps a change refused before anything was done: the request
// or the file was wrong.
var ErrInvalid = errors.New("invalid change")

// Update changes the running configuration for c: edit gets a copy to
// change, which is then validated whole, applied as a diff, and persisted.
// force allows namespaces to shrink. A configuration file edited since the
// target last loaded or wrote it refuses the change (ErrEdited).
func (m *Manager) Update(c Caller, edit func(*config.Config) error, force bool) (Result, error) {
	return m.updateWith(c, edit, changeOpts{force: force})
}

// changeOpts say how a change treats what its configuration cannot show.
type changeOpts struct {
	// force allows namespaces to shrink.
	force bool
	// reread, when set, picks file and block namespaces whose backend's
	// size is read again though their configuration did not change: a
	// file or volume grown from outside shows nowhere else.
	reread func(nqn string, n config.Namespace) bool
}

// updateWith is Update with opts, for c.
func (m *Manager) updateWith(c Caller, edit func(*config.Config) error, opts changeOpts) (Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	res, err := m.update(edit, opts)
	m.audit(c, "change", res, err)
	return res, err
}

func (m *Manager) update(edit func(*config.Config) error, opts changeOpts) (Result, error) {
	if m.gw != nil {
		return m.gatewayUpdate(edit, opts)
	}
	if m.path != "" {
		// Before anything changes: persist would refuse it after.
		if _, err := m.unedited(); err != nil {
			return Result{}, err
		}
	}
	next := m.running.Clone()
	if err := edit(next); err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	next.ApplyDefaults()
	if err := next.Validate(); err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	res, err := m.change(next, opts)
	if res.Applied != nil {
		if perr := m.persist(); perr != nil {
			m.log.Error("the change is live but was not saved", "err", perr)
			err = errors.Join(err, fmt.Errorf("save the configuration: %w", perr))
		} else {
			res.Persisted = m.path != ""
		}
	}
	return res, err
}

// ErrNoFile means there is no configuration file to reload.
var ErrNoFile = errors.New("no configuration file: the target was started with the embedded default")

// Reload reads the configuration file again, for c, and applies it as a
// diff. A file that does not load or validate is rejected whole, and
// nothing changes. Keys that cannot change live are reported in
// Result.Restart. File and block namespaces of size 0 (the backend's own
// size) take the backend's size again, as `ns resize NQN NSID 0` does: one
// grown from outside grows for hosts; one cut shorter than hosts see
// refuses the reload (ErrShrink), which only a forced resize gets past.
func (m *Manager) Reload(c Caller) (Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	res, err := m.reload()
	m.audit(c, "reload", res, err)
	return res, err
}

// reload reads the file under m.mu, as changes are made: an API change
// either is in the running configuration reload compares the file with,
// or comes after the reload, never between its read and its apply.
func (m *Manager) reload() (Result, error) {
	if m.path == "" {
		return Result{}, ErrNoFile
	}
	next, data, err := config.LoadFileContent(m.path)
	if err == nil && next.HasInlineSecrets() {
		err = config.CheckPrivate(m.path)
	}
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	afterRead()
	var res Result
	if m.gw != nil {
		res, err = m.gatewayReload(next)
	} else {
		res, err = m.change(next, changeOpts{reread: followsBackend})
	}
	for _, k := range res.Restart {
		m.log.Warn("configuration key changed: it takes effect at the next start", "key", k)
	}
	if err == nil {
		// Only a file applied whole is loaded: until then API changes
		// are refused, as they would overwrite it.
		m.file, m.sum = next, sha256.Sum256(data)
	}
	return res, err
}

// followsBackend picks the namespaces whose size is their backend's.
func followsBackend(_ string, n config.Namespace) bool { return n.Size == 0 }

// afterRead, in tests, runs once reload has read the file.
var afterRead = func() {}

// change applies the diff from the running configuration to next. m.mu is
// held.
func (m *Manager) change(next *config.Config, opts changeOpts) (Result, error) {
	steps, restart, err := m.plan(m.running, next, opts)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	applied, err := m.apply(steps)
	return Result{Applied: applied, Restart: restart}, err
}

// apply prepares every step (opening backends), and only if all could be
// prepared, runs them in order. It stops at the first step that fails.
func (m *Manager) apply(steps []step) ([]string, error) {
	if err := prepare(steps); err != nil {
		return nil, err
	}
	if m.gw != nil {
		if err := m.gw.recordAddrs(); err != nil {
			abort(steps)
			return nil, fmt.Errorf("%w: %w", ErrGroup, err)
		}
	}
	return m.run(steps)
}

// prepare prepares every step; when one fails, those prepared are aborted.
func prepare(steps []step) error {
	for i, s := range steps {
		if s.prepare == nil {
			continue
		}
		if err := s.prepare(); err != nil {
			abort(steps[:i])
			return err
		}
	}
	return nil
}

// abort undoes what preparing steps did.
func abort(steps []step) {
	for _, p := range steps {
		if p.abort != nil {
			p.abort()
		}
	}
}

// run runs prepared steps in order, and stops at the first that fails.
func (m *Manager) run(steps []step) ([]string, error) {
	applied := []string{}
	for i, s := range steps {
		if err := s.do(m); err != nil {
			abort(steps[i+1:])
			return applied, fmt.Errorf("%s: %w", s.what, err)
		}
		m.log.Debug("configuration step", "step", s.what)
		applied = append(applied, s.what)
	}
	return applied, nil
}
