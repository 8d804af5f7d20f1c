package fabric

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Refused Connects and failed authentications are logged, but a host that
// floods the target with them must not flood the log: at most
// connectRefusalLogBurst lines of each at once, then one per
// connectRefusalLogEvery. Every one is still counted
// (nvmeof_tgt_connect_rejects_total, nvmeof_tgt_auth_total).
const (
	connectRefusalLogBurst = 20
	connectRefusalLogEvery = time.Second
)

// logLimit lets log lines through at a bounded rate and counts those it
// holds back, for the next line let through to report.
type logLimit struct {
	once       sync.Once
	lim        *rate.Limiter
	suppressed atomic.Uint64
	now        func() time.Time // time.Now; tests replace it before use
}

// allow reports whether a line may be logged now and, if so, how many were
// held back since the last one; otherwise it counts this one as held back.
func (l *logLimit) allow() (ok bool, suppressed uint64) {
	l.once.Do(func() {
		l.lim = rate.NewLimiter(rate.Every(connectRefusalLogEvery), connectRefusalLogBurst)
		if l.now == nil {
			l.now = time.Now
		}
	})
	if !l.lim.AllowN(l.now(), 1) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}
