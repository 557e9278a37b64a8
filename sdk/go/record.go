package bridge

import (
	"encoding/binary"
	"math"
)

// Record is one record crossing the bridge. Key and Data are valid during the Process
// call that received them (copy to keep).
type Record struct {
	Codec Codec
	Seq   uint64
	Key   []byte
	Data  []byte
}

// Text is the payload as a string.
func (r Record) Text() string { return string(r.Data) }

// Float64s decodes an F64 array record.
func (r Record) Float64s() []float64 {
	out := make([]float64, len(r.Data)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(r.Data[8*i:]))
	}
	return out
}

// Int64s decodes an I64 array record.
func (r Record) Int64s() []int64 {
	out := make([]int64, len(r.Data)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(r.Data[8*i:]))
	}
	return out
}

// Float64Bytes encodes values as an F64 array payload.
func Float64Bytes(values []float64) []byte {
	b := make([]byte, 8*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return b
}

// Emitter sends results from Process and Finalize.
type Emitter interface {
	// Emit sends one record, waiting for credit if the host has granted none.
	Emit(codec Codec, data, key []byte) error
	// Text sends a UTF-8 record.
	Text(s string, key []byte) error
	// Float64s sends an F64 array record.
	Float64s(values []float64, key []byte) error
}

// Context says where the task runs.
type Context struct {
	Task        string
	Instance    uint32
	Parallelism uint32
}

// Filter is a DataCutter filter. An error returned ends the bridge with an ERROR (INIT,
// PROCESS with the record's number, or FINALIZE) carrying its text.
type Filter interface {
	Init(args []string, ctx Context) error
	Process(r Record, out Emitter) error
	Finalize(out Emitter) error
}
