// A bridged filter in Go: counts the records of each key and, at the end, emits one record
// per key: the key, and its count as one little-endian i64. Part of the mixed-language
// pipeline (examples/bridges).
package main

import (
	"encoding/binary"
	"os"
	"sort"

	"heddle.dev/bridge"
)

type counter struct{ counts map[string]int64 }

func (c *counter) Init(_ []string, _ bridge.Context) error {
	c.counts = map[string]int64{}
	return nil
}

func (c *counter) Process(r bridge.Record, _ bridge.Emitter) error {
	c.counts[string(r.Key)]++
	return nil
}

func (c *counter) Finalize(out bridge.Emitter) error {
	keys := make([]string, 0, len(c.counts))
	for k := range c.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var n [8]byte
	for _, k := range keys {
		binary.LittleEndian.PutUint64(n[:], uint64(c.counts[k]))
		if err := out.Emit(bridge.I64, n[:], []byte(k)); err != nil {
			return err
		}
	}
	return nil
}

func main() { os.Exit(bridge.Run(&counter{})) }
