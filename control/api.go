package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

// The management API (docs/api.md): HTTP with JSON resources on a Unix
// socket, as Docker and Incus serve theirs, so that curl --unix-socket and
// the CLI both work. Every change goes through Update or Reload.

// maxBody bounds a request body; the largest, a subsystem with its
// namespaces, is a few KiB.
const maxBody = 1 << 20

var (
	errNoHost = errors.New("no such host")
	errExists = errors.New("already exists")
)

// refusal is a change refused because the target is not as the request
// expected: what it names is missing (404) or exists already (409). The
// request itself was fine, so the refusal carries its own status and
// message through the ErrInvalid that Update wraps it in.
type refusal struct {
	code int
	err  error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

func notFound(err error) error { return &refusal{http.StatusNotFound, err} }
func conflict(err error) error { return &refusal{http.StatusConflict, err} }

// The API's routes (docs/api.md). Handler registers each and Client calls
// each, so that every path is written once. A {name} is one path segment.
const (
	pathStatus     = "/v1/status"
	pathConfig     = "/v1/config"
	pathReload     = "/v1/reload"
	pathSubsystems = "/v1/subsystems"
	pathSubsystem  = pathSubsystems + "/{nqn}"
	pathNamespaces = pathSubsystem + "/namespaces"
	pathNamespace  = pathNamespaces + "/{nsid}"
	pathResize     = pathNamespace + "/resize"
	pathHosts      = pathSubsystem + "/hosts"
	pathHost       = pathHosts + "/{host}"
	pathPorts      = "/v1/ports"
	pathPort       = pathPorts + "/{transport}/{address}/{port}"
	pathPortANA    = pathPorts + "/{id}/ana"
	pathPortGroup  = pathPortANA + "/{group}"
	pathSubPorts   = pathSubsystem + "/ports"
	pathNSGroup    = pathNamespace + "/ana_group"
	pathNSHosts    = pathNamespace + "/hosts"
	pathNSHost     = pathNSHosts + "/{host}"
	pathNSQoS      = pathNamespace + "/qos"
	pathNSQoSHost  = pathNSQoS + "/hosts/{host}"
	pathFence      = "/v1/group/gateways/{id}/fence"
)

// route is a method on a path.
type route struct{ method, path string }

var (
	routeStatus          = route{http.MethodGet, pathStatus}
	routeConfig          = route{http.MethodGet, pathConfig}
	routeReload          = route{http.MethodPost, pathReload}
	routeSubsystems      = route{http.MethodGet, pathSubsystems}
	routeAddSubsystem    = route{http.MethodPost, pathSubsystems}
	routeSubsystem       = route{http.MethodGet, pathSubsystem}
	routeRemoveSubsystem = route{http.MethodDelete, pathSubsystem}
	routeNamespaces      = route{http.MethodGet, pathNamespaces}
	routeAddNamespace    = route{http.MethodPost, pathNamespaces}
	routeRemoveNamespace = route{http.MethodDelete, pathNamespace}
	routeResizeNamespace = route{http.MethodPost, pathResize}
	routeHosts           = route{http.MethodGet, pathHosts}
	routeAddHost         = route{http.MethodPost, pathHosts}
	routeSetHost         = route{http.MethodPut, pathHost}
	routeRemoveHost      = route{http.MethodDelete, pathHost}
	routePorts           = route{http.MethodGet, pathPorts}
	routeAddPort         = route{http.MethodPost, pathPorts}
	routeRemovePort      = route{http.MethodDelete, pathPort}
	routePortANA         = route{http.MethodGet, pathPortANA}
	routeSetANAState     = route{http.MethodPut, pathPortGroup}
	routeSetSubPorts     = route{http.MethodPut, pathSubPorts}
	routeSetANAGroup     = route{http.MethodPut, pathNSGroup}
	routeAddNSHost       = route{http.MethodPost, pathNSHosts}
	routeRemoveNSHost    = route{http.MethodDelete, pathNSHost}
	routeSetNSQoS        = route{http.MethodPut, pathNSQoS}
	routeSetNSHostQoS    = route{http.MethodPut, pathNSQoSHost}
	routeRemoveNSHostQoS = route{http.MethodDelete, pathNSQoSHost}
	routeFenceGateway    = route{http.MethodPost, pathFence}
)

// pattern is the route as http.ServeMux takes it.
func (r route) pattern() string { return r.method + " " + r.path }

// url fills the route's {names}, in order, with args, each escaped as one
// segment. "." and ".." are escaped too, so that nothing on the way
// cleans them into another path: the server refuses them (checkPath).
func (r route) url(args ...string) string {
	segs := strings.Split(r.path, "/")
	n := 0
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			if n == len(args) {
				panic("route " + r.path + ": too few arguments")
			}
			segs[i] = url.PathEscape(args[n])
			if args[n] == "." || args[n] == ".." {
				segs[i] = strings.ReplaceAll(args[n], ".", "%2E")
			}
			n++
		}
	}
	if n != len(args) {
		panic("route " + r.path + ": too many arguments")
	}
	return strings.Join(segs, "/")
}

