package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// EncodeRecord frames one record exactly as a session writes it (for tests and tools).
func EncodeRecord(edge, framePayload uint32, codec Codec, tag uint32, seq uint64, key, data []byte) []byte {
	var buf bytes.Buffer
	s := &Session{ch: newChannel(nil, &buf, nil), edge: edge, framePayload: framePayload}
	_ = s.writeMessage(kindData, codec, tag, seq, key, data)
	_ = s.ch.w.Flush()
	return buf.Bytes()
}

// EncodeControl frames a control message given as a JSON object, its members re-written in
// the canonical form of spec/bridge.md B4 in the order the object lists them.
func EncodeControl(edge uint32, object []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(object))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var typ string
	var members []member
	for dec.More() {
		k, _ := dec.Token()
		key, _ := k.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		switch x := v.(type) {
		case string:
			if key == "type" {
				typ = x
				continue
			}
			members = append(members, member{key, x})
		case json.Number:
			n, err := x.Int64()
			if err != nil || n < 0 {
				return nil, fmt.Errorf("member %s is not a non-negative integer", key)
			}
			members = append(members, member{key, uint64(n)})
		case bool:
			members = append(members, member{key, x})
		case []any:
			list := make([]string, len(x))
			for i, e := range x {
				list[i], _ = e.(string)
			}
			members = append(members, member{key, list})
		}
	}
	var buf bytes.Buffer
	s := &Session{ch: newChannel(nil, &buf, nil), edge: edge, framePayload: 1 << 20}
	_ = s.send(typ, members...)
	_ = s.ch.w.Flush()
	return buf.Bytes(), nil
}

// DecodeControl reads the one control message framed in b and returns its JSON.
func DecodeControl(b []byte) ([]byte, error) {
	s := &Session{ch: newChannel(bytes.NewReader(b), &bytes.Buffer{}, nil), maxRecord: 1 << 30}
	m, err := s.readWire()
	if err != nil {
		return nil, err
	}
	if m == nil || m.kind != kindControl {
		return nil, fmt.Errorf("not a control message")
	}
	return m.data, nil
}
