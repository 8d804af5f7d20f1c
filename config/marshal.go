package config

import (
	"encoding"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Marshal writes c as YAML that Load reads back to the same configuration:
// the running configuration, for `config save` and for persisting changes
// made through the management API. Comments are not kept.
//
// Ports and subsystems leave out keys at their zero value (a namespace
// without a path, a subsystem closed to other hosts). The other sections
// are written whole: there a zero is a setting (poll_nap: 0s spins), not
// the absence of one.
func Marshal(c *Config) ([]byte, error) {
	root := &yaml.Node{Kind: yaml.MappingNode}
	v := reflect.ValueOf(c).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		key := keyOf(f)
		omitZero := key == "ports" || key == "referrals" || key == "subsystems" || key == "discovery"
		if key == "referrals" && v.Field(i).Len() == 0 {
			continue // most configurations have none
		}
		if key == "gateway_group" && c.GatewayGroup.Name == "" {
			continue // nor a group
		}
		n, err := node(v.Field(i), omitZero)
		if err != nil {
			return nil, fmt.Errorf("marshal %s: %w", key, err)
		}
		root.Content = append(root.Content, yamlString(key), n)
	}
	out, err := yaml.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("marshal config: %w", err)
	}
	return out, nil
}

func keyOf(f reflect.StructField) string {
	k, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
	return k
}

func yamlString(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

var textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()

func node(v reflect.Value, omitZero bool) (*yaml.Node, error) {
	switch {
	case v.Type() == durationType:
		return yamlString(time.Duration(v.Int()).String()), nil
	case v.Type() == hostType && !v.Interface().(Host).HasSecret():
		return yamlString(v.Interface().(Host).NQN), nil // a plain NQN stays one
	case v.Type().Implements(textMarshaler):
		b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return nil, err
		}
		return yamlString(string(b)), nil
	}
	switch v.Kind() {
	case reflect.Struct:
		m := &yaml.Node{Kind: yaml.MappingNode}
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			key := keyOf(f)
			if f.Anonymous && strings.Contains(f.Tag.Get("mapstructure"), ",squash") {
				// Its keys are the outer struct's (HostQoS).
				n, err := node(v.Field(i), omitZero)
				if err != nil {
					return nil, err
				}
				m.Content = append(m.Content, n.Content...)
				continue
			}
			if key == "" || !f.IsExported() || omitZero && v.Field(i).IsZero() {
				continue
			}
			n, err := node(v.Field(i), omitZero)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			m.Content = append(m.Content, yamlString(key), n)
		}
		return m, nil
	case reflect.Slice:
		s := &yaml.Node{Kind: yaml.SequenceNode}
		for i := 0; i < v.Len(); i++ {
			n, err := node(v.Index(i), omitZero)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			s.Content = append(s.Content, n)
		}
		return s, nil
	case reflect.Map:
		m := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return mapKeyCompare(a.String(), b.String()) })
		for _, k := range keys {
			n, err := node(v.MapIndex(k), omitZero)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			m.Content = append(m.Content, yamlString(k.String()), n)
		}
		return m, nil
	case reflect.String:
		return yamlString(v.String()), nil
	case reflect.Bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v.Bool())}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v.Int(), 10)}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatUint(v.Uint(), 10)}, nil
	}
	return nil, fmt.Errorf("cannot write a %s", v.Type())
}

// mapKeyCompare orders map keys numerically where they are numbers (ANA
// group IDs), so that "10" comes after "9".
func mapKeyCompare(a, b string) int {
	x, errX := strconv.Atoi(a)
	y, errY := strconv.Atoi(b)
	if errX == nil && errY == nil {
		return x - y
	}
	return strings.Compare(a, b)
}

// Clone returns a deep copy of c, to change without touching c.
func (c *Config) Clone() *Config {
	d := *c
	d.Ports = slices.Clone(c.Ports)
	for i := range d.Ports {
		d.Ports[i].ANAGroups = maps.Clone(c.Ports[i].ANAGroups)
	}
	d.Referrals = slices.Clone(c.Referrals)
	d.Subsystems = slices.Clone(c.Subsystems)
	for i := range d.Subsystems {
		s := &d.Subsystems[i]
		s.Hosts = slices.Clone(s.Hosts)
		s.DHCHAPHashes = slices.Clone(s.DHCHAPHashes)
		s.DHCHAPDHGroups = slices.Clone(s.DHCHAPDHGroups)
		s.Namespaces = slices.Clone(s.Namespaces)
		for j := range s.Namespaces {
			n := &s.Namespaces[j]
			n.Hosts = slices.Clone(n.Hosts)
			n.QoSPerHost.Hosts = slices.Clone(n.QoSPerHost.Hosts)
		}
		s.Ports = slices.Clone(s.Ports)
	}
	d.Discovery.Hosts = slices.Clone(c.Discovery.Hosts)
	return &d
}
