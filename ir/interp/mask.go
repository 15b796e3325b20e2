package interp

// mask is the set of lanes (invocations of the workgroup) that execute a block.
// Active lanes all lie in [lo, hi); lo >= hi means none. dense says every lane of
// [lo, hi) is active. on is exact over the whole range the mask was built on: lanes
// leave a mask only by clearing their on entry, so a parent can merge its children's
// on entries after they ran.
type mask struct {
	on    []bool
	lo    int
	hi    int
	dense bool
}

func (m *mask) empty() bool { return m.lo >= m.hi }

// fill makes every one of n lanes active.
func (m *mask) fill(n int) {
	on := m.on[:n]
	for i := range on {
		on[i] = true
	}
	m.lo, m.hi, m.dense = 0, n, true
}

// bound recomputes lo, hi and dense from on over [lo, hi).
func (m *mask) bound(lo, hi int) {
	first, last, n := -1, -1, 0
	for i, b := range m.on[lo:hi] {
		if b {
			if first < 0 {
				first = i
			}
			last = i
			n++
		}
	}
	if n == 0 {
		m.lo, m.hi, m.dense = 0, 0, true
		return
	}
	m.lo, m.hi = lo+first, lo+last+1
	m.dense = n == last-first+1
}

// narrow makes m the lanes of p whose condition c (0 or 1 per lane) equals want.
// m may be p itself.
func (m *mask) narrow(p *mask, c []uint32, want uint32) {
	lo, hi := p.lo, p.hi
	on := m.on[lo:hi]
	c = c[lo:hi]
	c = c[:len(on)]
	n := 0
	if p.dense {
		for i, v := range c {
			b := v == want
			on[i] = b
			if b {
				n++
			}
		}
	} else {
		pon := p.on[lo:hi]
		pon = pon[:len(on)]
		for i, v := range c {
			b := pon[i] && v == want
			on[i] = b
			if b {
				n++
			}
		}
	}
	switch n {
	case len(on):
		m.lo, m.hi, m.dense = lo, hi, true
	case 0:
		m.lo, m.hi, m.dense = 0, 0, true
	default:
		m.bound(lo, hi)
	}
}

// copyFrom makes m the same lane set as p.
func (m *mask) copyFrom(p *mask) {
	copy(m.on[p.lo:p.hi], p.on[p.lo:p.hi])
	m.lo, m.hi, m.dense = p.lo, p.hi, p.dense
}

// merge keeps the lanes of m that are still active in t or e, the two halves m was
// split into.
func (m *mask) merge(t, e *mask) {
	lo, hi := m.lo, m.hi
	on := m.on[lo:hi]
	ton, eon := t.on[lo:hi], e.on[lo:hi]
	ton, eon = ton[:len(on)], eon[:len(on)]
	for i := range on {
		on[i] = ton[i] || eon[i]
	}
	m.bound(lo, hi)
}

// keepLive drops the lanes that have returned.
func (m *mask) keepLive(live []bool) {
	lo, hi := m.lo, m.hi
	on := m.on[lo:hi]
	lv := live[lo:hi]
	lv = lv[:len(on)]
	for i := range on {
		on[i] = on[i] && lv[i]
	}
	m.bound(lo, hi)
}

// clear removes every lane; when live is not nil the removed lanes have returned.
func (m *mask) clear(live []bool) {
	for i := m.lo; i < m.hi; i++ {
		if m.on[i] {
			m.on[i] = false
			if live != nil {
				live[i] = false
			}
		}
	}
	m.lo, m.hi, m.dense = 0, 0, true
}

// count is the number of active lanes.
func (m *mask) count() int {
	if m.dense {
		return m.hi - m.lo
	}
	n := 0
	for _, b := range m.on[m.lo:m.hi] {
		if b {
			n++
		}
	}
	return n
}

// maskedCopy copies src into dst on the active lanes of m.
func maskedCopy(m *mask, dst, src []uint32) {
	if m.dense {
		copy(dst[m.lo:m.hi], src[m.lo:m.hi])
		return
	}
	for i := m.lo; i < m.hi; i++ {
		if m.on[i] {
			dst[i] = src[i]
		}
	}
}

// absorb adds the active lanes of m to c, the mask a loop's continue statements
// collect lanes in. c.on is false outside [c.lo, c.hi) (rejoin keeps it so).
func (c *mask) absorb(m *mask) {
	if m.empty() {
		return
	}
	for i := m.lo; i < m.hi; i++ {
		if m.on[i] {
			c.on[i] = true
		}
	}
	if c.empty() {
		c.lo, c.hi = m.lo, m.hi
	} else {
		c.lo, c.hi = min(c.lo, m.lo), max(c.hi, m.hi)
	}
	c.dense = false
}

// rejoin adds the lanes of c (which continued) back to m, whose on entries are
// exact over [lo, hi), the range m had when the iteration began, and empties c.
func (m *mask) rejoin(c *mask, lo, hi int) {
	if c.empty() {
		return
	}
	for i := c.lo; i < c.hi; i++ {
		if c.on[i] {
			m.on[i] = true
			c.on[i] = false
		}
	}
	c.lo, c.hi = 0, 0
	m.bound(lo, hi)
}

// prefix makes m the lanes of the dense mask p below at: [p.lo, at).
func (m *mask) prefix(trues []bool, p *mask, at int) {
	copy(m.on[p.lo:at], trues[p.lo:at])
	clear(m.on[at:p.hi])
	if at > p.lo {
		m.lo, m.hi, m.dense = p.lo, at, true
	} else {
		m.lo, m.hi, m.dense = 0, 0, true
	}
}

// suffix makes m the lanes of the dense mask p from at on: [at, p.hi).
func (m *mask) suffix(trues []bool, p *mask, at int) {
	clear(m.on[p.lo:at])
	copy(m.on[at:p.hi], trues[at:p.hi])
	if at < p.hi {
		m.lo, m.hi, m.dense = at, p.hi, true
	} else {
		m.lo, m.hi, m.dense = 0, 0, true
	}
}