// Handler serves the management API.
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(routeStatus.pattern(), func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.Status())
	})
	mux.HandleFunc(routeConfig.pattern(), m.getConfig)
	mux.HandleFunc(routeReload.pattern(), func(w http.ResponseWriter, r *http.Request) {
		res, err := m.Reload(apiCaller(r))
		writeResult(w, http.StatusOK, res, err)
	})

	mux.HandleFunc(routeSubsystems.pattern(), func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.Status().Subsystems)
	})
	mux.HandleFunc(routeAddSubsystem.pattern(), m.addSubsystemHTTP)
	mux.HandleFunc(routeSubsystem.pattern(), m.getSubsystem)
	mux.HandleFunc(routeRemoveSubsystem.pattern(), m.removeSubsystemHTTP)

	mux.HandleFunc(routeNamespaces.pattern(), m.listNamespaces)
	mux.HandleFunc(routeAddNamespace.pattern(), m.addNamespaceHTTP)
	mux.HandleFunc(routeRemoveNamespace.pattern(), m.removeNamespaceHTTP)
	mux.HandleFunc(routeResizeNamespace.pattern(), m.resizeNamespaceHTTP)

	mux.HandleFunc(routeHosts.pattern(), m.listHosts)
	mux.HandleFunc(routeAddHost.pattern(), m.addHostHTTP)
	mux.HandleFunc(routeSetHost.pattern(), m.setHostHTTP)
	mux.HandleFunc(routeRemoveHost.pattern(), m.removeHostHTTP)

	mux.HandleFunc(routePorts.pattern(), func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.Status().Ports)
	})
	mux.HandleFunc(routeAddPort.pattern(), m.addPortHTTP)
	mux.HandleFunc(routeRemovePort.pattern(), m.removePortHTTP)
	mux.HandleFunc(routePortANA.pattern(), m.portANAHTTP)
	mux.HandleFunc(routeSetANAState.pattern(), m.setANAStateHTTP)
	mux.HandleFunc(routeSetSubPorts.pattern(), m.setSubsystemPortsHTTP)
	mux.HandleFunc(routeSetANAGroup.pattern(), m.setANAGroupHTTP)
	mux.HandleFunc(routeAddNSHost.pattern(), m.addNSHostHTTP)
	mux.HandleFunc(routeRemoveNSHost.pattern(), m.removeNSHostHTTP)
	mux.HandleFunc(routeSetNSQoS.pattern(), m.setNSQoSHTTP)
	mux.HandleFunc(routeSetNSHostQoS.pattern(), m.setNSHostQoSHTTP)
	mux.HandleFunc(routeRemoveNSHostQoS.pattern(), m.removeNSHostQoSHTTP)
	mux.HandleFunc(routeFenceGateway.pattern(), m.fenceGatewayHTTP)
	return jsonErrors{mux}
}

// jsonErrors refuses a path that is not canonical, and turns the mux's
// own plain-text 404 and 405 into the JSON error body every other failure
// has, keeping the 405's Allow header.
type jsonErrors struct{ mux *http.ServeMux }

func (j jsonErrors) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := checkPath(r.URL.EscapedPath()); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	h, pattern := j.mux.Handler(r)
	if pattern != "" {
		j.mux.ServeHTTP(w, r) // which sets the path values
		return
	}
	cw := &codeWriter{ResponseWriter: w}
	h.ServeHTTP(cw, r)
	if cw.code != 0 {
		writeError(w, cw.code, errors.New(strings.ToLower(http.StatusText(cw.code))))
	}
}

// checkPath refuses a path with an empty, "." or ".." segment, escaped or
// not. The mux would clean it and redirect (307) to another resource: a
// client that followed DELETE /v1/subsystems/A/hosts/.. removed A.
func checkPath(escaped string) error {
	segs := strings.Split(strings.TrimPrefix(escaped, "/"), "/")
	for i, seg := range segs {
		s, err := url.PathUnescape(seg)
		switch {
		case err != nil:
			return fmt.Errorf("path %q: %w", escaped, err)
		case s == "" && i == len(segs)-1:
			// "/" or a trailing '/': the mux answers 404, as for any
			// other path with no route.
		case s == "" || s == "." || s == "..":
			return fmt.Errorf("path %q: an empty, \".\" or \"..\" segment names no resource", escaped)
		}
	}
	return nil
}

// codeWriter passes a response through unless it is an error, whose code
// it keeps and whose body it drops.
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (c *codeWriter) WriteHeader(code int) {
	if code >= 400 {
		c.code = code
		return
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *codeWriter) Write(b []byte) (int, error) {
	if c.code != 0 {
		return len(b), nil
	}
	return c.ResponseWriter.Write(b)
}

func (m *Manager) getConfig(w http.ResponseWriter, r *http.Request) {
	data, err := config.Marshal(m.Running().Redacted())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "text/yaml; charset=utf-8")
	w.Write(data)
}

// Request bodies. Their keys are those of the configuration file.

// SubsystemRequest is the body of POST /v1/subsystems.
type SubsystemRequest struct {
	NQN          string             `json:"nqn"`
	AllowAnyHost bool               `json:"allow_any_host"`
	Hosts        []string           `json:"hosts"`
	Serial       string             `json:"serial,omitempty"`
	Model        string             `json:"model,omitempty"`
	Ports        []int              `json:"ports,omitempty"`
	CNTLIDMin    int                `json:"cntlid_min,omitempty"`
	CNTLIDMax    int                `json:"cntlid_max,omitempty"`
	Namespaces   []NamespaceRequest `json:"namespaces,omitempty"`
}

