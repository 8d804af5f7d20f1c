package group

import (
	"bytes"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
)

// fuzzObject makes a state object from fuzz input: the object's data, then
// omap keys and values, NUL-separated.
func fuzzObject(b []byte) Object {
	parts := bytes.Split(b, []byte{0})
	o := Object{Data: parts[0], Omap: map[string][]byte{}, Version: 1}
	for i := 1; i+1 < len(parts); i += 2 {
		o.Omap[string(parts[i])] = parts[i+1]
	}
	return o
}

// fuzzInput is the inverse of fuzzObject, for seeds.
func fuzzInput(o Object) []byte {
	b := slices.Clone(o.Data)
	for _, k := range slices.Sorted(maps.Keys(o.Omap)) {
		b = append(append(append(append(b, 0), k...), 0), o.Omap[k]...)
	}
	return b
}

// FuzzDecode: the state object comes from RADOS, where anyone with the
// pool's keys may write anything. Decoding never panics; what decodes is
// ErrCorrupt-free and encodes back to a state that decodes the same.
// Seeds: testdata/fuzz/FuzzDecode and those added here.
func FuzzDecode(f *testing.F) {
	f.Add(fuzzInput(object(sample())))
	f.Add(fuzzInput(object(Empty())))
	o := object(sample())
	o.Omap["namespace/"+sub1+"/01"] = []byte(`{"backend":"memory","ana_group":1}`)
	f.Add(fuzzInput(o))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(fuzzObject(b))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		again, err := Decode(Object{Data: []byte(Header), Omap: s.Omap(), Version: 1})
		if err != nil {
			t.Fatalf("re-encoded state does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, s) {
			t.Fatalf("round trip\n%+v\n%+v", s, again)
		}
	})
}
