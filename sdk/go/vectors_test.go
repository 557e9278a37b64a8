package bridge_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"heddle.dev/bridge"
	"heddle.dev/bridge/internal/reference"
)

const specDir = "../../spec/bridge"

type index struct {
	Token    string `json:"token"`
	Language string `json:"language"`
	Control  []struct {
		Name, File, Direction string
		Edge                  uint32
		Message               json.RawMessage
	} `json:"control"`
	Records []struct {
		Name, File   string
		Codec        *uint8
		Tag          uint32
		Sequence     uint64
		KeyHex       string `json:"key_hex"`
		PayloadHex   string `json:"payload_hex"`
		FramePayload uint32 `json:"frame_payload"`
		Credit       *uint32
	} `json:"records"`
	Sessions []struct {
		Name, ToFilter, FromFilter string
		Invalid                    bool
		ErrorCode                  string `json:"error_code"`
		ExitStatus                 int    `json:"exit_status"`
	} `json:"sessions"`
}

func load(t *testing.T) index {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(specDir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx index
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	for i, s := range idx.Sessions {
		idx.Sessions[i].ToFilter = "sessions/" + s.Name + "/to_filter.bin"
		idx.Sessions[i].FromFilter = "sessions/" + s.Name + "/from_filter.bin"
	}
	return idx
}

func read(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(specDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestControlVectors(t *testing.T) {
	idx := load(t)
	if len(idx.Control) < 15 {
		t.Fatalf("only %d control vectors", len(idx.Control))
	}
	for _, v := range idx.Control {
		got, err := bridge.DecodeControl(read(t, v.File))
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		var want, have any
		_ = json.Unmarshal(v.Message, &want)
		_ = json.Unmarshal(got, &have)
		if !jsonEqual(want, have) {
			t.Errorf("%s: decoded %s, want %s", v.Name, got, v.Message)
		}
		enc, err := bridge.EncodeControl(v.Edge, v.Message)
		if err != nil || !bytes.Equal(enc, read(t, v.File)) {
			t.Errorf("%s: re-encoding differs (%v)", v.Name, err)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestRecordVectors(t *testing.T) {
	for _, v := range load(t).Records {
		data := read(t, v.File)
		if v.Credit != nil {
			continue // the credit frame is checked by the sessions
		}
		key, _ := hex.DecodeString(v.KeyHex)
		payload, _ := hex.DecodeString(v.PayloadHex)
		enc := bridge.EncodeRecord(7, v.FramePayload, bridge.Codec(*v.Codec), v.Tag, v.Sequence, key, payload)
		if !bytes.Equal(enc, data) {
			t.Errorf("%s: encoding differs", v.Name)
		}
	}
}

func TestSessions(t *testing.T) {
	idx := load(t)
	for _, v := range idx.Sessions {
		var out bytes.Buffer
		status := bridge.RunIO(bytes.NewReader(read(t, v.ToFilter)), &out, idx.Token, idx.Language, &reference.Filter{})
		want := read(t, v.FromFilter)
		if status != v.ExitStatus {
			t.Errorf("%s: status %d, want %d", v.Name, status, v.ExitStatus)
		}
		if !v.Invalid {
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("%s: %d bytes written, want %d identical ones", v.Name, out.Len(), len(want))
			}
			continue
		}
		if !bytes.HasPrefix(out.Bytes(), want) || !strings.Contains(out.String(), `"code":"`+v.ErrorCode+`"`) {
			t.Errorf("%s: no ERROR %s after the filter's INITIALIZE: %q", v.Name, v.ErrorCode, out.String())
		}
	}
}

// TestConformance runs Heddle's conformance suite against the reference filter. `make
// sdk-test` sets HEDDLE_BIN; without it the suite cannot run and the test says so.
func TestConformance(t *testing.T) {
	heddle := os.Getenv("HEDDLE_BIN")
	if heddle == "" {
		t.Skip("SKIPPED LOUDLY: HEDDLE_BIN is not set, so the conformance suite did NOT run (make sdk-test sets it)")
	}
	bin := filepath.Join(t.TempDir(), "reference_filter")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/reference_filter").CombinedOutput(); err != nil {
		t.Fatalf("building the reference filter: %v\n%s", err, out)
	}
	out, err := exec.Command(heddle, "bridge", "conformance", "--transports", "pipe,fifo,tcp,unix,shm", "--", bin).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("the conformance suite failed: %v", err)
	}
}
