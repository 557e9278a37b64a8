package bridge

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The shared-memory rings of spec/bridge.md §3.1: ring 0 carries the host's bytes to the
// filter, ring 1 the filter's to the host.
const (
	shmBlock  = 4096
	posWrite  = 0
	posRead   = 64
	posClosed = 128
)

type shmRing struct {
	mem      []byte
	base     int
	capacity uint64
}

func (r *shmRing) word(at int) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[r.base+at])) }
func (r *shmRing) flag() *uint32       { return (*uint32)(unsafe.Pointer(&r.mem[r.base+posClosed])) }
func (r *shmRing) data() []byte {
	return r.mem[r.base+shmBlock : r.base+shmBlock+int(r.capacity)]
}

// backoff spins for 50 µs (yielding now and then), then sleeps in growing steps of up to
// 1 ms; it reports the host's exit (this process then belongs to another parent).
type backoff struct {
	start time.Time
	nap   time.Duration
	spins int
	ppid  int
}

func newBackoff(ppid int) backoff {
	return backoff{start: time.Now(), nap: 5 * time.Microsecond, ppid: ppid}
}

func (b *backoff) wait() bool {
	if time.Since(b.start) < 50*time.Microsecond {
		b.spins++
		if b.spins%16 == 0 {
			runtime.Gosched()
		}
		return false
	}
	time.Sleep(b.nap)
	if b.nap < time.Millisecond {
		b.nap *= 2
	}
	return os.Getppid() != b.ppid
}

type shmChannel struct {
	mem  []byte
	rx   shmRing
	tx   shmRing
	ppid int
}

func openShm(path string) (*shmChannel, error) {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	capacity := *(*uint64)(unsafe.Pointer(&mem[8]))
	if string(mem[:8]) != "HDBRSHM1" || capacity < shmBlock || capacity&(capacity-1) != 0 ||
		uint64(len(mem)) < shmBlock+2*(shmBlock+capacity) {
		_ = syscall.Munmap(mem)
		return nil, fmt.Errorf("%s is not a Heddle shared-memory channel", path)
	}
	return &shmChannel{
		mem:  mem,
		rx:   shmRing{mem, shmBlock, capacity},
		tx:   shmRing{mem, shmBlock + shmBlock + int(capacity), capacity},
		ppid: os.Getppid(),
	}, nil
}

// Read takes what the host published (at least one byte, waiting for it).
func (c *shmChannel) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r := &c.rx
	b := newBackoff(c.ppid)
	for {
		head := atomic.LoadUint64(r.word(posWrite))
		tail := atomic.LoadUint64(r.word(posRead))
		if head != tail {
			at := tail & (r.capacity - 1)
			n := min(head-tail, uint64(len(p)), r.capacity-at)
			copy(p, r.data()[at:at+n])
			atomic.StoreUint64(r.word(posRead), tail+n)
			return int(n), nil
		}
		// Closed with nothing published before the close (the host publishes its last
		// bytes, then sets the flag: look at the head again after the flag).
		if atomic.LoadUint32(r.flag()) != 0 && atomic.LoadUint64(r.word(posWrite)) == tail {
			return 0, io.EOF
		}
		if b.wait() && atomic.LoadUint64(r.word(posWrite)) == tail {
			return 0, io.EOF
		}
	}
}

// Write publishes p (waiting for room).
func (c *shmChannel) Write(p []byte) (int, error) {
	r := &c.tx
	done := 0
	b := newBackoff(c.ppid)
	for done < len(p) {
		head := atomic.LoadUint64(r.word(posWrite))
		tail := atomic.LoadUint64(r.word(posRead))
		free := r.capacity - (head - tail)
		if free == 0 {
			if b.wait() {
				return done, errors.New("the host exited")
			}
			continue
		}
		at := head & (r.capacity - 1)
		n := min(free, uint64(len(p)-done), r.capacity-at)
		copy(r.data()[at:at+n], p[done:done+int(n)])
		atomic.StoreUint64(r.word(posWrite), head+n)
		done += int(n)
		b = newBackoff(c.ppid)
	}
	return done, nil
}

// Close marks the filter's ring closed and unmaps the file.
func (c *shmChannel) Close() error {
	atomic.StoreUint32(c.tx.flag(), 1)
	return syscall.Munmap(c.mem)
}
