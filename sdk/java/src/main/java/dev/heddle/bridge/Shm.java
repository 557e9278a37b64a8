package dev.heddle.bridge;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.locks.LockSupport;

/**
 * The shared-memory rings of spec/bridge.md §3.1, mapped with {@link MappedByteBuffer}: ring 0
 * carries the host's bytes to the filter, ring 1 the filter's to the host. Positions are read
 * with acquire and written with release ordering through {@link VarHandle}s; idle waits spin
 * for 50 µs, then park in growing steps of up to 1 ms and notice the host's exit.
 */
final class Shm {
    private static final int BLOCK = 4096;
    private static final int WRITE = 0;
    private static final int READ = 64;
    private static final int CLOSED = 128;
    private static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle INTS = MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);

    private final MappedByteBuffer map;
    private final long capacity;
    private final int rx;
    private final int tx;
    private final ProcessHandle host = ProcessHandle.current().parent().orElse(null);

    private Shm(MappedByteBuffer map, long capacity) {
        this.map = map;
        this.capacity = capacity;
        this.rx = BLOCK;
        this.tx = (int) (BLOCK + BLOCK + capacity);
    }

    static Shm open(String path) throws IOException {
        try (FileChannel ch = FileChannel.open(Path.of(path), StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            MappedByteBuffer m = ch.map(FileChannel.MapMode.READ_WRITE, 0, ch.size());
            m.order(ByteOrder.LITTLE_ENDIAN);
            byte[] magic = new byte[8];
            m.get(0, magic);
            long cap = m.getLong(8);
            if (!new String(magic, StandardCharsets.US_ASCII).equals("HDBRSHM1") || cap < BLOCK
                    || (cap & (cap - 1)) != 0 || ch.size() < BLOCK + 2 * (BLOCK + cap)) {
                throw BridgeException.protocol(path + " is not a Heddle shared-memory channel");
            }
            return new Shm(m, cap);
        }
    }

    /** Waits a little; true once the host has exited. */
    private boolean pause(long started, long[] nap, int[] spins) {
        if (System.nanoTime() - started < 50_000) {
            if (++spins[0] % 16 == 0) Thread.yield();
            else Thread.onSpinWait();
            return false;
        }
        LockSupport.parkNanos(nap[0]);
        nap[0] = Math.min(nap[0] * 2, 1_000_000);
        return host != null && !host.isAlive();
    }

    InputStream in() {
        return new InputStream() {
            @Override
            public int read() throws IOException {
                byte[] b = new byte[1];
                return read(b, 0, 1) < 0 ? -1 : b[0] & 0xFF;
            }

            @Override
            public int read(byte[] b, int off, int len) {
                if (len == 0) return 0;
                long started = System.nanoTime();
                long[] nap = {5_000};
                int[] spins = {0};
                while (true) {
                    long head = (long) LONGS.getAcquire(map, rx + WRITE);
                    long tail = (long) LONGS.getAcquire(map, rx + READ);
                    if (head != tail) {
                        int at = (int) (tail & (capacity - 1));
                        int n = (int) Math.min(Math.min(head - tail, len), capacity - at);
                        map.get(rx + BLOCK + at, b, off, n);
                        LONGS.setRelease(map, rx + READ, tail + n);
                        return n;
                    }
                    // Closed with nothing published before the close (the host publishes
                    // its last bytes, then sets the flag: look at the head again after it).
                    if ((int) INTS.getAcquire(map, rx + CLOSED) != 0
                            && (long) LONGS.getAcquire(map, rx + WRITE) == tail) return -1;
                    if (pause(started, nap, spins) && (long) LONGS.getAcquire(map, rx + WRITE) == tail) return -1;
                }
            }
        };
    }

    OutputStream out() {
        return new OutputStream() {
            @Override
            public void write(int b) throws IOException {
                write(new byte[] {(byte) b}, 0, 1);
            }

            @Override
            public void write(byte[] b, int off, int len) throws IOException {
                long started = System.nanoTime();
                long[] nap = {5_000};
                int[] spins = {0};
                while (len > 0) {
                    long head = (long) LONGS.getAcquire(map, tx + WRITE);
                    long tail = (long) LONGS.getAcquire(map, tx + READ);
                    long free = capacity - (head - tail);
                    if (free == 0) {
                        if (pause(started, nap, spins)) throw new IOException("the host exited");
                        continue;
                    }
                    int at = (int) (head & (capacity - 1));
                    int n = (int) Math.min(Math.min(free, len), capacity - at);
                    map.put(tx + BLOCK + at, b, off, n);
                    LONGS.setRelease(map, tx + WRITE, head + n);
                    off += n;
                    len -= n;
                    started = System.nanoTime();
                }
            }

            @Override
            public void close() {
                INTS.setRelease(map, tx + CLOSED, 1);
            }
        };
    }
}
