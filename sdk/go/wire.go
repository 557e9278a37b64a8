// Package bridge is Heddle's bridge SDK for Go: write a filter (DataCutter's init /
// process / finalize) that runs as a task of a Heddle job, speaking the bridge protocol of
// spec/bridge.md over anonymous pipes, named pipes, TCP or Unix domain sockets.
//
//	type upper struct{}
//	func (upper) Init(args []string, ctx bridge.Context) error { return nil }
//	func (upper) Process(r bridge.Record, out bridge.Emitter) error {
//		return out.Text(strings.ToUpper(r.Text()), r.Key)
//	}
//	func (upper) Finalize(out bridge.Emitter) error { return nil }
//	func main() { os.Exit(bridge.Run(upper{})) }
package bridge

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// ProtocolVersion is the bridge protocol version this SDK speaks.
const ProtocolVersion = 1

// Codec says how a record's bytes are read (spec/wire.md §5).
type Codec uint8

// The codecs a bridge carries.
const (
	Raw      Codec = 0x00
	UTF8     Codec = 0x01
	ArrowIPC Codec = 0x03
	JSON     Codec = 0x05
	U8       Codec = 0x10
	I8       Codec = 0x11
	U16      Codec = 0x12
	I16      Codec = 0x13
	U32      Codec = 0x14
	I32      Codec = 0x15
	U64      Codec = 0x16
	I64      Codec = 0x17
	F32      Codec = 0x18
	F64      Codec = 0x19
	pickle   Codec = 0x04
)

const (
	headerLen     = 48
	magic         = 0x4448
	wireVersion   = 1
	kindData      = 1
	kindCredit    = 4
	kindControl   = 7
	flagFirst     = 1
	flagLast      = 2
	tagData       = 0
	tagResults    = 1
	exitOK        = 0
	exitError     = 2
	exitAbort     = 3
	maxFrameBytes = 16 << 20
)

var elementSize = [10]uint64{1, 1, 2, 2, 4, 4, 8, 8, 4, 8}

type header struct {
	kind, flags, codec uint8
	keyLen             uint16
	edge, tag          uint32
	seq, msgLen        uint64
	fragLen            uint32
}

func (h *header) encode(b []byte) {
	binary.LittleEndian.PutUint16(b[0:], magic)
	b[2], b[3], b[4], b[5] = wireVersion, h.kind, h.flags, h.codec
	binary.LittleEndian.PutUint16(b[6:], h.keyLen)
	binary.LittleEndian.PutUint32(b[8:], h.edge)
	binary.LittleEndian.PutUint32(b[12:], h.tag)
	binary.LittleEndian.PutUint64(b[16:], 0) // source and target
	binary.LittleEndian.PutUint64(b[24:], h.seq)
	binary.LittleEndian.PutUint64(b[32:], h.msgLen)
	binary.LittleEndian.PutUint32(b[40:], h.fragLen)
	binary.LittleEndian.PutUint32(b[44:], 0)
}

// decodeHeader applies wire rules V2-V13 (spec/wire.md §7).
func decodeHeader(b []byte) (header, error) {
	var h header
	if binary.LittleEndian.Uint16(b) != magic {
		return h, fmt.Errorf("not a Heddle frame (bad magic)")
	}
	if b[2] != wireVersion {
		return h, fmt.Errorf("wire version %d, expected %d", b[2], wireVersion)
	}
	h.kind, h.flags, h.codec = b[3], b[4], b[5]
	h.keyLen = binary.LittleEndian.Uint16(b[6:])
	h.edge = binary.LittleEndian.Uint32(b[8:])
	h.tag = binary.LittleEndian.Uint32(b[12:])
	h.seq = binary.LittleEndian.Uint64(b[24:])
	h.msgLen = binary.LittleEndian.Uint64(b[32:])
	h.fragLen = binary.LittleEndian.Uint32(b[40:])
	switch {
	case h.kind < 1 || h.kind > 9:
		return h, fmt.Errorf("unknown frame kind %d", h.kind)
	case h.flags&0xFC != 0:
		return h, fmt.Errorf("reserved flag bits set")
	case !(h.codec <= 5 || (h.codec >= 0x10 && h.codec <= 0x19)):
		return h, fmt.Errorf("unknown codec %#x", h.codec)
	case binary.LittleEndian.Uint32(b[44:]) != 0:
		return h, fmt.Errorf("reserved header word is not 0")
	case h.fragLen > maxFrameBytes || h.msgLen > 1<<40 || uint64(h.fragLen) > h.msgLen:
		return h, fmt.Errorf("bad lengths (frag_len %d, msg_len %d)", h.fragLen, h.msgLen)
	case h.flags == flagFirst|flagLast && uint64(h.fragLen) != h.msgLen:
		return h, fmt.Errorf("a whole frame whose frag_len differs from msg_len")
	case h.keyLen != 0 && h.flags&flagFirst == 0:
		return h, fmt.Errorf("a key on a fragment that is not the first")
	case h.codec >= 0x10 && h.msgLen%elementSize[h.codec-0x10] != 0:
		return h, fmt.Errorf("an array whose length is not a multiple of its element")
	}
	return h, nil
}

// member is one member of a control message, written in the canonical JSON of rule B4.
type member struct {
	key string
	val any // string, uint64, bool or []string
}

func canonString(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			sb.WriteString(`\"`)
		case c == '\\':
			sb.WriteString(`\\`)
		case c == '\b':
			sb.WriteString(`\b`)
		case c == '\t':
			sb.WriteString(`\t`)
		case c == '\n':
			sb.WriteString(`\n`)
		case c == '\f':
			sb.WriteString(`\f`)
		case c == '\r':
			sb.WriteString(`\r`)
		case c < 0x20:
			fmt.Fprintf(sb, `\u%04x`, c)
		default:
			sb.WriteByte(c)
		}
	}
	sb.WriteByte('"')
}

// canonJSON writes {"type":T, members...} in the canonical form.
func canonJSON(typ string, members ...member) []byte {
	var sb strings.Builder
	sb.WriteString(`{"type":`)
	canonString(&sb, typ)
	for _, m := range members {
		sb.WriteByte(',')
		canonString(&sb, m.key)
		sb.WriteByte(':')
		switch v := m.val.(type) {
		case string:
			canonString(&sb, v)
		case uint64:
			sb.WriteString(strconv.FormatUint(v, 10))
		case bool:
			sb.WriteString(strconv.FormatBool(v))
		case []string:
			sb.WriteByte('[')
			for i, s := range v {
				if i > 0 {
					sb.WriteByte(',')
				}
				canonString(&sb, s)
			}
			sb.WriteByte(']')
		}
	}
	sb.WriteByte('}')
	return []byte(sb.String())
}
