// Package reference is the reference filter of spec/bridge.md §9: UTF-8 upper-cased
// (ASCII), F64 arrays summed, anything else echoed, keys kept; Finalize emits the prefix
// and the count. A second argument N makes record N fail.
package reference

import (
	"fmt"
	"strconv"

	"heddle.dev/bridge"
)

// Filter is the reference filter.
type Filter struct {
	prefix string
	count  uint64
	failAt int64
}

// Init keeps the prefix and the failing record's number.
func (f *Filter) Init(args []string, _ bridge.Context) error {
	f.prefix, f.count, f.failAt = "", 0, -1
	if len(args) > 0 {
		f.prefix = args[0]
	}
	if len(args) > 1 {
		n, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil {
			return err
		}
		f.failAt = n
	}
	return nil
}

// Process answers one record.
func (f *Filter) Process(r bridge.Record, out bridge.Emitter) error {
	if int64(f.count) == f.failAt {
		return fmt.Errorf("asked to fail at record %d", f.count)
	}
	f.count++
	switch r.Codec {
	case bridge.UTF8:
		b := make([]byte, len(r.Data))
		for i, c := range r.Data {
			if c >= 'a' && c <= 'z' {
				c -= 32
			}
			b[i] = c
		}
		return out.Emit(bridge.UTF8, b, r.Key)
	case bridge.F64:
		sum := 0.0
		for _, v := range r.Float64s() {
			sum += v
		}
		return out.Float64s([]float64{sum}, r.Key)
	}
	return out.Emit(r.Codec, r.Data, r.Key)
}

// Finalize emits the prefix and the count.
func (f *Filter) Finalize(out bridge.Emitter) error {
	return out.Text(fmt.Sprintf("%s%d", f.prefix, f.count), nil)
}
