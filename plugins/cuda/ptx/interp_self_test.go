package ptx

import (
	"encoding/binary"
	"strings"
	"testing"
)

// kernelText wraps body in a module of one u32 buffer whose parameters are loaded
// into %rd2 (the global address) and %r1 (the count).
func kernelText(body string) string {
	return `.version 7.0
.target sm_80
.address_size 64

.visible .entry kiln_main(
	.param .u64 kiln_buf0,
	.param .u32 kiln_len0
)
.reqntid 1, 1, 1
{
	.reg .pred %p<4>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<4>;
	.reg .b16 %h<3>;
	.shared .align 4 .b8 kiln_shared0[8];
	.local .align 4 .b8 kiln_matrix0[8];
	ld.param.u64 %rd1, [kiln_buf0];
	cvta.to.global.u64 %rd2, %rd1;
	ld.param.u32 %r1, [kiln_len0];
` + body + `
	ret;
}
`
}

// TestInterpreterRejectsUnspecifiedBehaviour pins the interpreter itself: what
// PTX leaves unspecified, or the backend does not allocate, must fail a test
// instead of giving some value.
func TestInterpreterRejectsUnspecifiedBehaviour(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"u32 division by zero", "\tmov.b32 %r2, 0;\n\tdiv.u32 %r3, %r1, %r2;", "by zero"},
		{"i32 remainder by zero", "\tmov.b32 %r2, 0;\n\trem.s32 %r3, %r1, %r2;", "by zero"},
		{"MIN / -1", "\tmov.b32 %r2, 0x80000000;\n\tdiv.s32 %r3, %r2, -1;", "MIN by -1"},
		{"NaN to integer", "\tmov.b32 %r2, 0x7FC00000;\n\tcvt.rzi.s32.f32 %r3, %r2;", "NaN"},
		{"undefined register", "\tadd.u32 %r3, %r4, 1;", "before any instruction wrote it"},
		{"undefined guard", "\t@%p1 bra $L1;\n$L1:", "guard"},
		{"load past the allocation", "\tadd.s64 %rd3, %rd2, %rd2;\n\tld.global.b32 %r3, [%rd3];", "outside every allocation"},
		{"store past a shared variable", "\tmov.u32 %r2, kiln_shared0;\n\tst.shared.b32 [%r2+8], %r1;", "bad"},
		{"shared address past the variable", "\tmov.b32 %r2, 8;\n\tst.shared.b32 [%r2], %r1;", "outside every shared variable"},
		{"misaligned", "\tmov.b32 %r2, 2;\n\tld.shared.b32 %r3, [%r2];", "misaligned"},
		{"instruction Emit never writes", "\tbrev.b32 %r2, %r1;", "not interpreted"},
		{"undeclared register", "\tmov.b32 %r9, 1;", "not declared"},
		{"barrier other than 0", "\tbar.sync 1;", "barrier 0"},
		{"branch to nowhere", "\tbra $L9;", "undefined label"},
		{"store after an nc load", "\tld.global.nc.b32 %r3, [%rd2];\n\tst.global.b32 [%rd2], %r3;", "read through ld.global.nc"},
		{"nc load after a store", "\tst.global.b32 [%rd2], %r1;\n\tld.global.nc.b32 %r3, [%rd2];", "which the kernel wrote"},
		{"undefined .b16 register", "\tcvt.u32.u16 %r3, %h1;", "before any instruction wrote it"},
		{"misaligned 16-bit access", "\tmov.b32 %r2, 1;\n\tmul.wide.u32 %rd3, %r2, 1;\n\tadd.s64 %rd3, %rd2, %rd3;\n\tld.global.u16 %r3, [%rd3];", "misaligned"},
		{"16-bit load past the allocation", "\tmov.b32 %r2, 4;\n\tmul.wide.u32 %rd3, %r2, 1;\n\tadd.s64 %rd3, %rd2, %rd3;\n\tld.global.u16 %r3, [%rd3];", "outside every allocation"},
		{"local address past the variable", "\tmov.u64 %rd3, kiln_matrix0;\n\tmov.b32 %r2, 8;\n\tmul.wide.u32 %rd1, %r2, 1;\n\tadd.s64 %rd3, %rd3, %rd1;\n\tld.local.b32 %r3, [%rd3];", "outside every local variable"},
		{"f16 instruction on a .b32 register", "\tadd.rn.f16 %h1, %r1, %r1;", "not a %h register"},
	} {
		mod, err := parseModule(kernelText(c.body))
		if err == nil {
			err = launch(mod, [3]uint32{1, 1, 1}, [][]byte{{7, 0, 0, 0}}, []uint32{1})
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error mentioning %q", c.name, err, c.want)
		}
	}
	mod, err := parseModule(kernelText("\tmov.b32 %r2, 33;\n\tshl.b32 %r3, %r1, %r2;\n\tst.global.b32 [%rd2], %r3;"))
	if err != nil {
		t.Fatal(err)
	}
	buf := [][]byte{{7, 0, 0, 0}}
	if err := launch(mod, [3]uint32{1, 1, 1}, buf, []uint32{1}); err != nil || binary.LittleEndian.Uint32(buf[0]) != 0 {
		t.Errorf("shl by 33 = %#x, %v; PTX clamps the amount to 32, giving 0", buf[0], err)
	}
}
