package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

const dashboardPath = "../../deploy/grafana/nvmeof-tgt.json"

// dashboard is what the tests read of a Grafana dashboard.
type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"` // a string, or {"query": "..."}
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Type        string   `json:"type"`
	Title       string   `json:"title"`
	Panels      []panel  `json:"panels"` // a collapsed row's
	Targets     []target `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
		Overrides []struct {
			Matcher struct {
				ID      string `json:"id"`
				Options any    `json:"options"`
			} `json:"matcher"`
			Properties []struct {
				ID    string `json:"id"`
				Value any    `json:"value"`
			} `json:"properties"`
		} `json:"overrides"`
	} `json:"fieldConfig"`
	Transformations []transformation `json:"transformations"`
}

type transformation struct {
	ID      string `json:"id"`
	Options struct {
		ExcludeByName map[string]bool   `json:"excludeByName"`
		RenameByName  map[string]string `json:"renameByName"`
	} `json:"options"`
}

type target struct {
	RefID   string `json:"refId"`
	Expr    string `json:"expr"`
	Format  string `json:"format"`
	Instant bool   `json:"instant"`
}

func loadDashboard(t *testing.T) *dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	return &d
}

// allPanels are the dashboard's panels, those of collapsed rows included.
func (d *dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// queries are every PromQL query of the dashboard, named for messages: the
// panels' targets and the query variables (label_values(...) included).
func (d *dashboard) queries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			out[fmt.Sprintf("panel %q %s", p.Title, tg.RefID)] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q.Query); err != nil {
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Fatalf("variable %s: query %s: %v", v.Name, v.Query, err)
			}
		}
		out["variable "+v.Name] = q.Query
		if v.Definition != "" {
			out["variable "+v.Name+" definition"] = v.Definition
		}
	}
	return out
}

// served maps every series name /metrics serves to its label names. It is
// parsed from the exposition, as Prometheus reads it: a histogram is its
// _bucket (with le), _sum and _count series, a summary its own series (with
// quantile), _sum and _count.
func served(t *testing.T) map[string]map[string]bool {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(scrape(t, testRegistry(t, 1, 1))))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]map[string]bool{}
	add := func(series string, m *dto.Metric, extra ...string) {
		if out[series] == nil {
			out[series] = map[string]bool{}
		}
		for _, l := range m.GetLabel() {
			out[series][l.GetName()] = true
		}
		for _, l := range extra {
			out[series][l] = true
		}
	}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(name+"_bucket", m, "le")
				add(name+"_sum", m)
				add(name+"_count", m)
			case dto.MetricType_SUMMARY:
				add(name, m, "quantile")
				add(name+"_sum", m)
				add(name+"_count", m)
			default:
				add(name, m)
			}
		}
	}
	return out
}

// scrapeLabels are the labels Prometheus adds to every series it scrapes.
var scrapeLabels = map[string]bool{"instance": true, "job": true}

// TestDashboardMetrics checks every metric the Grafana dashboard queries,
// and every label it filters or groups on, against what /metrics serves
// (the registry serve builds, newRegistry, over a target that ran I/O).
func TestDashboardMetrics(t *testing.T) {
	have := served(t)
	used := map[string]bool{}
	for where, q := range loadDashboard(t).queries(t) {
		sels, grouping, err := promqlNames(q)
		if err != nil {
			t.Errorf("%s: %v in %s", where, err, q)
			continue
		}
		if len(sels) == 0 {
			t.Errorf("%s: no metric in %s", where, q)
		}
		labels := map[string]bool{}
		for _, s := range sels {
			used[s.name] = true
			l, ok := have[s.name]
			if !ok {
				t.Errorf("%s queries %s, which nvmeof-tgt does not export", where, s.name)
				continue
			}
			for _, n := range s.labels {
				if !l[n] && !scrapeLabels[n] {
					t.Errorf("%s filters %s on label %q, which it does not have", where, s.name, n)
				}
			}
			for n := range l {
				labels[n] = true
			}
		}
		for _, n := range grouping {
			if !labels[n] && !scrapeLabels[n] && n != "__name__" {
				t.Errorf("%s groups by label %q, which none of its metrics has", where, n)
			}
		}
	}
	if len(used) < 10 {
		t.Errorf("found only %d metric names in the dashboard: %v", len(used), used)
	}
}

// Unit classes of Grafana's unit IDs.
var (
	byteUnits = setOf("bytes", "decbytes", "bits", "decbits", "kbytes", "mbytes", "gbytes",
		"Bps", "binBps", "bps", "binbps", "KBs", "KiBs", "MBs", "MiBs", "GBs", "GiBs")
	timeUnits = setOf("ns", "µs", "ms", "s", "m", "h", "d", "dtdurations", "dtdurationms", "clockms", "clocks")
)

func setOf(s ...string) map[string]bool {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return m
}

// portStatMetric is the one metric whose unit is in a label (counter: data
// in 4-octet words, packets, events), so its panels' units are not checked.
const portStatMetric = "nvmeof_tgt_rdma_port_stat_total"

// dimension is what a metric's values measure, from its name as Prometheus
// names them: a base unit suffix before _total, or a histogram's _bucket
// and _sum; a _count, or no unit, is a number of things.
func dimension(name string) string {
	if strings.HasSuffix(name, "_count") {
		return "count"
	}
	for _, s := range []string{"_total", "_bucket", "_sum"} {
		name = strings.TrimSuffix(name, s)
	}
	switch {
	case strings.HasSuffix(name, "_bytes"):
		return "bytes"
	case strings.HasSuffix(name, "_seconds"):
		return "seconds"
	}
	return "count"
}

// unitFits says whether Grafana unit u suits a query whose first metric
// measures dim: bytes only in byte units, seconds only as a duration or, a
// rate of CPU seconds, a fraction; a count in neither.
func unitFits(dim, u string) bool {
	switch dim {
	case "bytes":
		return byteUnits[u]
	case "seconds":
		return timeUnits[u] || u == "percentunit"
	}
	return !byteUnits[u] && !timeUnits[u]
}

// columnName is the name Grafana gives the value column of target refID in
// a table: "Value" alone, "Value #<refId>" beside other queries.
func columnName(p panel, refID string) string {
	if len(p.Targets) == 1 {
		return "Value"
	}
	return "Value #" + refID
}

// column is the name a table shows for field name after the organize
// transformation, and whether it hides it.
func (p panel) column(name string) (shown string, hidden bool) {
	shown = name
	for _, tr := range p.Transformations {
		if tr.ID != "organize" {
			continue
		}
		if tr.Options.ExcludeByName[name] {
			return name, true
		}
		if r := tr.Options.RenameByName[name]; r != "" {
			shown = r
		}
	}
	return shown, false
}

// unit is the unit a panel shows target tg in: its default, overridden by
// the overrides matching the query (byFrameRefID) or, in a table, its value
// column (byName, after the organize renames). Overrides that set a unit by
// another matcher cannot be resolved here and are reported.
func (p panel) unit(t *testing.T, tg target) string {
	u := p.FieldConfig.Defaults.Unit
	col := ""
	if p.Type == "table" {
		col, _ = p.column(columnName(p, tg.RefID))
	}
	for _, o := range p.FieldConfig.Overrides {
		for _, prop := range o.Properties {
			if prop.ID != "unit" {
				continue
			}
			opt, _ := o.Matcher.Options.(string)
			switch {
			case o.Matcher.ID == "byFrameRefID" && opt == tg.RefID,
				o.Matcher.ID == "byName" && col != "" && opt == col:
				u, _ = prop.Value.(string)
			case o.Matcher.ID != "byFrameRefID" && (o.Matcher.ID != "byName" || p.Type != "table"):
				t.Errorf("panel %q: an override sets the unit by %s; use byFrameRefID (or byName on a table column) so that this test can check it", p.Title, o.Matcher.ID)
			}
		}
	}
	return u
}

// TestDashboardUnits checks that every query is shown in a unit that fits
// what its first metric measures (its numerator, in a ratio): no goroutine
// counts in bytes, no byte sizes as plain numbers.
func TestDashboardUnits(t *testing.T) {
	n := 0
	for _, p := range loadDashboard(t).allPanels() {
		for _, tg := range p.Targets {
			if p.Type == "table" {
				if _, hidden := p.column(columnName(p, tg.RefID)); hidden {
					continue
				}
			}
			sels, _, err := promqlNames(tg.Expr)
			if err != nil || len(sels) == 0 {
				t.Errorf("panel %q %s: no metric in %s (%v)", p.Title, tg.RefID, tg.Expr, err)
				continue
			}
			if sels[0].name == portStatMetric {
				continue
			}
			n++
			dim, u := dimension(sels[0].name), p.unit(t, tg)
			if !unitFits(dim, u) {
				t.Errorf("panel %q %s: %s (%s) shown in unit %q", p.Title, tg.RefID, sels[0].name, dim, u)
			}
		}
	}
	if n < 20 {
		t.Errorf("checked the units of only %d queries", n)
	}
}

func TestDimension(t *testing.T) {
	for name, want := range map[string]string{
		"go_goroutines":                               "count",
		"nvmeof_tgt_namespace_ops_total":              "count",
		"nvmeof_tgt_namespace_bytes_total":            "bytes",
		"nvmeof_tgt_namespace_capacity_bytes":         "bytes",
		"process_resident_memory_bytes":               "bytes",
		"go_memstats_alloc_bytes_total":               "bytes",
		"process_cpu_seconds_total":                   "seconds",
		"nvmeof_tgt_namespace_latency_seconds_bucket": "seconds",
		"nvmeof_tgt_namespace_latency_seconds_sum":    "seconds",
		"nvmeof_tgt_namespace_latency_seconds_count":  "count",
		"nvmeof_tgt_controllers_by_state":             "count",
		"nvmeof_tgt_namespace_block_size_bytes":       "bytes",
		"nvmeof_tgt_rdma_send_with_invalidate_total":  "count",
		"nvmeof_tgt_connect_host_limit_total":         "count",
	} {
		if got := dimension(name); got != want {
			t.Errorf("dimension(%s) = %s, want %s", name, got, want)
		}
	}
}

// aggregation is a query that aggregates its metric away: sum, max, ... by
// a list of labels.
var aggregation = regexp.MustCompile(`^\s*(?:sum|max|min|avg|group)\s+by\s*\(([^)]*)\)`)

// TestDashboardTables checks the table panels: instant queries in table
// format, every value column named (not Grafana's "Value" or "Value #A") or
// hidden, and, where a merge joins several queries into one row per key,
// queries that keep the same labels and drop the metric name, which would
// otherwise differ and keep each query's rows apart.
func TestDashboardTables(t *testing.T) {
	tables := 0
	for _, p := range loadDashboard(t).allPanels() {
		if p.Type != "table" {
			continue
		}
		tables++
		merge := slices.ContainsFunc(p.Transformations, func(tr transformation) bool { return tr.ID == "merge" })
		var keys []string
		for i, tg := range p.Targets {
			if tg.Format != "table" || !tg.Instant {
				t.Errorf("table %q %s: format %q, instant %v; want an instant query in table format", p.Title, tg.RefID, tg.Format, tg.Instant)
			}
			name := columnName(p, tg.RefID)
			if shown, hidden := p.column(name); !hidden && strings.HasPrefix(shown, "Value") {
				t.Errorf("table %q %s: column %q; rename it (organize renameByName) or hide it", p.Title, tg.RefID, shown)
			}
			if !merge || len(p.Targets) == 1 {
				continue
			}
			m := aggregation.FindStringSubmatch(tg.Expr)
			if m == nil {
				t.Errorf("table %q %s: merged with other queries but keeps the metric name: %s", p.Title, tg.RefID, tg.Expr)
				continue
			}
			k := strings.Fields(strings.ReplaceAll(m[1], ",", " "))
			sort.Strings(k)
			if i > 0 && keys != nil && !reflect.DeepEqual(k, keys) {
				t.Errorf("table %q %s: by %v, but %s is by %v: merge cannot join them", p.Title, tg.RefID, k, p.Targets[0].RefID, keys)
			}
			if keys == nil {
				keys = k
			}
		}
	}
	if tables == 0 {
		t.Error("no table panel")
	}
}

// portCounterNames are RDMA port counters as sysfs names them, and whether
// each tells of a fault (an error, a retry, a drop, a link going down): the
// InfiniBand PMA counters/ (drivers/infiniband/core/sysfs.c), and the
// hw_counters/ of Soft-RoCE (sw/rxe/rxe_hw_counters.c) and mlx5
// (hw/mlx5/counters.c). Some are in several.
var portCounterNames = []struct {
	name  string
	fault bool
}{
	// counters/
	{"symbol_error", true},
	{"link_error_recovery", true},
	{"link_downed", true},
	{"port_rcv_errors", true},
	{"port_rcv_remote_physical_errors", true},
	{"port_rcv_switch_relay_errors", true},
	{"port_xmit_discards", true},
	{"port_xmit_constraint_errors", true},
	{"port_rcv_constraint_errors", true},
	{"local_link_integrity_errors", true},
	{"excessive_buffer_overrun_errors", true},
	{"VL15_dropped", true},
	{"port_xmit_data", false},
	{"port_rcv_data", false},
	{"port_xmit_packets", false},
	{"port_rcv_packets", false},
	{"port_xmit_wait", false},
	{"unicast_xmit_packets", false},
	{"unicast_rcv_packets", false},
	{"multicast_xmit_packets", false},
	{"multicast_rcv_packets", false},
	// rxe
	{"sent_pkts", false},
	{"rcvd_pkts", false},
	{"duplicate_request", true},
	{"out_of_seq_request", true},
	{"rcvd_rnr_err", true},
	{"send_rnr_err", true},
	{"rcvd_seq_err", true},
	{"ack_deferred", false}, // the completer was scheduled rather than run
	{"retry_exceeded_err", true},
	{"retry_rnr_exceeded_err", true},
	{"completer_retry_err", true},
	{"send_err", true},
	{"rdma_sends", false},
	{"rdma_recvs", false},
	// mlx5
	{"rx_write_requests", false},
	{"rx_read_requests", false},
	{"rx_atomic_requests", false},
	{"rx_dct_connect", false},
	{"out_of_buffer", true},
	{"out_of_sequence", true},
	{"rnr_nak_retry_err", true},
	{"packet_seq_err", true},
	{"implied_nak_seq_err", true},
	{"local_ack_timeout_err", true},
	{"resp_local_length_error", true},
	{"resp_cqe_error", true},
	{"req_cqe_error", true},
	{"req_remote_invalid_request", true},
	{"req_remote_access_errors", true},
	{"resp_remote_access_errors", true},
	{"resp_cqe_flush_error", true},
	{"req_cqe_flush_error", true},
	{"roce_adp_retrans", true},
	{"roce_adp_retrans_to", true},
	{"rp_cnp_ignored", false},
	{"rp_cnp_handled", false},
	{"np_ecn_marked_roce_packets", false},
	{"np_cnp_sent", false},
	{"rx_icrc_encapsulated", false},
}

// counterMatcher is the counter=~"..." matcher of a query.
var counterMatcher = regexp.MustCompile(`\bcounter=~("(?:[^"\\]|\\.)*")`)