// NamespaceRequest is the body of POST /v1/subsystems/{nqn}/namespaces.
type NamespaceRequest struct {
	NSID       uint32 `json:"nsid"`
	Backend    string `json:"backend,omitempty"`
	Path       string `json:"path,omitempty"`
	Size       Size   `json:"size,omitempty"`
	BlockSize  uint32 `json:"block_size,omitempty"`
	UUID       string `json:"uuid,omitempty"`
	NGUID      string `json:"nguid,omitempty"`
	EUI64      string `json:"eui64,omitempty"`
	ANAGroup   uint32 `json:"ana_group,omitempty"`
	ReadOnly   bool   `json:"read_only,omitempty"`
	BufferedIO bool   `json:"buffered_io,omitempty"`
	// Pool, Image, CephConf and Client are an rbd namespace's.
	Pool     string `json:"pool,omitempty"`
	Image    string `json:"image,omitempty"`
	CephConf string `json:"ceph_conf,omitempty"`
	Client   string `json:"client,omitempty"`
	// Hosts masks the namespace to these hosts; none: every host.
	Hosts []string `json:"hosts,omitempty"`
	// QoS and QoSPerHost are its limits, as PUT .../qos and
	// .../qos/hosts/{host} set them.
	QoS        *QoSRequest        `json:"qos,omitempty"`
	QoSPerHost *QoSPerHostRequest `json:"qos_per_host,omitempty"`
}

func (n NamespaceRequest) config() config.Namespace {
	c := config.Namespace{NSID: n.NSID, Backend: n.Backend, Path: n.Path, Size: config.Bytes(n.Size),
		BlockSize: n.BlockSize, UUID: n.UUID, NGUID: config.HexID(n.NGUID), EUI64: config.HexID(n.EUI64),
		ANAGroup: n.ANAGroup, ReadOnly: n.ReadOnly, BufferedIO: n.BufferedIO,
		Pool: n.Pool, Image: n.Image, CephConf: n.CephConf, Client: n.Client, Hosts: n.Hosts}
	if n.QoS != nil {
		c.QoS = n.QoS.config()
	}
	if p := n.QoSPerHost; p != nil {
		c.QoSPerHost.Default = p.Default.config()
		for _, h := range p.Hosts {
			c.QoSPerHost.Hosts = append(c.QoSPerHost.Hosts, config.HostQoS{NQN: h.NQN, QoS: h.QoSRequest.config()})
		}
	}
	return c
}

// QoSRequest is a set of QoS limits, the body of PUT
// /v1/subsystems/{nqn}/namespaces/{nsid}/qos (the namespace's, all hosts
// together) and of .../qos/hosts/{host} (one host's, or with host
// "default" every host's without its own). Bandwidths are bytes per
// second, a number or a string with a unit ("100MB"); 0 or absent: no
// limit. A PUT replaces every limit of its scope.
type QoSRequest struct {
	IOPS      uint64 `json:"iops,omitempty"`
	ReadIOPS  uint64 `json:"read_iops,omitempty"`
	WriteIOPS uint64 `json:"write_iops,omitempty"`
	BW        Size   `json:"bw,omitempty"`
	ReadBW    Size   `json:"read_bw,omitempty"`
	WriteBW   Size   `json:"write_bw,omitempty"`
}

func (q QoSRequest) config() config.QoS {
	return config.QoS{IOPS: q.IOPS, ReadIOPS: q.ReadIOPS, WriteIOPS: q.WriteIOPS,
		BW: config.Bytes(q.BW), ReadBW: config.Bytes(q.ReadBW), WriteBW: config.Bytes(q.WriteBW)}
}

func qosRequestOf(q config.QoS) QoSRequest {
	return QoSRequest{IOPS: q.IOPS, ReadIOPS: q.ReadIOPS, WriteIOPS: q.WriteIOPS,
		BW: Size(q.BW), ReadBW: Size(q.ReadBW), WriteBW: Size(q.WriteBW)}
}

// QoSPerHostRequest is a namespace's per-host limits in a
// NamespaceRequest: Default for any host, Hosts their own.
type QoSPerHostRequest struct {
	Default QoSRequest       `json:"default"`
	Hosts   []HostQoSRequest `json:"hosts,omitempty"`
}

// HostQoSRequest is one host's limits.
type HostQoSRequest struct {
	NQN string `json:"nqn"`
	QoSRequest
}

// NSHostRequest is the body of POST
// /v1/subsystems/{nqn}/namespaces/{nsid}/hosts: a host the namespace is
// shown to.
type NSHostRequest struct {
	NQN string `json:"nqn"`
}

// QoSDefaultHost is the {host} of .../qos/hosts/{host} that names every
// host without limits of its own; no NQN is spelt so.
const QoSDefaultHost = "default"

// ResizeRequest is the body of POST /v1/subsystems/{nqn}/namespaces/{nsid}/resize.
// Size is required; 0 means the backend's size now (a file's length, a
// block device's whole size, an RBD image's size), read again on every
// request. An RBD image is resized to a nonzero Size.
type ResizeRequest struct {
	Size  *Size `json:"size"`
	Force bool  `json:"force,omitempty"`
}

// HostRequest is the body of POST /v1/subsystems/{nqn}/hosts, and of PUT
// /v1/subsystems/{nqn}/hosts/{host} (the NQN then comes from the path)
// which rotates a host's DH-HMAC-CHAP secrets. The secrets are DHHC-1
// strings, inline or in files readable by the target's user only.
type HostRequest struct {
	NQN               string `json:"nqn"`
	DHCHAPKey         string `json:"dhchap_key,omitempty"`
	DHCHAPKeyFile     string `json:"dhchap_key_file,omitempty"`
	DHCHAPCtrlKey     string `json:"dhchap_ctrl_key,omitempty"`
	DHCHAPCtrlKeyFile string `json:"dhchap_ctrl_key_file,omitempty"`
}

