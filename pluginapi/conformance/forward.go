package conformance

import (
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/ir/verify"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/pluginapi/conformance/kit"
)

// The names below moved: the comparison of outputs to package verify (ir/verify),
// the kit's engine to package kit, so that programs (the kiln CLI) run them
// without linking package testing. They forward there, so that tests written
// against them keep compiling.

// T is kit.T.
//
// Deprecated: use kit.T.
type T = kit.T

// Check is kit.Check.
//
// Deprecated: use kit.Check.
func Check(t T, b pluginapi.Backend, opts Options) { kit.Check(t, b, opts) }

// Program is kit.Program.
//
// Deprecated: use kit.Program.
type Program = kit.Program

// SemanticCases is kit.SemanticCases.
//
// Deprecated: use kit.SemanticCases.
func SemanticCases() int { return kit.SemanticCases() }

// SemanticPrograms is kit.SemanticPrograms.
//
// Deprecated: use kit.SemanticPrograms.
func SemanticPrograms() []Program { return kit.SemanticPrograms() }

// MatchOracle is kit.MatchOracle.
//
// Deprecated: use kit.MatchOracle.
func MatchOracle(p *ir.Program, c kernels.Case, got [][]byte) error {
	return kit.MatchOracle(p, c, got)
}

// Report is verify.Report.
//
// Deprecated: use verify.Report.
type Report = verify.Report

// Reference is verify.Reference.
//
// Deprecated: use verify.Reference.
type Reference = verify.Reference

// Compare is verify.Compare.
//
// Deprecated: use verify.Compare.
func Compare(p *ir.Program, got [][]byte, refs ...[][]byte) (Report, error) {
	return verify.Compare(p, got, refs...)
}

// Verify is verify.Outputs.
//
// Deprecated: use verify.Outputs.
func Verify(p *ir.Program, got [][]byte, ref Reference) (Report, error) {
	return verify.Outputs(p, got, ref)
}

// Variant is verify.Variant.
//
// Deprecated: use verify.Variant.
type Variant = verify.Variant

// Variants is verify.Variants.
//
// Deprecated: use verify.Variants.
func Variants(p *ir.Program) []Variant { return verify.Variants(p) }
