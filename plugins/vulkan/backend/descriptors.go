package backend

import (
	"encoding/binary"

	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// Descriptor sets are cached per pipeline and bound ranges (see docs/design.md,
// "Vulkan"): a set is written once and bound by every later dispatch of the
// pipeline over the same ranges. A pipeline keeps at most maxCachedSets; beyond
// that a set no pending job uses is rewritten for the new ranges. Whenever a set
// leaves its cache (rewritten, its block freed, its pipeline destroyed) the
// device's set generation grows, which makes every recorded command buffer
// stale (see recording).

const (
	setsPerPool   = 64
	maxCachedSets = 1024
)

// setCache is one pipeline's descriptor sets. The device lock guards it.
type setCache struct {
	pools []vk.DescriptorPool
	left  uint32 // sets not yet allocated from the last pool
	sets  map[string]*cachedSet
	spare []vk.DescriptorSet // sets whose ranges lay in a freed block
}

type cachedSet struct {
	set vk.DescriptorSet
	// used is the sequence number of the last job that bound the set.
	used    uint64
	buffers []vk.Buffer
}

// setKey appends to key what identifies bound ranges.
func setKey(key []byte, ranges []vk.StorageRange) []byte {
	for _, r := range ranges {
		key = binary.LittleEndian.AppendUint64(key, uint64(r.Buffer))
		key = binary.LittleEndian.AppendUint64(key, r.Offset)
		key = binary.LittleEndian.AppendUint64(key, r.Range)
	}
	return key
}

// descriptorSet returns p's set for ranges (key is their setKey), writing one
// on a miss, and notes that job seq binds it. The device lock must be held.
func (d *device) descriptorSet(p *pipeline, ranges []vk.StorageRange, key []byte, seq uint64) (*cachedSet, error) {
	c := d.caches[p]
	if c == nil {
		c = &setCache{sets: map[string]*cachedSet{}}
		d.caches[p] = c
	}
	if cs, ok := c.sets[string(key)]; ok {
		cs.used = seq
		return cs, nil
	}
	set, err := c.free(d, p)
	if err != nil {
		return nil, err
	}
	if err := d.vk.WriteStorageSet(set, ranges); err != nil {
		c.spare = append(c.spare, set)
		return nil, err
	}
	cs := &cachedSet{set: set, used: seq}
	for _, r := range ranges {
		cs.buffers = append(cs.buffers, r.Buffer)
	}
	c.sets[string(key)] = cs
	return cs, nil
}

// free returns a set that no pending job uses: a spare one, one evicted from a
// full cache, or a new one.
func (c *setCache) free(d *device, p *pipeline) (vk.DescriptorSet, error) {
	if n := len(c.spare); n > 0 {
		set := c.spare[n-1]
		c.spare = c.spare[:n-1]
		return set, nil
	}
	if len(c.sets) >= maxCachedSets {
		done := d.completed()
		for key, cs := range c.sets {
			if cs.used <= done {
				delete(c.sets, key)
				// Recorded command buffers that bind it are stale now.
				d.setGen++
				return cs.set, nil
			}
		}
	}
	if c.left == 0 {
		pool, err := d.vk.CreateStoragePool(max(p.setBindings(), 1), setsPerPool)
		if err != nil {
			return 0, err
		}
		c.pools = append(c.pools, pool)
		c.left = setsPerPool
	}
	set, err := d.vk.AllocateSet(c.pools[len(c.pools)-1], p.setLayout)
	if err != nil {
		return 0, err
	}
	c.left--
	return set, nil
}

// forgetBlock drops every cached set that binds the block's buffer, before the
// block is freed; no pending job may use the block.
func (d *device) forgetBlock(b *block) {
	d.lock <- struct{}{}
	defer d.release()
	// Recorded command buffers may use the block's buffer.
	d.setGen++
	for _, c := range d.caches {
		for key, cs := range c.sets {
			for _, buf := range cs.buffers {
				if buf == b.buf {
					delete(c.sets, key)
					c.spare = append(c.spare, cs.set)
					break
				}
			}
		}
	}
}

// forgetPipeline destroys p's descriptor sets; no pending job may use p.
func (d *device) forgetPipeline(p *pipeline) {
	d.lock <- struct{}{}
	c := d.caches[p]
	delete(d.caches, p)
	// Recorded command buffers may use the pipeline.
	d.setGen++
	d.release()
	if c != nil {
		c.destroy(d)
	}
}

// destroy frees the cache's pools and with them its sets.
func (c *setCache) destroy(d *device) {
	for _, pool := range c.pools {
		d.vk.DestroyDescriptorPool(pool)
	}
	c.pools, c.sets, c.spare = nil, nil, nil
}
