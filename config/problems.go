package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/go-viper/mapstructure/v2"
)

// Problems returns the problems joined in err (by Load, LoadFile,
// CheckFile, Validate or CheckPaths) one by one, or err itself when it
// joins nothing.
func Problems(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, Problems(e)...)
		}
		return out
	}
	return []error{err}
}

// decodeProblems turns viper's decode error, a tree of joined
// mapstructure errors, into one FieldError per offending key.
func decodeProblems(err error) []error {
	var out []error
	for _, e := range decodeLeaves(err) {
		de, ok := e.(*mapstructure.DecodeError)
		if !ok {
			out = append(out, e)
			continue
		}
		inner := de.Unwrap()
		if keys, ok := strings.CutPrefix(inner.Error(), "has invalid keys: "); ok {
			for _, k := range strings.Split(keys, ", ") {
				out = append(out, &FieldError{Key: joinKey(de.Name(), k), Msg: "unknown key"})
			}
			continue
		}
		out = append(out, &FieldError{Key: de.Name(), Msg: decodeMsg(inner)})
	}
	return out
}

// decodeLeaves flattens a mapstructure error: joins of joins, under a
// wrapper ("decoding failed due to..."), down to each *DecodeError.
func decodeLeaves(err error) []error {
	switch e := err.(type) {
	case *mapstructure.DecodeError:
		return []error{e}
	case interface{ Unwrap() []error }:
		var out []error
		for _, c := range e.Unwrap() {
			out = append(out, decodeLeaves(c)...)
		}
		return out
	}
	if inner := errors.Unwrap(err); inner != nil {
		return decodeLeaves(inner)
	}
	return []error{err}
}

func joinKey(parent, k string) string {
	if parent == "" {
		return k
	}
	return parent + "." + k
}

// decodeMsg says what was wrong with a value in the operator's terms
// rather than Go's.
func decodeMsg(err error) string {
	var pe *mapstructure.ParseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%q: want %s", fmt.Sprint(pe.Value), kindName(pe.Expected.Type()))
	}
	var ue *mapstructure.UnconvertibleTypeError
	if errors.As(err, &ue) {
		return fmt.Sprintf("got %s, want %s", valueName(ue.Value), kindName(ue.Expected.Type()))
	}
	return err.Error()
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "a mapping of keys to values"
	}
	return t.String()
}

func valueName(v any) string {
	if v == nil {
		return "nothing"
	}
	switch reflect.TypeOf(v).Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return fmt.Sprintf("%q", fmt.Sprint(v))
}

// EnvVar is the environment variable that overrides key, e.g.
// NVMEOF_TGT_RDMA_MAX_QUEUE_DEPTH for rdma.max_queue_depth.
func EnvVar(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// blameEnv renames a problem whose value came from the environment after
// the variable, so the operator is not sent looking in the file. viper
// prefers a set, non-empty variable to the file, for each leaf key and
// for the lists ("ports[0].port" comes from NVMEOF_TGT_PORTS if set).
func blameEnv(errs []error) []error {
	for i, e := range errs {
		var fe *FieldError
		if !errors.As(e, &fe) {
			continue
		}
		key, _, _ := strings.Cut(fe.Key, "[")
		name := EnvVar(key)
		if val := os.Getenv(name); val != "" {
			errs[i] = &FieldError{Key: name + "=" + val, Msg: "environment variable: " + fe.Key + ": " + fe.Msg}
		}
	}
	return errs
}

// dropShadowed drops problems that only repeat a decode problem: a value
// that could not be decoded is left zero, and Validate would then report
// the zero too.
func dropShadowed(decode, rest []error) []error {
	var bad []string
	for _, e := range decode {
		var fe *FieldError
		if errors.As(e, &fe) && fe.Msg != "unknown key" {
			bad = append(bad, fe.Key)
		}
	}
	out := decode
	for _, e := range rest {
		var fe *FieldError
		if errors.As(e, &fe) && shadowed(fe.Key, bad) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// shadowed reports whether key is one of bad or lies under one.
func shadowed(key string, bad []string) bool {
	for _, b := range bad {
		if b == "" || key == b || strings.HasPrefix(key, b+".") || strings.HasPrefix(key, b+"[") {
			return true
		}
	}
	return false
}