func (h HostRequest) config() config.Host {
	return config.Host{NQN: h.NQN, DHCHAPKey: h.DHCHAPKey, DHCHAPKeyFile: h.DHCHAPKeyFile,
		DHCHAPCtrlKey: h.DHCHAPCtrlKey, DHCHAPCtrlKeyFile: h.DHCHAPCtrlKeyFile}
}

// HostInfo is an entry of GET /v1/subsystems/{nqn}/hosts: never a secret,
// only whether the host authenticates ("none", "host" or
// "bidirectional").
type HostInfo struct {
	NQN    string `json:"nqn"`
	DHCHAP string `json:"dhchap"`
}

// PortRequest is the body of POST /v1/ports. Port 0 means 4420.
type PortRequest struct {
	// ID is the NVMe port ID; 0: the next after the highest in use.
	ID        int               `json:"id,omitempty"`
	Transport string            `json:"transport"`
	Address   string            `json:"address"`
	Port      int               `json:"port,omitempty"`
	ANAGroups map[string]string `json:"ana_groups,omitempty"`
}

// ANAStateRequest is the body of PUT /v1/ports/{id}/ana/{group}.
type ANAStateRequest struct {
	State string `json:"state"`
}

// SubsystemPortsRequest is the body of PUT /v1/subsystems/{nqn}/ports:
// the IDs of the ports that serve it, none for every port.
type SubsystemPortsRequest struct {
	Ports []int `json:"ports"`
}

// ANAGroupRequest is the body of PUT
// /v1/subsystems/{nqn}/namespaces/{nsid}/ana_group.
type ANAGroupRequest struct {
	ANAGroup uint32 `json:"ana_group"`
}

// Size is a size in bytes that JSON gives as a number or as a string with
// a unit, "1GiB", as the configuration file does (config.ParseBytes).
type Size config.Bytes

// UnmarshalJSON implements json.Unmarshaler.
func (s *Size) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		v, err := config.ParseBytes(str)
		*s = Size(v)
		return err
	}
	var n uint64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("size %s: want a whole number of bytes or a string such as \"1GiB\"", b)
	}
	*s = Size(n)
	return nil
}

// MarshalJSON writes the size as a string, "1GiB", which reads back.
func (s Size) MarshalJSON() ([]byte, error) { return json.Marshal(config.Bytes(s).String()) }

// ErrorResponse is the body of every error. Applied lists the steps made
// before a change failed midway, which the target then serves.
type ErrorResponse struct {
	Error   string   `json:"error"`
	Applied []string `json:"applied,omitempty"`
}

func (m *Manager) addSubsystemHTTP(w http.ResponseWriter, r *http.Request) {
	var req SubsystemRequest
	if !decode(w, r, &req) {
		return
	}
	sc := config.Subsystem{NQN: req.NQN, AllowAnyHost: req.AllowAnyHost, Hosts: hostsOf(req.Hosts), Serial: req.Serial, Model: req.Model, Ports: req.Ports, CNTLIDMin: req.CNTLIDMin, CNTLIDMax: req.CNTLIDMax}
	for _, n := range req.Namespaces {
		sc.Namespaces = append(sc.Namespaces, n.config())
	}
	res, err := m.Update(apiCaller(r), func(c *config.Config) error {
		if findSubsystem(c, sc.NQN) != nil {
			return conflict(fmt.Errorf("subsystem %s: %w", sc.NQN, errExists))
		}
		c.Subsystems = append(c.Subsystems, sc)
		return nil
	}, false)
	if err == nil {
		w.Header().Set("Location", routeSubsystem.url(sc.NQN))
	}
	writeResult(w, http.StatusCreated, res, err)
}

// subsystem returns the running subsystem named by the path, or writes a
// 404.
func (m *Manager) subsystem(w http.ResponseWriter, r *http.Request) (SubsystemStatus, bool) {
	nqn := r.PathValue("nqn")
	for _, s := range m.Status().Subsystems {
		if s.NQN == nqn {
			return s, true
		}
	}
	writeError(w, http.StatusNotFound, fmt.Errorf("subsystem %s: %w", nqn, fabric.ErrNoSubsystem))
	return SubsystemStatus{}, false
}

func (m *Manager) getSubsystem(w http.ResponseWriter, r *http.Request) {
	if s, ok := m.subsystem(w, r); ok {
		writeJSON(w, http.StatusOK, s)
	}
}

func (m *Manager) listNamespaces(w http.ResponseWriter, r *http.Request) {
	if s, ok := m.subsystem(w, r); ok {
		writeJSON(w, http.StatusOK, s.Namespaces)
	}
}

func (m *Manager) listHosts(w http.ResponseWriter, r *http.Request) {
	if _, ok := m.subsystem(w, r); ok {
		s := findSubsystem(m.Running(), r.PathValue("nqn"))
		if s == nil {
			writeJSON(w, http.StatusOK, []HostInfo{})
			return
		}
		hosts := make([]HostInfo, 0, len(s.Hosts))
		for _, h := range s.Hosts {
			auth := "none"
			switch {
			case h.DHCHAPCtrlKey != "" || h.DHCHAPCtrlKeyFile != "":
				auth = "bidirectional"
			case h.HasSecret():
				auth = "host"
			}
			hosts = append(hosts, HostInfo{NQN: h.NQN, DHCHAP: auth})
		}
		writeJSON(w, http.StatusOK, hosts)
	}
}

