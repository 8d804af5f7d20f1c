package netlab

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveOrders answers the orders in dir as the launcher would, with answer, until ctx ends, and
// sends each order it got on the channel.
func serveOrders(ctx context.Context, t *testing.T, dir string, answer func(Order) Reply) <-chan Order {
	got := make(chan Order, 16)
	go func() {
		for ctx.Err() == nil {
			calls, err := Orders(dir)
			if err != nil {
				t.Error(err)
				return
			}
			for _, c := range calls {
				got <- c.Order
				if err := c.Reply(answer(c.Order)); err != nil {
					t.Error(err)
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return got
}

func TestOrders(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := serveOrders(ctx, t, dir, func(o Order) Reply {
		if o.Guest == "nobody" {
			return Reply{Error: "no guest"}
		}
		return Reply{Boots: 2}
	})

	r, err := RequestPower(ctx, dir, "target", PowerBoot)
	if err != nil || r.Boots != 2 {
		t.Errorf("boot: %+v, %v", r, err)
	}
	if o := <-got; o != (Order{Guest: "target", Action: PowerBoot}) {
		t.Errorf("order %+v", o)
	}
	if err := RequestCarrier(ctx, dir, "host", "a", false); err != nil {
		t.Error(err)
	}
	if o := <-got; o != (Order{Guest: "host", Action: CarrierOff, Link: "a"}) {
		t.Errorf("order %+v", o)
	}
	_, err = RequestPower(ctx, dir, "nobody", PowerKill)
	if err == nil || !strings.Contains(err.Error(), "no guest") {
		t.Errorf("an order the launcher refused: %v", err)
	}
	<-got
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left in the directory: %v", ents)
	}
}

func TestOrderNoLauncher(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := RequestPower(ctx, dir, "target", PowerKill); err == nil {
		t.Error("an order nobody answered returned no error")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left in the directory: %v", ents)
	}
}

func TestOrdersBadFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "1-x.req"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls, err := Orders(dir)
	if err != nil || len(calls) != 0 {
		t.Fatalf("Orders = %v, %v", calls, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "1-x.resp"))
	if err != nil || !strings.Contains(string(b), "bad request") {
		t.Errorf("answer to a bad order: %s, %v", b, err)
	}
}
