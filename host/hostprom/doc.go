// Package hostprom exports a kiln host's Stats as Prometheus metrics. It lives
// apart from package host so that an embedding application pulls in
// prometheus/client_golang only when it asks for metrics:
//
//	h, _ := host.Open(ctx, host.Options{})
//	prometheus.MustRegister(hostprom.New(h))
//
// Every scrape reads a fresh host.Stats snapshot (see docs/design.md, "Plugin
// trust and operation"); nothing is cached between scrapes.
package hostprom