// editSubsystem changes the subsystem named by the path, which must exist.
func (m *Manager) editSubsystem(r *http.Request, force bool, edit func(c *config.Config, s *config.Subsystem) error) (Result, error) {
	return m.editSubsystemWith(r, changeOpts{force: force}, edit)
}

func (m *Manager) editSubsystemWith(r *http.Request, opts changeOpts, edit func(c *config.Config, s *config.Subsystem) error) (Result, error) {
	nqn := r.PathValue("nqn")
	return m.updateWith(apiCaller(r), func(c *config.Config) error {
		s := findSubsystem(c, nqn)
		if s == nil {
			return notFound(fmt.Errorf("subsystem %s: %w", nqn, fabric.ErrNoSubsystem))
		}
		return edit(c, s)
	}, opts)
}

func (m *Manager) removeSubsystemHTTP(w http.ResponseWriter, r *http.Request) {
	res, err := m.editSubsystem(r, false, func(c *config.Config, s *config.Subsystem) error {
		nqn := s.NQN
		c.Subsystems = slices.DeleteFunc(c.Subsystems, func(s config.Subsystem) bool { return s.NQN == nqn })
		return nil
	})
	writeResult(w, http.StatusOK, res, err)
}

func (m *Manager) addNamespaceHTTP(w http.ResponseWriter, r *http.Request) {
	var req NamespaceRequest
	if !decode(w, r, &req) {
		return
	}
	res, err := m.editSubsystem(r, false, func(c *config.Config, s *config.Subsystem) error {
		if findNamespace(s, req.NSID) != nil {
			return conflict(fmt.Errorf("namespace %d of %s: %w", req.NSID, s.NQN, errExists))
		}
		s.Namespaces = append(s.Namespaces, req.config())
		return nil
	})
	writeResult(w, http.StatusCreated, res, err)
}

// nsid parses the path's NSID, or writes a 400.
func nsid(w http.ResponseWriter, r *http.Request) (uint32, bool) {
	n, err := strconv.ParseUint(r.PathValue("nsid"), 10, 32)
	if err != nil || n == 0 {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: NSID %q: want a number from 1", ErrInvalid, r.PathValue("nsid")))
		return 0, false
	}
	return uint32(n), true
}

func (m *Manager) removeNamespaceHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := nsid(w, r)
	if !ok {
		return
	}
	res, err := m.editSubsystem(r, false, func(c *config.Config, s *config.Subsystem) error {
		if findNamespace(s, id) == nil {
			return notFound(fmt.Errorf("namespace %d of %s: %w", id, s.NQN, fabric.ErrNoNamespace))
		}
		s.Namespaces = slices.DeleteFunc(s.Namespaces, func(n config.Namespace) bool { return n.NSID == id })
		return nil
	})
	writeResult(w, http.StatusOK, res, err)
}

func (m *Manager) resizeNamespaceHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := nsid(w, r)
	if !ok {
		return
	}
	var req ResizeRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Size == nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: size is required", ErrInvalid))
		return
	}
	// The backend's size is read again even when the configuration's
	// stays 0: the file or volume may have grown since.
	opts := changeOpts{force: req.Force, reread: func(nqn string, n config.Namespace) bool {
		return nqn == r.PathValue("nqn") && n.NSID == id
	}}
	res, err := m.editSubsystemWith(r, opts, func(c *config.Config, s *config.Subsystem) error {
		n := findNamespace(s, id)
		if n == nil {
			return notFound(fmt.Errorf("namespace %d of %s: %w", id, s.NQN, fabric.ErrNoNamespace))
		}
		n.Size = config.Bytes(*req.Size)
		return nil
	})
	writeResult(w, http.StatusOK, res, err)
}

func (m *Manager) addHostHTTP(w http.ResponseWriter, r *http.Request) {
	var req HostRequest
	if !decode(w, r, &req) {
		return
	}
	res, err := m.editSubsystem(r, false, func(c *config.Config, s *config.Subsystem) error {
		if config.FindHost(s.Hosts, req.NQN) != nil {
			return conflict(fmt.Errorf("host %s on %s: %w", req.NQN, s.NQN, errExists))
		}
		s.Hosts = append(s.Hosts, req.config())
		return nil
	})
	writeResult(w, http.StatusCreated, res, err)
}

// setHostHTTP replaces a host's secrets: a key rotation. The host's queues
// authenticated with the old secrets stay; its next authentication takes
// the new ones.
func (m *Manager) setHostHTTP(w http.ResponseWriter, r *http.Request) {
	var req HostRequest
	if !decode(w, r, &req) {
		return
	}
	req.NQN = r.PathValue("host")
	res, err := m.editSubsystem(r, false, func(c *config.Config, s *config.Subsystem) error {
		h := config.FindHost(s.Hosts, req.NQN)
		if h == nil {
			return notFound(fmt.Errorf("host %s on %s: %w", req.NQN, s.NQN, errNoHost))
		}
		*h = req.config()
		return nil
	})
	writeResult(w, http.StatusOK, res, err)
}

func hostsOf(nqns []string) []config.Host {
	hosts := make([]config.Host, len(nqns))
	for i, n := range nqns {
		hosts[i] = config.Host{NQN: n}
	}
	return hosts
}

func (m *Manager) removeHostHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.PathValue("host")
	res, err := m.editSubsystem(r, false, func(c *config.Config, s *config.Subsystem) error {
		if config.FindHost(s.Hosts, host) == nil {
			return notFound(fmt.Errorf("host %s on %s: %w", host, s.NQN, errNoHost))
		}
		s.Hosts = slices.DeleteFunc(s.Hosts, func(h config.Host) bool { return h.NQN == host })
		return nil
	})
	writeResult(w, http.StatusOK, res, err)
}

