package dev.heddle.bridge;

import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;

/**
 * Heddle's bridge SDK for Java: runs a {@link Filter} as a task of a Heddle job, speaking the
 * bridge protocol of spec/bridge.md over anonymous pipes, named pipes, TCP or Unix sockets.
 *
 * <pre>{@code
 * public final class Upper implements Filter {
 *     public void process(Record r, Emitter out) throws IOException {
 *         out.text(r.text().toUpperCase(), r.key());
 *     }
 *     public static void main(String[] a) { System.exit(Bridge.run(new Upper())); }
 * }
 * }</pre>
 */
public final class Bridge {
    private Bridge() {}

    /** The bridge protocol version this SDK speaks. */
    public static final int PROTOCOL_VERSION = 1;

    /** Runs {@code f} as the bridged process Heddle started; returns the exit status. */
    public static int run(Filter f) {
        String spec = System.getenv("HEDDLE_BRIDGE");
        String token = System.getenv("HEDDLE_BRIDGE_TOKEN");
        if (spec == null || token == null) {
            System.err.println("heddle bridge: HEDDLE_BRIDGE and HEDDLE_BRIDGE_TOKEN are not set; this program"
                    + " is a bridged filter and must be started by Heddle");
            return Session.EXIT_ERROR;
        }
        // §3: the protocol owns the standard streams; the author's output goes to stderr.
        InputStream stdin = new FileInputStream(FileDescriptor.in);
        OutputStream stdout = new FileOutputStream(FileDescriptor.out);
        System.setOut(System.err);
        System.setIn(InputStream.nullInputStream());
        Session s;
        try {
            s = new Session(Channel.open(spec, stdin, stdout), token, "java");
        } catch (IOException e) {
            System.err.println("heddle bridge: cannot open the channel " + spec + ": " + e);
            return Session.EXIT_ERROR;
        }
        s.stdin = stdin;
        s.stdout = stdout;
        s.canSwitch = true;
        int status = s.finish(f);
        try {
            s.ch.close();
        } catch (IOException ignored) {
            // the exit status says what happened
        }
        return status;
    }

    /** Runs one session over two streams without switching (tests, embedding). */
    public static int runStreams(InputStream in, OutputStream out, String token, String language, Filter f) {
        Session s = new Session(new Channel(in, out, null), token, language);
        return s.finish(f);
    }
}
