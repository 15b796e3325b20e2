package kit_test

import (
	"fmt"

	"github.com/kiln-dev/kiln/pluginapi/conformance/kit"
)

func ExampleSemanticCases() {
	fmt.Println(kit.SemanticCases() >= 300)
	// Output: true
}

func ExampleSemanticPrograms() {
	progs := kit.SemanticPrograms()
	fmt.Println(len(progs) == kit.SemanticCases(), progs[0].Name)
	// Output: true operator/neg.i32
}
