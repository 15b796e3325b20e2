package driver

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// vectorAddPTX is c[i] = a[i] + b[i] over n f32 (n a multiple of 4·256), 256
// threads per block, with the loads written as load and the store as store; with
// vec4 each thread adds four consecutive elements through 16-byte accesses.
func vectorAddPTX(load, store string, vec4 bool) string {
	body := `	mul.wide.u32 %rd7, %r4, 4;
	add.s64 %rd8, %rd2, %rd7;
	add.s64 %rd9, %rd4, %rd7;
	add.s64 %rd10, %rd6, %rd7;
	LOAD %r5, [%rd8];
	LOAD %r6, [%rd9];
	add.rn.f32 %r7, %r5, %r6;
	STORE [%rd10], %r7;`
	if vec4 {
		body = `	mul.wide.u32 %rd7, %r4, 16;
	add.s64 %rd8, %rd2, %rd7;
	add.s64 %rd9, %rd4, %rd7;
	add.s64 %rd10, %rd6, %rd7;
	LOAD.v4 {%f1, %f2, %f3, %f4}, [%rd8];
	LOAD.v4 {%f5, %f6, %f7, %f8}, [%rd9];
	add.rn.f32 %f1, %f1, %f5;
	add.rn.f32 %f2, %f2, %f6;
	add.rn.f32 %f3, %f3, %f7;
	add.rn.f32 %f4, %f4, %f8;
	STORE.v4 [%rd10], {%f1, %f2, %f3, %f4};`
		load, store = strings.TrimSuffix(load, ".b32")+".f32", strings.TrimSuffix(store, ".b32")+".f32"
		body = strings.ReplaceAll(strings.ReplaceAll(body, "LOAD.v4", strings.TrimSuffix(load, ".f32")+".v4.f32"), "STORE.v4", strings.TrimSuffix(store, ".f32")+".v4.f32")
	}
	body = strings.ReplaceAll(strings.ReplaceAll(body, "LOAD", load), "STORE", store)
	return `.version 7.4
.target sm_80
.address_size 64
.visible .entry vadd(.param .u64 a, .param .u64 b, .param .u64 c)
.reqntid 256, 1, 1
{
	.reg .b32 %r<8>;
	.reg .f32 %f<9>;
	.reg .b64 %rd<11>;
	ld.param.u64 %rd1, [a];
	cvta.to.global.u64 %rd2, %rd1;
	ld.param.u64 %rd3, [b];
	cvta.to.global.u64 %rd4, %rd3;
	ld.param.u64 %rd5, [c];
	cvta.to.global.u64 %rd6, %rd5;
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %tid.x;
	mad.lo.u32 %r4, %r2, 256, %r3;
` + body + `
	ret;
}
`
}

// BenchmarkStreamingLoads times a 256 Mi-element f32 vector add (12 bytes per
// element) with the load and store forms the emitter could write: plain 32-bit
// accesses (what it writes today), through the non-coherent path, with a 256-byte
// L2 fetch, with an evict-first store, and, for scale, 16-byte vector accesses of
// four elements per thread (which one invocation per element cannot use).
func BenchmarkStreamingLoads(b *testing.B) {
	c := gpuContextB(b)
	const n = 1 << 28
	for _, v := range []struct {
		name, load, store string
		vec4              bool
	}{
		{"plain", "ld.global.b32", "st.global.b32", false},
		{"nc", "ld.global.nc.b32", "st.global.b32", false},
		{"L2_256B", "ld.global.L2::256B.b32", "st.global.b32", false},
		{"nc_L2_256B", "ld.global.nc.L2::256B.b32", "st.global.b32", false},
		{"L2_256B_st_cs", "ld.global.L2::256B.b32", "st.global.cs.b32", false},
		{"vec4", "ld.global.b32", "st.global.b32", true},
	} {
		b.Run(v.name, func(b *testing.B) {
			grid := [3]uint32{n / 256, 1, 1}
			if v.vec4 {
				grid[0] /= 4
			}
			best, err := timeVectorAdd(b, c, vectorAddPTX(v.load, v.store, v.vec4), n, 3, grid)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(12*n/float64(best)/1e6, "best-GB/s")
		})
	}
}

