package host

import (
	"context"
	"fmt"

	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/pluginapi"
)

// DescribeNow asks the running plugin of backend id to describe itself again
// and returns what it says now: the readings that change while it runs (free
// memory, a bandwidth measured since it started, see
// pluginapi.BandwidthStatus). Selection keeps the description the plugin gave
// when it started (Description), so that a measurement never reorders the
// backends of a running host. It starts the plugin if needed, and relaunches
// it when it is down.
func (h *Host) DescribeNow(ctx context.Context, id string) (*pluginapi.Description, error) {
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	p, err := h.find(ctx, id)
	if err != nil {
		return nil, err
	}
	var desc *pluginapi.Description
	b := &Backend{p: p, adapter: adapterOf(p.desc, 0)}
	err = b.call(ctx, "describe", func(ctx context.Context, proc *process) error {
		d, err := proc.backend.Describe(client.WithReceiveLimit(ctx, describeLimit))
		if err != nil {
			return err
		}
		if err := checkDescription(d); err != nil {
			return fmt.Errorf("invalid description: %w", err)
		}
		if d.ID != p.desc.ID {
			return fmt.Errorf("the plugin now reports id %q instead of %q", d.ID, p.desc.ID)
		}
		desc = d
		return nil
	})
	if err != nil {
		return nil, err
	}
	return desc, nil
}
