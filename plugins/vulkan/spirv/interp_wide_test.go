package spirv

// The SPIR-V interpreter's word views of 16-bit buffers (wide.go). A buffer's
// memory holds one 16-bit element per word; a second StorageBuffer variable at
// the same binding whose runtime array has a stride of 4, 8 or 16 bytes (u32,
// uvec2, uvec4) is a view whose element i spans 16-bit elements wide·i …
// wide·i + wide − 1 (wide = stride / 2): a load assembles words from them, the
// lower index in the low half, and a store splits them back. A view element
// not wholly inside the bound memory is an error, as any access is.

// markWideViews marks each StorageBuffer variable that shares its binding with
// a variable of 2-byte elements and has wider elements as a view.
func markWideViews(mc *machine, byID map[uint32]inst, decos map[uint32]map[uint32][]uint32) {
	stride := func(variable uint32) uint32 {
		ptr := byID[byID[variable].args[0]] // OpVariable's result type
		st := byID[ptr.args[2]]             // the pointee Block struct
		if st.op != opTypeStruct || len(st.args) < 2 {
			return 0
		}
		if s, ok := decos[st.args[1]][decorationArrayStride]; ok {
			return s[0]
		}
		return 0
	}
	narrow := map[uint32]bool{}
	var views []uint32
	for v, class := range mc.storage {
		if class != storageStorageBuffer {
			continue
		}
		b := decos[v][decorationBinding][0]
		switch s := stride(v); s {
		case 2:
			narrow[b] = true
		case 4, 8, 16:
			views = append(views, v)
		}
	}
	for _, v := range views {
		if narrow[decos[v][decorationBinding][0]] {
			mc.init[v].wide = int(stride(v) / 2)
		}
	}
}

// wideLoad reads the view element p points to: a u32, or a vector of them.
func wideLoad(p cell) cell {
	words := make([]uint32, p.wide/2)
	for w := range words {
		words[w] = p.mem[p.idx+2*w]&0xffff | p.mem[p.idx+2*w+1]<<16
	}
	if len(words) == 1 {
		return cell{bits: words[0]}
	}
	return cell{words: words}
}

// wideStore writes x to the view element p points to.
func wideStore(p cell, x cell) {
	words := x.words
	if words == nil {
		words = []uint32{x.bits}
	}
	for w, word := range words {
		p.mem[p.idx+2*w] = word & 0xffff
		p.mem[p.idx+2*w+1] = word >> 16
	}
}

// wideConstruct is a u32 vector of the values of ids.
func wideConstruct(v []cell, ids []uint32) cell {
	words := make([]uint32, len(ids))
	for i, id := range ids {
		words[i] = v[id].bits
	}
	return cell{words: words}
}
