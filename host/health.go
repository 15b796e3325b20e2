package host

import (
	"context"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/health/grpc_health_v1"
)

// Hang detection (see docs/design.md, "Supervision and reliability"): while a
// call is in flight, the host asks the plugin's gRPC health service, which the
// plugin answers on its own goroutines even while a long kernel runs. A plugin
// that answers nothing for the hang timeout is hung, not busy: the host kills it
// and its calls in flight fail with a TimeoutError (Hung set). So is one whose
// data plane's request ring stays full for the hang timeout (it stopped reading
// its requests, though it may answer health checks). An idle plugin is not
// asked.

// monitorInterval is how often the monitor asks a busy plugin: a fifth of the
// hang timeout, between 10ms and 1s.
func monitorInterval(hangTimeout time.Duration) time.Duration {
	return min(max(hangTimeout/5, 10*time.Millisecond), time.Second)
}

// monitor watches pr until it is stopped; it calls hung (once) when pr has
// calls in flight and has answered no health check for hangTimeout.
func (pr *process) monitor(hangTimeout time.Duration, hung func()) {
	if pr.health == nil || hangTimeout <= 0 {
		return
	}
	ticker := time.NewTicker(monitorInterval(hangTimeout))
	defer ticker.Stop()
	for {
		select {
		case <-pr.done:
			return
		case <-ticker.C:
		}
		pr.mu.Lock()
		busy := pr.inflight > 0
		pr.mu.Unlock()
		if !busy {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
		res, err := pr.health.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: goplugin.GRPCServiceName})
		cancel()
		stalled := pr.stalled() >= hangTimeout
		now := time.Now()
		pr.mu.Lock()
		if err == nil && res.GetStatus() == grpc_health_v1.HealthCheckResponse_SERVING && !stalled {
			pr.lastAnswer = now
			pr.mu.Unlock()
			continue
		}
		verdict := pr.inflight > 0 && !pr.stopped && (stalled || now.Sub(pr.lastAnswer) >= hangTimeout)
		if verdict {
			if exited, _, _ := pr.runner.exitInfo(); exited {
				verdict = false // a crash, not a hang: the call reports it
			}
		}
		if verdict {
			pr.hung = true
		}
		pr.mu.Unlock()
		if verdict {
			hung()
			return
		}
	}
}
