package pluginapi

import (
	"fmt"
	"os"
	"testing"
)

// helperEnv turns the test binary into a plugin instead of running tests:
// "plugin" serves a fakeBackend (the tests that run the binary as an operator
// would, --version). The tests that start it as a host does are host/client's.
const helperEnv = "KILN_PLUGINAPI_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "plugin":
		Serve(&fakeBackend{})
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", helperEnv, os.Getenv(helperEnv))
		os.Exit(2)
	}
}
