package pgo

import (
	"context"
	"reflect"
	"testing"
)

func TestForgetByBackendReachesSizeClasses(t *testing.T) {
	path := tablePath(t)
	tbl := New(path)
	set(t, tbl, "op.a", sampleRoute("example-cpu:0"))
	set(t, tbl, "op.b", sampleRoute("vulkan:0"))
	classed := sampleRoute("vulkan:0")
	classed.Classes = []ClassRoute{{Bytes: 64, Backend: "example-cpu:1"}, {Bytes: 1 << 20, Backend: "vulkan:0"}}
	set(t, tbl, "op.c", classed)
	if _, err := tbl.Save(context.Background()); err != nil {
		t.Fatal(err)
	}

	got := tbl.Forget(func(_ string, r Route) bool { return r.RoutesTo("example-cpu") })
	if want := []string{"op.a", "op.c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("forgot %v, want %v", got, want)
	}
	if _, err := tbl.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ops := loadTable(t, path).Ops(); !reflect.DeepEqual(ops, []string{"op.b"}) {
		t.Fatalf("saved table has %v, want [op.b]", ops)
	}
	if !sampleRoute("vulkan:0").RoutesTo("vulkan:0") || sampleRoute("vulkan:0").RoutesTo("vulkan:1") || sampleRoute("vulkan:0").RoutesTo("vulk") {
		t.Fatal("RoutesTo matches by routing id or by whole backend id only")
	}
}