// TestDashboardPortErrors checks the port errors panel's counter regex, as
// Prometheus applies it (anchored at both ends), against the drivers'
// counter names: every fault counter and nothing else.
func TestDashboardPortErrors(t *testing.T) {
	var exprs []string
	for _, p := range loadDashboard(t).allPanels() {
		if strings.HasPrefix(p.Title, "Port errors") {
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
		}
	}
	if len(exprs) != 1 {
		t.Fatalf("want one query on a panel titled Port errors..., got %q", exprs)
	}
	m := counterMatcher.FindStringSubmatch(exprs[0])
	if m == nil {
		t.Fatalf("no counter=~ matcher in %s", exprs[0])
	}
	s, err := strconv.Unquote(m[1])
	if err != nil {
		t.Fatalf("%s: %v", m[1], err)
	}
	re, err := regexp.Compile("^(?:" + s + ")$")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range portCounterNames {
		if got := re.MatchString(c.name); got != c.fault {
			t.Errorf("counter %s: matched %v, want %v (regex %s)", c.name, got, c.fault, s)
		}
	}
}

// promSelector is a metric a PromQL expression reads, with the label names
// its matchers test.
type promSelector struct {
	name   string
	labels []string
}

// labelValues is Grafana's variable query label_values(expr, label), or
// label_values(label).
var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(?:(.*\S)\s*,\s*)?([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// promKeywords are PromQL's words that are not metric names when they are
// not followed by "(": binary operators and modifiers, and inf and nan.
var promKeywords = setOf("and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "by", "without",
	"on", "ignoring", "group_left", "group_right")

// promGrouping are the keywords followed by a list of label names.
var promGrouping = setOf("by", "without", "on", "ignoring", "group_left", "group_right")

// promqlNames returns the metric selectors of PromQL expression (or of a
// Grafana variable query, label_values) expr, in order, and the label names
// its by, without, on, ignoring and group_left/right lists name.
//
// It tokenises instead of parsing (the Prometheus parser is a heavy
// dependency): an identifier is a metric name unless it is a keyword, calls a
// function or aggregation (followed by "(", or by "by" or "without"), is in a
// label list, or is inside a label matcher block, a string, or a range or
// subquery ("[...]"). Grafana variables ($name, ${name}) are no identifiers.
func promqlNames(expr string) (sels []promSelector, grouping []string, err error) {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		grouping = append(grouping, m[2])
		if m[1] == "" {
			return nil, grouping, nil
		}
		expr = m[1]
	}
	toks, err := promTokens(expr)
	if err != nil {
		return nil, nil, err
	}
	next := func(i int) string {
		if i+1 < len(toks) {
			return toks[i+1].text
		}
		return ""
	}
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		switch {
		case tk.text == "[":
			for i < len(toks) && toks[i].text != "]" {
				i++
			}
			if i == len(toks) {
				return nil, nil, fmt.Errorf("unclosed [")
			}
		case tk.text == "{": // a selector without a metric name
			_, i, err = promMatchers(toks, i)
			if err != nil {
				return nil, nil, err
			}
		case tk.kind != 'i':
		case promGrouping[tk.text] && next(i) == "(":
			for i += 2; i < len(toks) && toks[i].text != ")"; i++ {
				if toks[i].kind == 'i' {
					grouping = append(grouping, toks[i].text)
				}
			}
			if i == len(toks) {
				return nil, nil, fmt.Errorf("unclosed %s (", tk.text)
			}
		case next(i) == "(", next(i) == "by", next(i) == "without", promKeywords[tk.text]:
		default:
			s := promSelector{name: tk.text}
			if next(i) == "{" {
				s.labels, i, err = promMatchers(toks, i+1)
				if err != nil {
					return nil, nil, err
				}
			}
			sels = append(sels, s)
		}
	}
	return sels, grouping, nil
}

