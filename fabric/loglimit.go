package fabric

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Refused Connects and failed authentications are logged, but a host that
// floods the target with them must not flood the log: at most
// limitedLogBurst lines of each at once, then one per limitedLogEvery.
// Every one is still counted (nvmeof_tgt_connect_rejects_total,
// nvmeof_tgt_auth_total).
const (
	limitedLogBurst = 20
	limitedLogEvery = time.Second
)

// logLimit lets log lines through at a bounded rate and counts those it
// holds back, for the next line let through to report.
type logLimit struct {
	lim        *rate.Limiter
	suppressed atomic.Uint64
	now        func() time.Time // time.Now; tests replace it before use
}

func newLogLimit() logLimit {
	return logLimit{lim: rate.NewLimiter(rate.Every(limitedLogEvery), limitedLogBurst), now: time.Now}
}

// log logs msg at lvl if the rate allows, with the count of lines held
// back since the last one ("suppressed"); otherwise it counts this one as
// held back.
func (l *logLimit) log(lg *slog.Logger, lvl slog.Level, msg string, args ...any) {
	if !l.lim.AllowN(l.now(), 1) {
		l.suppressed.Add(1)
		return
	}
	if n := l.suppressed.Swap(0); n > 0 {
		args = append(args, "suppressed", n)
	}
	lg.Log(context.Background(), lvl, msg, args...)
}