// samePort compares ports as Validate does: "::ffff:10.0.0.1" is 10.0.0.1.
func samePort(a, b config.Port) bool {
	if a.Transport != b.Transport || a.Port != b.Port {
		return false
	}
	x, errX := netip.ParseAddr(a.Address)
	y, errY := netip.ParseAddr(b.Address)
	if errX != nil || errY != nil {
		return a.Address == b.Address
	}
	return x.Unmap() == y.Unmap()
}

func (m *Manager) addPortHTTP(w http.ResponseWriter, r *http.Request) {
	var req PortRequest
	if !decode(w, r, &req) {
		return
	}
	p := config.Port{ID: req.ID, Transport: req.Transport, Address: req.Address, Port: req.Port, ANAGroups: req.ANAGroups}
	if p.Port == 0 {
		p.Port = 4420 // as config.ApplyDefaults, before looking for a duplicate
	}
	res, err := m.Update(apiCaller(r), func(c *config.Config) error {
		if slices.ContainsFunc(c.Ports, func(q config.Port) bool { return samePort(p, q) }) {
			return conflict(fmt.Errorf("port %s: %w", portName(p), errExists))
		}
		if p.ID == 0 {
			for _, q := range c.Ports {
				p.ID = max(p.ID, q.ID)
			}
			p.ID++
		} else if findPort(c, p.ID) != nil {
			return conflict(fmt.Errorf("port ID %d: %w", p.ID, errExists))
		}
		c.Ports = append(c.Ports, p)
		return nil
	}, false)
	writeResult(w, http.StatusCreated, res, err)
}

// portID parses the path's port ID, or writes a 400.
func portID(w http.ResponseWriter, r *http.Request) (int, bool) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id < 1 {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: port ID %q: want a number from 1", ErrInvalid, r.PathValue("id")))
		return 0, false
	}
	return id, true
}

// portANAHTTP answers the ANA state of each group through a port: those of
// the groups its namespaces use or the configuration names.
func (m *Manager) portANAHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := portID(w, r)
	if !ok {
		return
	}
	for _, p := range m.Status().Ports {
		if int(p.ID) == id {
			writeJSON(w, http.StatusOK, p.ANAGroups)
			return
		}
	}
	writeError(w, http.StatusNotFound, fmt.Errorf("port %d: %w", id, fabric.ErrNoPort))
}

// setANAStateHTTP sets one ANA group's state through a port, live.
func (m *Manager) setANAStateHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := portID(w, r)
	if !ok {
		return
	}
	var req ANAStateRequest
	if !decode(w, r, &req) {
		return
	}
	group := r.PathValue("group")
	res, err := m.Update(apiCaller(r), func(c *config.Config) error {
		p := findPort(c, id)
		if p == nil {
			return notFound(fmt.Errorf("port %d: %w", id, fabric.ErrNoPort))
		}
		p.ANAGroups = maps.Clone(p.ANAGroups)
		if p.ANAGroups == nil {
			p.ANAGroups = map[string]string{}
		}
		p.ANAGroups[group] = req.State // Validate checks both
		return nil
	}, false)
	writeResult(w, http.StatusOK, res, err)
}

// setSubsystemPortsHTTP sets the ports that serve a subsystem.
func (m *Manager) setSubsystemPortsHTTP(w http.ResponseWriter, r *http.Request) {
	var req SubsystemPortsRequest
	if !decode(w, r, &req) {
		return
	}
	res, err := m.editSubsystem(r, false, func(c *config.Config, s *config.Subsystem) error {
		s.Ports = slices.Clone(req.Ports)
		return nil
	})
	writeResult(w, http.StatusOK, res, err)
}

// setANAGroupHTTP moves a namespace to another ANA group, live.
func (m *Manager) setANAGroupHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := nsid(w, r)
	if !ok {
		return
	}
	var req ANAGroupRequest
	if !decode(w, r, &req) {
		return
	}
	res, err := m.editSubsystem(r, false, func(c *config.Config, s *config.Subsystem) error {
		n := findNamespace(s, id)
		if n == nil {
			return notFound(fmt.Errorf("namespace %d of %s: %w", id, s.NQN, fabric.ErrNoNamespace))
		}
		n.ANAGroup = req.ANAGroup
		return nil
	})
	writeResult(w, http.StatusOK, res, err)
}

// editNamespace changes the namespace named by the path, which must
// exist.
func (m *Manager) editNamespace(w http.ResponseWriter, r *http.Request, edit func(s *config.Subsystem, n *config.Namespace) error) {
	id, ok := nsid(w, r)
	if !ok {
		return
	}
	res, err := m.editSubsystem(r, false, func(c *config.Config, s *config.Subsystem) error {
		n := findNamespace(s, id)
		if n == nil {
			return notFound(fmt.Errorf("namespace %d of %s: %w", id, s.NQN, fabric.ErrNoNamespace))
		}
		return edit(s, n)
	})
	writeResult(w, http.StatusOK, res, err)
}

