package dev.heddle.bridge;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.Closeable;
import java.io.EOFException;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;

/** One transport connection (spec/bridge.md §3), buffered both ways. */
final class Channel {
    final InputStream in;
    final OutputStream out;
    private final Closeable closer;

    Channel(InputStream in, OutputStream out, Closeable closer) {
        this.in = new BufferedInputStream(in, 256 << 10);
        this.out = new BufferedOutputStream(out, 256 << 10);
        this.closer = closer;
    }

    /** Reads exactly b.length bytes, flushing first when it must wait; false on a clean end. */
    boolean readFully(byte[] b, boolean atBoundary) throws IOException {
        if (in.available() < b.length) out.flush();
        int got = 0;
        while (got < b.length) {
            int n = in.read(b, got, b.length - got);
            if (n < 0) {
                if (got == 0 && atBoundary) return false;
                throw new EOFException("the host closed the channel inside a frame");
            }
            got += n;
        }
        return true;
    }

    void close() throws IOException {
        out.flush();
        if (closer != null) closer.close();
    }

    /** Opens pipe, fifo:DIR, tcp:HOST:PORT, unix:PATH or shm:PATH; pipe uses the saved standard streams. */
    static Channel open(String spec, InputStream stdin, OutputStream stdout) throws IOException {
        int colon = spec.indexOf(':');
        String transport = colon < 0 ? spec : spec.substring(0, colon);
        String addr = colon < 0 ? "" : spec.substring(colon + 1);
        switch (transport) {
            case "pipe":
                return new Channel(stdin, stdout, null);
            case "fifo": {
                FileInputStream r = new FileInputStream(Path.of(addr, "to-filter").toFile());
                FileOutputStream w = new FileOutputStream(Path.of(addr, "from-filter").toFile());
                return new Channel(r, w, () -> {
                    r.close();
                    w.close();
                });
            }
            case "tcp": {
                int c = addr.lastIndexOf(':');
                Socket s = new Socket();
                s.setTcpNoDelay(true);
                s.connect(new InetSocketAddress(addr.substring(0, c), Integer.parseInt(addr.substring(c + 1))));
                return new Channel(s.getInputStream(), s.getOutputStream(), s);
            }
            case "shm": {
                Shm shm = Shm.open(addr);
                OutputStream w = shm.out();
                return new Channel(shm.in(), w, w::close);
            }
            case "unix": {
                SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX);
                ch.connect(UnixDomainSocketAddress.of(addr));
                return new Channel(Channels.newInputStream(ch), Channels.newOutputStream(ch), ch);
            }
            default:
                throw BridgeException.protocol("unknown bridge transport '" + spec + "'");
        }
    }
}
