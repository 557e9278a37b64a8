package bridge

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// channel is one transport connection: buffered frames both ways.
type channel struct {
	r      *bufio.Reader
	w      *bufio.Writer
	closer io.Closer // nil for the standard streams, which stay open
}

func newChannel(r io.Reader, w io.Writer, c io.Closer) *channel {
	return &channel{r: bufio.NewReaderSize(r, 256<<10), w: bufio.NewWriterSize(w, 256<<10), closer: c}
}

// readFull reads exactly len(b) bytes, flushing what is buffered first when it must wait.
func (c *channel) readFull(b []byte) error {
	if c.r.Buffered() < len(b) {
		if err := c.w.Flush(); err != nil {
			return err
		}
	}
	_, err := io.ReadFull(c.r, b)
	return err
}

func (c *channel) close() {
	_ = c.w.Flush()
	if c.closer != nil {
		_ = c.closer.Close()
	}
}

type pair struct{ r, w io.Closer }

func (p pair) Close() error {
	e1 := p.r.Close()
	if e2 := p.w.Close(); e2 != nil {
		return e2
	}
	return e1
}

// openChannel opens the transport spec (spec/bridge.md §3): pipe, fifo:DIR, tcp:HOST:PORT
// unix:PATH or shm:PATH; pipe uses the saved standard streams.
func openChannel(spec string, stdin io.Reader, stdout io.Writer) (*channel, error) {
	transport, addr, _ := strings.Cut(spec, ":")
	switch transport {
	case "pipe":
		return newChannel(stdin, stdout, nil), nil
	case "fifo":
		r, err := os.OpenFile(filepath.Join(addr, "to-filter"), os.O_RDONLY, 0)
		if err != nil {
			return nil, err
		}
		w, err := os.OpenFile(filepath.Join(addr, "from-filter"), os.O_WRONLY, 0)
		if err != nil {
			r.Close()
			return nil, err
		}
		return newChannel(r, w, pair{r, w}), nil
	case "shm":
		c, err := openShm(addr)
		if err != nil {
			return nil, err
		}
		return newChannel(c, c, c), nil
	case "tcp", "unix":
		conn, err := net.Dial(transport, addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		return newChannel(conn, conn, conn), nil
	}
	return nil, fmt.Errorf("unknown bridge transport %q", spec)
}