// promMatchers reads the label matchers of the block that opens at
// toks[open] ("{"): the label names, and the index of its "}".
func promMatchers(toks []promToken, open int) (labels []string, end int, err error) {
	for i := open + 1; i < len(toks); i++ {
		switch tk := toks[i]; {
		case tk.text == "}":
			return labels, i, nil
		case tk.kind == 'i' && i+1 < len(toks) && slices.Contains([]string{"=", "!=", "=~", "!~"}, toks[i+1].text):
			labels = append(labels, tk.text)
		}
	}
	return nil, 0, fmt.Errorf("unclosed {")
}

// promToken is a token of PromQL: kind 'i' an identifier, 's' a string, 'n'
// a number or duration, 'v' a Grafana variable, 'p' punctuation or an
// operator.
type promToken struct {
	kind byte
	text string
}

func promIdent(c byte, first bool) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == ':' || !first && c >= '0' && c <= '9'
}

// promOps are PromQL's two-character operators.
var promOps = setOf("=~", "!=", "!~", "==", "<=", ">=")

func promTokens(s string) ([]promToken, error) {
	var out []promToken
	for i := 0; i < len(s); {
		c := s[i]
		j := i + 1
		kind := byte('p')
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '"' || c == '\'' || c == '`':
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && c != '`' {
					j++
				}
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			j++
			kind = 's'
		case c == '$':
			if j < len(s) && s[j] == '{' {
				k := strings.IndexByte(s[j:], '}')
				if k < 0 {
					return nil, fmt.Errorf("unclosed ${ at %d", i)
				}
				j += k + 1
			} else {
				for j < len(s) && promIdent(s[j], false) {
					j++
				}
			}
			kind = 'v'
		case promIdent(c, true):
			for j < len(s) && promIdent(s[j], false) {
				j++
			}
			kind = 'i'
		case c >= '0' && c <= '9' || c == '.':
			for j < len(s) && (promIdent(s[j], false) || s[j] == '.') {
				j++
			}
			kind = 'n'
		case j < len(s) && promOps[s[i:j+1]]:
			j++
		}
		out = append(out, promToken{kind, s[i:j]})
		i = j
	}
	return out, nil
}