// gpuContextB is gpuContext for benchmarks: it skips without a device.
func gpuContextB(b *testing.B) *Context {
	d, err := Load("")
	if err == nil {
		err = d.Init()
	}
	if err != nil {
		b.Skipf("no usable CUDA driver: %v", err)
	}
	dev, err := d.Device(0)
	if err != nil {
		b.Fatal(err)
	}
	c, err := dev.PrimaryContext()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Release() })
	return c
}

func TestVectorAddPTXAssembles(t *testing.T) {
	for _, v := range []string{vectorAddPTX("ld.global.b32", "st.global.b32", false), vectorAddPTX("ld.global.nc.L2::256B.b32", "st.global.cs.b32", true)} {
		if !strings.Contains(v, ".entry vadd") || strings.Contains(v, "LOAD") || strings.Contains(v, "STORE") {
			t.Errorf("template not filled:\n%s", v)
		}
	}
}

// BenchmarkLaunchSync is one 256-element vector add launched and waited for, per
// iteration, with each way of waiting the backend could use: cuStreamSynchronize,
// an event and cuEventSynchronize, polling that event (or the stream) with
// cuEventQuery (cuStreamQuery), and what a submit does — timing events around
// the launch, polling the end one, then reading the elapsed time. The median
// host time per iteration is reported next to the mean.
func BenchmarkLaunchSync(b *testing.B) {
	c := gpuContextB(b)
	const n = 256
	for _, mode := range []string{"stream_sync", "event_sync", "event_poll", "stream_poll", "timed_poll"} {
		b.Run(mode, func(b *testing.B) {
			times := make([]time.Duration, 0, b.N)
			err := c.Do(func() error {
				r, err := loadVectorAdd(c, vectorAddPTX("ld.global.b32", "st.global.b32", false), n, 3, false)
				if err != nil {
					return err
				}
				defer r.release()
				f, s, p, start, end := r.f, r.s, r.p, r.start, r.end
				one := func() error {
					if mode == "timed_poll" {
						if err := c.EventRecord(start, s); err != nil {
							return err
						}
					}
					if err := c.Launch(f, [3]uint32{1, 1, 1}, [3]uint32{256, 1, 1}, 0, s, p); err != nil {
						return err
					}
					switch mode {
					case "stream_sync":
						return c.StreamSynchronize(s)
					case "stream_poll":
						for {
							if ok, err := c.StreamQuery(s); ok || err != nil {
								return err
							}
						}
					}
					if err := c.EventRecord(end, s); err != nil {
						return err
					}
					if mode == "event_sync" {
						return c.EventSynchronize(end)
					}
					for {
						if ok, err := c.EventQuery(end); ok || err != nil {
							if err == nil && mode == "timed_poll" {
								_, err = c.EventElapsed(start, end)
							}
							return err
						}
					}
				}
				for range 100 {
					if err := one(); err != nil {
						return err
					}
				}
				b.ResetTimer()
				for range b.N {
					t0 := time.Now()
					if err := one(); err != nil {
						return err
					}
					times = append(times, time.Since(t0))
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "median-ns")
		})
	}
}

// BenchmarkLaunchCost is the host's cost of enqueuing a 256-element vector
// add, without waiting for it: the launch alone, the launch and a timed event
// record, and the launch and an untimed one (EventCreateUntimed); the stream
// is synchronized every 64 launches, outside the timing.
func BenchmarkLaunchCost(b *testing.B) {
	c := gpuContextB(b)
	const n = 256
	for _, mode := range []string{"launch", "timed_record", "untimed_record"} {
		b.Run(mode, func(b *testing.B) {
			err := c.Do(func() error {
				r, err := loadVectorAdd(c, vectorAddPTX("ld.global.b32", "st.global.b32", false), n, 3, false)
				if err != nil {
					return err
				}
				defer r.release()
				ev := r.end
				if mode == "untimed_record" {
					if ev, err = c.EventCreateUntimed(); err != nil {
						return err
					}
					defer c.EventDestroy(ev)
				}
				b.ResetTimer()
				for i := range b.N {
					if err := c.Launch(r.f, [3]uint32{1, 1, 1}, [3]uint32{256, 1, 1}, 0, r.s, r.p); err != nil {
						return err
					}
					if mode != "launch" {
						if err := c.EventRecord(ev, r.s); err != nil {
							return err
						}
					}
					if i%64 == 63 {
						b.StopTimer()
						if err := c.StreamSynchronize(r.s); err != nil {
							return err
						}
						b.StartTimer()
					}
				}
				return c.StreamSynchronize(r.s)
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
