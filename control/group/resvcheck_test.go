package group

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

// regHost is the lower-case UUID of host number i.
func regHost(i int) string { return fmt.Sprintf("00000000-0000-0000-0000-%012x", i) }

// TestReservationCheckCap: a record with more registrants than a namespace
// may have (limits.ResvRegistrants), or more notices or aborted hosts than
// one change can owe, is refused as corrupt; one at the cap is taken.
func TestReservationCheckCap(t *testing.T) {
	atCap := func() Reservation {
		r := Reservation{Type: 5, Seq: 2}
		for i := range limits.ResvRegistrants {
			r.Registrants = append(r.Registrants, Registrant{regHost(i + 1), uint64(i + 1)})
			r.Notices = append(r.Notices, ResvNotice{regHost(i + 1), 1})
			r.Aborted = append(r.Aborted, regHost(i+1))
		}
		return r
	}
	over := limits.ResvRegistrants + 1
	tests := []struct {
		name string
		edit func(r *Reservation)
		want string // "": taken
	}{
		{"at the cap", func(r *Reservation) {}, ""},
		{"a registrant past it", func(r *Reservation) { r.Registrants = append(r.Registrants, Registrant{regHost(over), 1}) }, "registrants"},
		{"a notice past it", func(r *Reservation) { r.Notices = append(r.Notices, ResvNotice{regHost(over), 1}) }, "notices"},
		{"an aborted host past it", func(r *Reservation) { r.Aborted = append(r.Aborted, regHost(over)) }, "aborted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := atCap()
			tt.edit(&r)
			err := r.Check()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check: %v, want an error naming %q", err, tt.want)
			}
			// The decoder refuses the record whole.
			s := sample()
			s.Reservations[NSRef{sub1, 1}] = r
			_, err = Decode(object(s))
			if (err == nil) != (tt.want == "") || (err != nil && !errors.Is(err, ErrCorrupt)) {
				t.Fatalf("Decode: %v", err)
			}
		})
	}
}
