package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
)

// protocolError ends the session with an ERROR of its code.
type protocolError struct {
	code   string
	msg    string
	record int64
}

func (e *protocolError) Error() string { return e.msg }

func perr(code string, record int64, format string, args ...any) error {
	return &protocolError{code, fmt.Sprintf(format, args...), record}
}

type message struct {
	kind  uint8
	codec Codec
	seq   uint64
	key   []byte
	data  []byte
}

// Session is one bridge seen from the filter.
type Session struct {
	ch                 *channel
	token, language    string
	stdin              io.Reader
	stdout             io.Writer
	canSwitch, paused  bool
	version            uint64
	edge, framePayload uint32
	maxRecord, credits uint64
	grant              uint64
	nextIn, seenIn     uint64
	nextOut            uint64
	bytesIn, bytesOut  uint64
	pending, deferred  []message
	hdr                [headerLen]byte
}

func (s *Session) readWire() (*message, error) {
	if err := s.ch.readFull(s.hdr[:]); err != nil {
		if err == io.EOF {
			return nil, nil
		}
		return nil, perr("PROTOCOL", -1, "the host closed the channel inside a frame")
	}
	h, err := decodeHeader(s.hdr[:])
	if err != nil {
		return nil, perr("PROTOCOL", -1, "%v", err)
	}
	if h.flags&flagFirst == 0 {
		return nil, perr("PROTOCOL", -1, "a message without a FIRST frame")
	}
	if h.kind != kindData && h.kind != kindCredit && h.kind != kindControl {
		return nil, perr("PROTOCOL", -1, "a frame of kind %d on a bridge", h.kind)
	}
	if h.kind == kindData {
		switch {
		case h.tag != tagData:
			return nil, perr("PROTOCOL", -1, "a record with tag %d", h.tag)
		case Codec(h.codec) == pickle:
			return nil, perr("PROTOCOL", int64(h.seq), "record %d is a pickle (B5)", h.seq)
		case h.seq != s.seenIn:
			return nil, perr("PROTOCOL", int64(h.seq), "record %d arrived where record %d was due (B2)", h.seq, s.seenIn)
		}
		s.seenIn++
	}
	if h.msgLen > s.maxRecord {
		return nil, perr("RECORD_TOO_LARGE", int64(h.seq), "record %d is %d bytes, above max_record %d", h.seq, h.msgLen, s.maxRecord)
	}
	m := &message{kind: h.kind, codec: Codec(h.codec), seq: h.seq, key: make([]byte, h.keyLen), data: make([]byte, h.msgLen)}
	cut := perr("PROTOCOL", -1, "the host closed the channel inside a message")
	if s.ch.readFull(m.key) != nil {
		return nil, cut
	}
	at := uint64(0)
	for {
		if at+uint64(h.fragLen) > h.msgLen {
			return nil, perr("PROTOCOL", -1, "a fragment beyond its message")
		}
		if s.ch.readFull(m.data[at:at+uint64(h.fragLen)]) != nil {
			return nil, cut
		}
		at += uint64(h.fragLen)
		if h.flags&flagLast != 0 {
			break
		}
		if s.ch.readFull(s.hdr[:]) != nil {
			return nil, cut
		}
		n, err := decodeHeader(s.hdr[:])
		if err != nil {
			return nil, perr("PROTOCOL", -1, "%v", err)
		}
		if n.flags&flagFirst != 0 || n.kind != h.kind || n.seq != h.seq || n.msgLen != h.msgLen || n.keyLen != 0 {
			return nil, perr("PROTOCOL", -1, "a fragment that does not continue its message")
		}
		h.flags, h.fragLen = n.flags, n.fragLen
	}
	if at != h.msgLen {
		return nil, perr("PROTOCOL", -1, "a message shorter than its msg_len")
	}
	return m, nil
}

