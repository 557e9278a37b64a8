// The reference filter of spec/bridge.md §9 as a bridged program, for the conformance
// suite.
package main

import (
	"os"

	"heddle.dev/bridge"
	"heddle.dev/bridge/internal/reference"
)

func main() { os.Exit(bridge.Run(&reference.Filter{})) }