// addNSHostHTTP shows a masked namespace to one more host, live. A
// namespace with no mask is every host's already, and one host added would
// hide it from the others: refused, as ceph-nvmeof refuses add_host on a
// namespace visible to all. Whether a namespace has a mask is set when it
// is added (hosts) or in the configuration file.
func (m *Manager) addNSHostHTTP(w http.ResponseWriter, r *http.Request) {
	var req NSHostRequest
	if !decode(w, r, &req) {
		return
	}
	m.editNamespace(w, r, func(s *config.Subsystem, n *config.Namespace) error {
		switch {
		case len(n.Hosts) == 0:
			return conflict(fmt.Errorf("namespace %d of %s: %w", n.NSID, s.NQN, errNoMask))
		case slices.Contains(n.Hosts, req.NQN):
			return conflict(fmt.Errorf("host %s of namespace %d of %s: %w", req.NQN, n.NSID, s.NQN, errExists))
		}
		n.Hosts = append(slices.Clone(n.Hosts), req.NQN)
		return nil
	})
}

// errNoMask refuses adding a host to a namespace every host sees.
var errNoMask = errors.New("has no mask: every host sees it, and a host added would hide it from the others; " +
	"add it with its hosts (ns add --host) or set its hosts in the configuration file")

// errLastHost refuses taking the last host off a mask: an empty mask shows
// the namespace to every host, the opposite of what was asked.
var errLastHost = errors.New("the last host of a namespace's mask: an empty mask shows it to every host; remove the namespace, " +
	"or add another host first, or clear the mask in the configuration file")

func (m *Manager) removeNSHostHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.PathValue("host")
	m.editNamespace(w, r, func(s *config.Subsystem, n *config.Namespace) error {
		switch {
		case !slices.Contains(n.Hosts, host):
			return notFound(fmt.Errorf("host %s of namespace %d of %s: %w", host, n.NSID, s.NQN, errNoHost))
		case len(n.Hosts) == 1:
			return conflict(fmt.Errorf("host %s of namespace %d of %s: %w", host, n.NSID, s.NQN, errLastHost))
		}
		n.Hosts = slices.DeleteFunc(slices.Clone(n.Hosts), func(h string) bool { return h == host })
		return nil
	})
}

// setNSQoSHTTP sets a namespace's limits, all hosts together, live.
func (m *Manager) setNSQoSHTTP(w http.ResponseWriter, r *http.Request) {
	var req QoSRequest
	if !decode(w, r, &req) {
		return
	}
	m.editNamespace(w, r, func(s *config.Subsystem, n *config.Namespace) error {
		n.QoS = req.config()
		return nil
	})
}

// setNSHostQoSHTTP sets one host's limits on a namespace, or with host
// QoSDefaultHost every host's without their own, live.
func (m *Manager) setNSHostQoSHTTP(w http.ResponseWriter, r *http.Request) {
	var req QoSRequest
	if !decode(w, r, &req) {
		return
	}
	host := r.PathValue("host")
	m.editNamespace(w, r, func(s *config.Subsystem, n *config.Namespace) error {
		hosts := slices.Clone(n.QoSPerHost.Hosts)
		switch h := config.FindHostQoS(hosts, host); {
		case host == QoSDefaultHost:
			n.QoSPerHost.Default = req.config()
		case h != nil:
			h.QoS = req.config()
		default:
			hosts = append(hosts, config.HostQoS{NQN: host, QoS: req.config()})
		}
		n.QoSPerHost.Hosts = hosts
		return nil
	})
}

// removeNSHostQoSHTTP removes a host's own limits on a namespace: the
// default applies to it again. For QoSDefaultHost, the default goes.
func (m *Manager) removeNSHostQoSHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.PathValue("host")
	m.editNamespace(w, r, func(s *config.Subsystem, n *config.Namespace) error {
		if host == QoSDefaultHost {
			n.QoSPerHost.Default = config.QoS{}
			return nil
		}
		if config.FindHostQoS(n.QoSPerHost.Hosts, host) == nil {
			return notFound(fmt.Errorf("QoS of host %s on namespace %d of %s: %w", host, n.NSID, s.NQN, errNoHost))
		}
		n.QoSPerHost.Hosts = slices.DeleteFunc(slices.Clone(n.QoSPerHost.Hosts), func(h config.HostQoS) bool { return h.NQN == host })
		return nil
	})
}

// fenceGatewayHTTP fences a dead gateway of the group on the operator's
// word (Manager.FenceGateway).
func (m *Manager) fenceGatewayHTTP(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id < 1 || id > limits.GroupGateways {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: gateway %q: want a number in 1..%d", ErrInvalid, r.PathValue("id"), limits.GroupGateways))
		return
	}
	res := Result{Applied: []string{"fence gateway " + strconv.Itoa(id)}}
	if err = m.FenceGateway(id); err != nil {
		res = Result{}
	}
	m.audit(apiCaller(r), "fence gateway "+strconv.Itoa(id), res, err)
	writeResult(w, http.StatusOK, res, err)
}

func (m *Manager) removePortHTTP(w http.ResponseWriter, r *http.Request) {
	pn, err := strconv.Atoi(r.PathValue("port"))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: port %q: want a number", ErrInvalid, r.PathValue("port")))
		return
	}
	p := config.Port{Transport: r.PathValue("transport"), Address: r.PathValue("address"), Port: pn}
	res, err := m.Update(apiCaller(r), func(c *config.Config) error {
		i := slices.IndexFunc(c.Ports, func(q config.Port) bool { return samePort(p, q) })
		if i < 0 {
			return notFound(fmt.Errorf("port %s: %w", portName(p), fabric.ErrNoPort))
		}
		c.Ports = slices.Delete(c.Ports, i, i+1)
		return nil
	}, false)
	writeResult(w, http.StatusOK, res, err)
}