func (s *Session) writeMessage(kind uint8, codec Codec, tag uint32, seq uint64, key, data []byte) error {
	fp := uint64(s.framePayload)
	if fp == 0 {
		fp = 1
	}
	n := uint64(len(data))
	for at := uint64(0); ; {
		chunk := min(n-at, fp)
		h := header{kind: kind, codec: uint8(codec), edge: s.edge, tag: tag, seq: seq, msgLen: n, fragLen: uint32(chunk)}
		if at == 0 {
			h.flags |= flagFirst
			h.keyLen = uint16(len(key))
		}
		if at+chunk >= n {
			h.flags |= flagLast
		}
		h.encode(s.hdr[:])
		s.ch.w.Write(s.hdr[:])
		if at == 0 {
			s.ch.w.Write(key)
		}
		if _, err := s.ch.w.Write(data[at : at+chunk]); err != nil {
			return perr("PROTOCOL", -1, "writing to the channel: %v", err)
		}
		at += chunk
		if at >= n {
			return nil
		}
	}
}

func (s *Session) send(typ string, members ...member) error {
	return s.writeMessage(kindControl, JSON, 0, 0, nil, canonJSON(typ, members...))
}

func (s *Session) addCredit(m *message) error {
	if len(m.data) != 4 {
		return perr("PROTOCOL", -1, "a credit of %d bytes", len(m.data))
	}
	s.credits += uint64(m.data[0]) | uint64(m.data[1])<<8 | uint64(m.data[2])<<16 | uint64(m.data[3])<<24
	return nil
}

// Emit sends one result (F2: reads ahead for credit when there is none).
func (s *Session) Emit(codec Codec, data, key []byte) error {
	if codec == pickle {
		return perr("PROTOCOL", -1, "pickled records cannot cross a bridge")
	}
	if uint64(len(data)) > s.maxRecord {
		return perr("RECORD_TOO_LARGE", -1, "result %d is %d bytes, above max_record %d", s.nextOut, len(data), s.maxRecord)
	}
	if len(key) > 65535 {
		return perr("PROTOCOL", -1, "a key of %d bytes", len(key))
	}
	for s.credits == 0 {
		m, err := s.readWire()
		if err != nil {
			return err
		}
		if m == nil {
			return perr("PROTOCOL", -1, "the host closed the channel while waiting for credit")
		}
		if m.kind == kindCredit {
			if err := s.addCredit(m); err != nil {
				return err
			}
		} else {
			if ctl, err := parseControl(m); m.kind == kindControl && err == nil && ctl["type"] == "COMPLETE" {
				s.credits = 1 << 62 // F3: the host sends no more credit
			}
			s.pending = append(s.pending, *m)
		}
	}
	s.credits--
	if err := s.writeMessage(kindData, codec, tagResults, s.nextOut, key, data); err != nil {
		return err
	}
	s.nextOut++
	s.bytesOut += uint64(len(data))
	return nil
}

// Text sends a UTF-8 record.
func (s *Session) Text(t string, key []byte) error { return s.Emit(UTF8, []byte(t), key) }

// Float64s sends an F64 array record.
func (s *Session) Float64s(v []float64, key []byte) error {
	return s.Emit(F64, Float64Bytes(v), key)
}

func (s *Session) next() (*message, error) {
	if len(s.deferred) > 0 && !s.paused {
		m := s.deferred[0]
		s.deferred = s.deferred[1:]
		return &m, nil
	}
	if len(s.pending) > 0 {
		m := s.pending[0]
		s.pending = s.pending[1:]
		return &m, nil
	}
	return s.readWire()
}

func (s *Session) status() error {
	fds := uint64(0)
	if entries, err := os.ReadDir("/proc/self/fd"); err == nil {
		fds = uint64(len(entries))
	}
	rss := uint64(0)
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		var size, res uint64
		if _, err := fmt.Sscan(string(b), &size, &res); err == nil {
			rss = res * uint64(os.Getpagesize())
		}
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := uint64(ru.Utime.Sec+ru.Stime.Sec)*1_000_000 + uint64(ru.Utime.Usec+ru.Stime.Usec)
	return s.send("STATUS", member{"records_in", s.nextIn}, member{"records_out", s.nextOut},
		member{"bytes_in", s.bytesIn}, member{"bytes_out", s.bytesOut}, member{"open_fds", fds},
		member{"rss_bytes", rss}, member{"cpu_us", cpu})
}