func TestPromQLNames(t *testing.T) {
	for _, tc := range []struct {
		expr     string
		want     string // name{label,...} ...
		grouping string
	}{
		{`go_goroutines`, `go_goroutines`, ``},
		{`go_goroutines{instance=~"$instance"}`, `go_goroutines{instance}`, ``},
		{`histogram_quantile(0.99, sum by (le, op) (rate(nvmeof_tgt_x_bucket{subnqn=~"$subnqn", nsid!="1"}[$__rate_interval]))) / go_goroutines`,
			`nvmeof_tgt_x_bucket{subnqn,nsid} go_goroutines`, `le op`},
		{`sum(rate(a_total[5m])) by (x) / on(x) group_left(y) sum without (z) (b)`, `a_total b`, `x x y z`},
		{`4 * sum by (d) (rate(p_total{c=~"port_xmit_data|x{y}", g="counters"}[1m:10s] offset 5m)) > bool 1e3`, `p_total{c,g}`, `d`},
		{`a and b or c unless d`, `a b c d`, ``},
		{`max by (instance, subnqn, nsid) (m{instance=~"$instance"})`, `m{instance}`, `instance subnqn nsid`},
		{`{__name__=~"nvmeof_tgt_.*"}`, ``, ``},
		{`job:requests:rate5m{job='a"b'}`, `job:requests:rate5m{job}`, ``},
		{`rate(x[${__rate_interval}]) * ${factor}`, `x`, ``},
		{`label_values(nvmeof_tgt_build_info, instance)`, `nvmeof_tgt_build_info`, `instance`},
		{`label_values(m{a=~"$a", b="x,y"}, device)`, `m{a,b}`, `device`},
		{`label_values(instance)`, ``, `instance`},
		{`count_values without (x) ("v", m)`, `m`, `x`},
		{`topk(5, m) + inf`, `m`, ``},
	} {
		sels, grouping, err := promqlNames(tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		var got []string
		for _, s := range sels {
			if len(s.labels) > 0 {
				got = append(got, s.name+"{"+strings.Join(s.labels, ",")+"}")
			} else {
				got = append(got, s.name)
			}
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%s: metrics %q, want %q", tc.expr, g, tc.want)
		}
		if g := strings.Join(grouping, " "); g != tc.grouping {
			t.Errorf("%s: grouping %q, want %q", tc.expr, g, tc.grouping)
		}
	}
	for _, bad := range []string{`a{b="c"`, `rate(a[5m)`, `a{b="c}`, `sum by (a`, `x * ${y`} {
		if _, _, err := promqlNames(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