// decode reads a JSON request body into v, refusing unknown keys, a
// second value and bodies over maxBody. On failure it writes the error.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("more than one JSON value")
	}
	if err == nil {
		return true
	}
	code := http.StatusBadRequest
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		code = http.StatusRequestEntityTooLarge
		err = fmt.Errorf("more than %d bytes", tooBig.Limit)
	case errors.Is(err, io.EOF):
		err = errors.New("empty; want a JSON object")
	}
	writeError(w, code, fmt.Errorf("%w: request body: %w", ErrInvalid, err))
	return false
}

// statusOf maps an error from Update or Reload to an HTTP status. A
// refusal comes first: Update wraps it with ErrInvalid.
func statusOf(err error) int {
	var r *refusal
	switch {
	case errors.As(err, &r):
		return r.code
	case errors.Is(err, ErrEdited):
		return http.StatusConflict
	case errors.Is(err, ErrGroup):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrNoFile),
		errors.Is(err, blockdev.ErrInvalidArgument), // a block namespace resized past its device, an RBD pool or image missing
		errors.Is(err, blockdev.ErrExclusiveLock),   // an RBD image several gateways cannot write
		errors.Is(err, blockdev.ErrNotSupported):    // rbd in a build without librbd
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// writeResult writes a change's Result, or its error with the steps made
// before it.
func writeResult(w http.ResponseWriter, code int, res Result, err error) {
	if err != nil {
		msg := err
		if r := (*refusal)(nil); errors.As(err, &r) {
			msg = r // its own message, not ErrInvalid's
		}
		writeJSON(w, statusOf(err), ErrorResponse{Error: oneLine(msg), Applied: res.Applied})
		return
	}
	writeJSON(w, code, res)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, ErrorResponse{Error: oneLine(err)})
}

// oneLine joins the lines of an error (Validate joins one per problem).
func oneLine(err error) string {
	return strings.Join(strings.FieldsFunc(err.Error(), func(r rune) bool { return r == '\n' }), "; ")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	EncodeJSON(w, v)
}

// ListenAPI listens on the Unix socket path for the management API, mode
// 0600 so that only root (the daemon's user) may change the target. It
// creates the socket's directory, refuses one that others may write,
// replaces a socket left by a target that died, and refuses to take over
// one that another target answers on.
func ListenAPI(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("api socket: %w", err)
	}
	if err := checkSocketDir(dir); err != nil {
		return nil, err
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	// Bind under a temporary name and rename into place, so that path
	// is replaced whole; the socket is 0600 from the bind on.
	tmp := filepath.Join(dir, "."+filepath.Base(path)+"."+strconv.Itoa(os.Getpid()))
	os.Remove(tmp)
	l, err := bindPrivate(tmp)
	if err != nil {
		return nil, fmt.Errorf("api socket: %w", err)
	}
	l.SetUnlinkOnClose(false)
	if afterBind != nil {
		afterBind(tmp)
	}
	if err := os.Rename(tmp, path); err != nil {
		l.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("api socket: %w", err)
	}
	st, err := os.Lstat(path)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("api socket: %w", err)
	}
	return &apiListener{UnixListener: l, path: path, st: st}, nil
}

// umaskMu serializes bindPrivate's changes of the umask.
var umaskMu sync.Mutex

// bindPrivate binds a Unix socket at path with mode 0600: bind(2) makes
// it 0777 less the umask, so the umask is 0177 for that call alone; a
// chmod after the bind would leave a moment where others may connect. The
// umask is the process's: a file another goroutine makes in that moment
// is at most 0600 too, never more open.
func bindPrivate(path string) (*net.UnixListener, error) {
	umaskMu.Lock()
	defer umaskMu.Unlock()
	old := syscall.Umask(0o177)
	defer syscall.Umask(old)
	return net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
}

// checkSocketDir refuses a socket directory that anyone but this user and
// root may write, the sticky /tmp included: they could put a socket of
// their own in the target's place, and the CLI would send it changes and
// DH-HMAC-CHAP secrets.
func checkSocketDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("api socket: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("api socket directory %s is writable by group or others (%v): another user could replace the socket; "+
			"use a directory only its owner may write (chmod go-w), or set api.socket", dir, perm)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("api socket directory %s is owned by uid %d, not by this user or root: that user could replace the socket; "+
			"set api.socket to a directory of this user's or root's", dir, sys.Uid)
	}
	return nil
}

// afterBind, when set by a test, is called with the socket's path just
// after it is bound.
var afterBind func(path string)

// removeStale removes path if it is a socket nothing answers on.
func removeStale(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("api socket: %w", err)
	}
	if st.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("api socket %s: exists and is not a socket", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("api socket %s: another nvmeof-tgt answers on it; stop it first, or set api.socket", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("api socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("api socket: remove stale %s: %w", path, err)
	}
	return nil
}

// apiListener removes its socket on its first Close, unless another
// target has replaced it since. Only the first: the server and
// http.Server.Serve may each close it, and by the second a new socket may
// stand at the path on the freed inode, which SameFile would take for
// this one.
type apiListener struct {
	*net.UnixListener
	path   string
	st     os.FileInfo
	remove sync.Once
}

func (l *apiListener) Close() error {
	err := l.UnixListener.Close()
	l.remove.Do(func() {
		if st, serr := os.Lstat(l.path); serr == nil && os.SameFile(st, l.st) {
			os.Remove(l.path)
		}
	})
	return err
}