// switchTo follows spec/bridge.md §6.
func (s *Session) switchTo(ctl map[string]any) error {
	epoch := num(ctl["epoch"])
	if len(s.pending) > 0 {
		return perr("PROTOCOL", -1, "frames after CHANGE_BRIDGE_TYPE")
	}
	if !s.canSwitch {
		return perr("PROTOCOL", -1, "this session cannot switch transports")
	}
	if err := s.send("CHANGE_BRIDGE_TYPE", member{"epoch", epoch}); err != nil {
		return err
	}
	s.ch.close()
	spec, _ := ctl["transport"].(string)
	if spec != "pipe" {
		addr, _ := ctl["address"].(string)
		spec += ":" + addr
	}
	ch, err := openChannel(spec, s.stdin, s.stdout)
	if err != nil {
		return perr("PROTOCOL", -1, "opening %s: %v", spec, err)
	}
	s.ch = ch
	return s.send("CHANGE_BRIDGE_TYPE", member{"epoch", epoch}, member{"token", s.token})
}

func num(v any) uint64 {
	if f, ok := v.(float64); ok && f >= 0 {
		return uint64(f)
	}
	return 0
}

func parseControl(m *message) (map[string]any, error) {
	var ctl map[string]any
	if err := json.Unmarshal(m.data, &ctl); err != nil {
		return nil, perr("PROTOCOL", -1, "a control message that is not a JSON object: %v", err)
	}
	if _, ok := ctl["type"].(string); !ok {
		return nil, perr("PROTOCOL", -1, "a control message without a type")
	}
	return ctl, nil
}

func userError(code string, record int64, err error) error {
	var pe *protocolError
	if errors.As(err, &pe) {
		return pe
	}
	return &protocolError{code, err.Error(), record}
}

// run is the whole session (spec/bridge.md §4.1); it returns the exit status.
func (s *Session) run(f Filter) (status int, err error) {
	if err := s.send("INITIALIZE", member{"version", s.version}, member{"token", s.token}, member{"language", s.language}); err != nil {
		return exitError, err
	}
	m, err := s.readWire()
	if err != nil {
		return exitError, err
	}
	if m == nil || m.kind != kindControl {
		return exitError, perr("PROTOCOL", -1, "the host did not answer INITIALIZE")
	}
	init, err := parseControl(m)
	if err != nil {
		return exitError, err
	}
	switch {
	case init["type"] == "ERROR":
		fmt.Fprintf(os.Stderr, "heddle bridge: the host refused this filter: %v\n", init["message"])
		return exitError, nil
	case init["type"] != "INITIALIZE":
		return exitError, perr("PROTOCOL", -1, "expected INITIALIZE, got %v", init["type"])
	case num(init["version"]) != s.version:
		return exitError, perr("VERSION", -1, "host speaks bridge protocol version %d, this filter version %d", num(init["version"]), s.version)
	}
	s.edge, s.framePayload = uint32(num(init["bridge"])), uint32(num(init["frame_payload"]))
	s.maxRecord, s.credits = num(init["max_record"]), num(init["credits"])
	s.grant = max(1, s.credits/2)
	var args []string
	if list, ok := init["args"].([]any); ok {
		for _, a := range list {
			str, _ := a.(string)
			args = append(args, str)
		}
	}
	task, _ := init["task"].(string)
	ctx := Context{task, uint32(num(init["instance"])), uint32(num(init["parallelism"]))}
	if err := f.Init(args, ctx); err != nil {
		return exitError, userError("INIT", -1, err)
	}
	if err := s.send("START_STOP", member{"state", "started"}); err != nil {
		return exitError, err
	}
	return s.loop(f)
}

func (s *Session) loop(f Filter) (int, error) {
	for {
		m, err := s.next()
		if err != nil {
			return exitError, err
		}
		if m == nil {
			return exitError, perr("PROTOCOL", -1, "the host closed the channel before COMPLETE")
		}
		switch m.kind {
		case kindData:
			if s.paused {
				s.deferred = append(s.deferred, *m)
				continue
			}
			s.nextIn++
			s.bytesIn += uint64(len(m.data))
			if err := f.Process(Record{m.codec, m.seq, m.key, m.data}, s); err != nil {
				return exitError, userError("PROCESS", int64(m.seq), err)
			}
			if s.nextIn%s.grant == 0 {
				var credit [4]byte
				credit[0], credit[1], credit[2], credit[3] = byte(s.grant), byte(s.grant>>8), byte(s.grant>>16), byte(s.grant>>24)
				if err := s.writeMessage(kindCredit, Raw, 0, 0, nil, credit[:]); err != nil {
					return exitError, err
				}
			}
		case kindCredit:
			if err := s.addCredit(m); err != nil {
				return exitError, err
			}
		default:
			ctl, err := parseControl(m)
			if err != nil {
				return exitError, err
			}
			switch ctl["type"] {
			case "PAUSE_RESUME":
				s.paused, _ = ctl["paused"].(bool)
				err = s.send("PAUSE_RESUME", member{"paused", s.paused})
			case "STATUS":
				err = s.status()
			case "COMPLETE":
				if s.paused {
					return exitError, perr("PROTOCOL", -1, "COMPLETE while paused")
				}
				s.credits = 1 << 62 // F3: finalize needs no credit
				if err := f.Finalize(s); err != nil {
					return exitError, userError("FINALIZE", -1, err)
				}
				err = s.send("COMPLETE", member{"records_in", s.nextIn}, member{"records_out", s.nextOut})
				return exitOK, err
			case "ABORT":
				fmt.Fprintf(os.Stderr, "heddle bridge: aborted by the host: %v\n", ctl["reason"])
				return exitAbort, nil
			case "ERROR":
				fmt.Fprintf(os.Stderr, "heddle bridge: the host failed: %v\n", ctl["message"])
				return exitError, nil
			case "CHANGE_BRIDGE_TYPE":
				err = s.switchTo(ctl)
			default:
				err = perr("PROTOCOL", -1, "unknown control message %v", ctl["type"])
			}
			if err != nil {
				return exitError, err
			}
		}
	}
}

func (s *Session) finish(f Filter) int {
	status, err := s.run(f)
	if err != nil {
		pe := userError("PROTOCOL", -1, err).(*protocolError)
		members := []member{{"code", pe.code}, {"message", pe.msg}}
		if pe.record >= 0 {
			members = append(members, member{"record", uint64(pe.record)})
		}
		_ = s.send("ERROR", members...)
		fmt.Fprintf(os.Stderr, "heddle bridge: %s\n", pe.msg)
		status = exitError
	}
	_ = s.ch.w.Flush()
	return status
}

func newSession(ch *channel, token, language string) *Session {
	s := &Session{ch: ch, token: token, language: language, version: ProtocolVersion, framePayload: 1 << 20, maxRecord: 64 << 20}
	if v, err := strconv.ParseUint(os.Getenv("HEDDLE_BRIDGE_TEST_VERSION"), 10, 32); err == nil {
		s.version = v // tests of version refusal
	}
	return s
}

// RunIO runs one session over r and w without switching (tests, embedding) and returns
// the exit status.
func RunIO(r io.Reader, w io.Writer, token, language string, f Filter) int {
	return newSession(newChannel(r, w, nil), token, language).finish(f)
}

// Run runs f as the bridged process Heddle started and returns the exit status for
// os.Exit: 0 done, 2 error, 3 aborted.
func Run(f Filter) int {
	spec, token := os.Getenv("HEDDLE_BRIDGE"), os.Getenv("HEDDLE_BRIDGE_TOKEN")
	if spec == "" || token == "" {
		fmt.Fprintln(os.Stderr, "heddle bridge: HEDDLE_BRIDGE and HEDDLE_BRIDGE_TOKEN are not set; this program is a bridged filter and must be started by Heddle")
		return exitError
	}
	// §3: the protocol owns the standard streams; the author's output goes to stderr.
	in, err1 := syscall.Dup(0)
	out, err2 := syscall.Dup(1)
	null, err3 := os.Open(os.DevNull)
	if err1 != nil || err2 != nil || err3 != nil {
		fmt.Fprintln(os.Stderr, "heddle bridge: cannot take over the standard streams")
		return exitError
	}
	_ = syscall.Dup2(2, 1)
	_ = syscall.Dup2(int(null.Fd()), 0)
	null.Close()
	stdin, stdout := os.NewFile(uintptr(in), "bridge-in"), os.NewFile(uintptr(out), "bridge-out")
	ch, err := openChannel(spec, stdin, stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "heddle bridge: cannot open the channel %s: %v\n", spec, err)
		return exitError
	}
	s := newSession(ch, token, "go")
	s.stdin, s.stdout, s.canSwitch = stdin, stdout, true
	status := s.finish(f)
	s.ch.close()
	return status
}
