package dev.heddle.bridge;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/** One bridge seen from the filter (spec/bridge.md §4-§6). */
public final class Session implements Emitter {
    static final int EXIT_OK = 0;
    static final int EXIT_ERROR = 2;
    static final int EXIT_ABORT = 3;

    private record Message(int kind, int codec, long seq, byte[] key, byte[] data) {}

    Channel ch;
    private final String token;
    private final String language;
    InputStream stdin;
    OutputStream stdout;
    boolean canSwitch;
    private boolean paused;
    private long version = 1;
    int edge;
    int framePayload = 1 << 20;
    long maxRecord = 64L << 20;
    private long credits;
    private long grant = 1;
    private long nextIn;
    private long seenIn;
    private long nextOut;
    private long bytesIn;
    private long bytesOut;
    private final ArrayDeque<Message> pending = new ArrayDeque<>();
    private final ArrayDeque<Message> deferred = new ArrayDeque<>();
    private final byte[] hdr = new byte[Wire.HEADER_LEN];
    private final ByteBuffer out = ByteBuffer.allocate(Wire.HEADER_LEN);

    Session(Channel ch, String token, String language) {
        this.ch = ch;
        this.token = token;
        this.language = language;
        String v = System.getenv("HEDDLE_BRIDGE_TEST_VERSION"); // tests of version refusal
        if (v != null && !v.isEmpty()) version = Long.parseLong(v);
    }

    private Message readWire() throws IOException {
        if (!ch.readFully(hdr, true)) return null;
        Wire.Header h = Wire.decode(hdr);
        if ((h.flags & Wire.FIRST) == 0) throw BridgeException.protocol("a message without a FIRST frame");
        if (h.kind != Wire.KIND_DATA && h.kind != Wire.KIND_CREDIT && h.kind != Wire.KIND_CONTROL)
            throw BridgeException.protocol("a frame of kind " + h.kind + " on a bridge");
        if (h.kind == Wire.KIND_DATA) {
            if (h.tag != Wire.TAG_DATA) throw BridgeException.protocol("a record with tag " + h.tag);
            if (h.codec == Codec.PICKLE)
                throw new BridgeException("PROTOCOL", "record " + h.seq + " is a pickle (B5)", h.seq);
            if (h.seq != seenIn)
                throw new BridgeException("PROTOCOL", "record " + h.seq + " arrived where record " + seenIn + " was due (B2)", h.seq);
            seenIn++;
        }
        if (h.msgLen > maxRecord)
            throw new BridgeException("RECORD_TOO_LARGE", "record " + h.seq + " is " + h.msgLen
                    + " bytes, above max_record " + maxRecord, h.seq);
        byte[] key = new byte[h.keyLen];
        byte[] data = new byte[(int) h.msgLen];
        ch.readFully(key, false);
        int at = 0;
        while (true) {
            if (at + h.fragLen > data.length) throw BridgeException.protocol("a fragment beyond its message");
            ch.in.readNBytes(data, at, h.fragLen);
            at += h.fragLen;
            if ((h.flags & Wire.LAST) != 0) break;
            ch.readFully(hdr, false);
            Wire.Header n = Wire.decode(hdr);
            if ((n.flags & Wire.FIRST) != 0 || n.kind != h.kind || n.seq != h.seq || n.msgLen != h.msgLen || n.keyLen != 0)
                throw BridgeException.protocol("a fragment that does not continue its message");
            h.flags = n.flags;
            h.fragLen = n.fragLen;
        }
        if (at != data.length) throw BridgeException.protocol("a message shorter than its msg_len");
        return new Message(h.kind, h.codec, h.seq, key, data);
    }

    void writeMessage(int kind, int codec, int tag, long seq, byte[] key, byte[] data) throws IOException {
        int fp = Math.max(1, framePayload);
        int at = 0;
        do {
            int chunk = Math.min(data.length - at, fp);
            int flags = (at == 0 ? Wire.FIRST : 0) | (at + chunk >= data.length ? Wire.LAST : 0);
            int keyLen = at == 0 ? key.length : 0;
            out.clear();
            Wire.encode(out, kind, flags, codec, keyLen, edge, tag, seq, data.length, chunk);
            ch.out.write(out.array(), 0, Wire.HEADER_LEN);
            ch.out.write(key, 0, keyLen);
            ch.out.write(data, at, chunk);
            at += chunk;
        } while (at < data.length);
    }

    void send(Wire.Json j) throws IOException {
        writeMessage(Wire.KIND_CONTROL, Codec.JSON, 0, 0, new byte[0], j.bytes());
    }

    private void addCredit(Message m) throws BridgeException {
        if (m.data.length != 4) throw BridgeException.protocol("a credit of " + m.data.length + " bytes");
        credits += Integer.toUnsignedLong(ByteBuffer.wrap(m.data).order(java.nio.ByteOrder.LITTLE_ENDIAN).getInt());
    }

    @Override
    public void emit(int codec, byte[] data, byte[] key) throws IOException {
        byte[] k = key == null ? new byte[0] : key;
        if (codec == Codec.PICKLE) throw BridgeException.protocol("pickled records cannot cross a bridge");
        if (data.length > maxRecord)
            throw new BridgeException("RECORD_TOO_LARGE", "result " + nextOut + " is " + data.length
                    + " bytes, above max_record " + maxRecord, -1);
        if (k.length > 65535) throw BridgeException.protocol("a key of " + k.length + " bytes");
        while (credits == 0) { // F2: read ahead until a credit arrives
            Message m = readWire();
            if (m == null) throw BridgeException.protocol("the host closed the channel while waiting for credit");
            if (m.kind == Wire.KIND_CREDIT) {
                addCredit(m);
            } else {
                if (m.kind == Wire.KIND_CONTROL && str(parse(m), "type").equals("COMPLETE")) {
                    credits = Long.MAX_VALUE / 2; // F3: the host sends no more credit
                }
                pending.add(m);
            }
        }
        credits--;
        writeMessage(Wire.KIND_DATA, codec, Wire.TAG_RESULTS, nextOut, k, data);
        nextOut++;
        bytesOut += data.length;
    }

    private Message next() throws IOException {
        if (!deferred.isEmpty() && !paused) return deferred.poll();
        if (!pending.isEmpty()) return pending.poll();
        return readWire();
    }

    private static JsonObject parse(Message m) throws BridgeException {
        try {
            JsonElement e = JsonParser.parseString(new String(m.data, StandardCharsets.UTF_8));
            if (e.isJsonObject() && e.getAsJsonObject().has("type")) return e.getAsJsonObject();
        } catch (JsonParseException ignored) {
            // reported below
        }
        throw BridgeException.protocol("a control message that is not a JSON object with a type");
    }

    private static long num(JsonObject o, String k) {
        JsonElement e = o.get(k);
        return e != null && e.isJsonPrimitive() ? e.getAsLong() : 0;
    }

    private static String str(JsonObject o, String k) {
        JsonElement e = o.get(k);
        return e != null && e.isJsonPrimitive() ? e.getAsString() : "";
    }

    private void status() throws IOException {
        long fds = 0;
        long rss = 0;
        try (Stream<Path> s = Files.list(Path.of("/proc/self/fd"))) {
            fds = s.count();
            String[] statm = Files.readString(Path.of("/proc/self/statm")).trim().split(" ");
            rss = Long.parseLong(statm[1]) * 4096;
        } catch (IOException | RuntimeException ignored) {
            // 0 where the platform cannot tell
        }
        long cpu = ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os
                ? os.getProcessCpuTime() / 1000
                : 0;
        send(new Wire.Json("STATUS").put("records_in", nextIn).put("records_out", nextOut)
                .put("bytes_in", bytesIn).put("bytes_out", bytesOut).put("open_fds", fds)
                .put("rss_bytes", rss).put("cpu_us", cpu));
    }

    private void switchTo(JsonObject ctl) throws IOException {
        long epoch = num(ctl, "epoch");
        if (!pending.isEmpty()) throw BridgeException.protocol("frames after CHANGE_BRIDGE_TYPE");
        if (!canSwitch) throw BridgeException.protocol("this session cannot switch transports");
        send(new Wire.Json("CHANGE_BRIDGE_TYPE").put("epoch", epoch));
        ch.close();
        String t = str(ctl, "transport");
        ch = Channel.open(t.equals("pipe") ? t : t + ":" + str(ctl, "address"), stdin, stdout);
        send(new Wire.Json("CHANGE_BRIDGE_TYPE").put("epoch", epoch).put("token", token));
    }

    private static BridgeException userError(String code, long record, Exception e) {
        if (e instanceof BridgeException b) return b;
        String msg = e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
        return new BridgeException(code, msg, record);
    }

    private int run(Filter f) throws IOException {
        send(new Wire.Json("INITIALIZE").put("version", version).put("token", token).put("language", language));
        Message m = readWire();
        if (m == null || m.kind != Wire.KIND_CONTROL) throw BridgeException.protocol("the host did not answer INITIALIZE");
        JsonObject init = parse(m);
        String type = str(init, "type");
        if (type.equals("ERROR")) {
            System.err.println("heddle bridge: the host refused this filter: " + str(init, "message"));
            return EXIT_ERROR;
        }
        if (!type.equals("INITIALIZE")) throw BridgeException.protocol("expected INITIALIZE, got " + type);
        if (num(init, "version") != version)
            throw new BridgeException("VERSION", "host speaks bridge protocol version " + num(init, "version")
                    + ", this filter version " + version, -1);
        edge = (int) num(init, "bridge");
        framePayload = (int) num(init, "frame_payload");
        maxRecord = num(init, "max_record");
        credits = num(init, "credits");
        grant = Math.max(1, credits / 2);
        List<String> args = new ArrayList<>();
        JsonElement a = init.get("args");
        if (a != null && a.isJsonArray()) {
            for (JsonElement e : (JsonArray) a) args.add(e.getAsString());
        }
        try {
            f.init(args, new Filter.Context(str(init, "task"), (int) num(init, "instance"), (int) num(init, "parallelism")));
        } catch (Exception e) {
            throw userError("INIT", -1, e);
        }
        send(new Wire.Json("START_STOP").put("state", "started"));
        return loop(f);
    }

    private int loop(Filter f) throws IOException {
        while (true) {
            Message m = next();
            if (m == null) throw BridgeException.protocol("the host closed the channel before COMPLETE");
            if (m.kind == Wire.KIND_DATA) {
                if (paused) {
                    deferred.add(m);
                    continue;
                }
                nextIn++;
                bytesIn += m.data.length;
                try {
                    f.process(new Record(m.codec, m.seq, m.key, m.data), this);
                } catch (Exception e) {
                    throw userError("PROCESS", m.seq, e);
                }
                if (nextIn % grant == 0) {
                    byte[] n = ByteBuffer.allocate(4).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt((int) grant).array();
                    writeMessage(Wire.KIND_CREDIT, Codec.RAW, 0, 0, new byte[0], n);
                }
            } else if (m.kind == Wire.KIND_CREDIT) {
                addCredit(m);
            } else {
                JsonObject ctl = parse(m);
                switch (str(ctl, "type")) {
                    case "PAUSE_RESUME" -> {
                        JsonElement p = ctl.get("paused");
                        paused = p != null && p.getAsBoolean();
                        send(new Wire.Json("PAUSE_RESUME").put("paused", paused));
                    }
                    case "STATUS" -> status();
                    case "COMPLETE" -> {
                        if (paused) throw BridgeException.protocol("COMPLETE while paused");
                        credits = Long.MAX_VALUE / 2; // F3: finalize needs no credit
                        try {
                            f.finalize(this);
                        } catch (Exception e) {
                            throw userError("FINALIZE", -1, e);
                        }
                        send(new Wire.Json("COMPLETE").put("records_in", nextIn).put("records_out", nextOut));
                        return EXIT_OK;
                    }
                    case "ABORT" -> {
                        System.err.println("heddle bridge: aborted by the host: " + str(ctl, "reason"));
                        return EXIT_ABORT;
                    }
                    case "ERROR" -> {
                        System.err.println("heddle bridge: the host failed: " + str(ctl, "message"));
                        return EXIT_ERROR;
                    }
                    case "CHANGE_BRIDGE_TYPE" -> switchTo(ctl);
                    default -> throw BridgeException.protocol("unknown control message " + str(ctl, "type"));
                }
            }
        }
    }

    /** Runs the whole session; returns the exit status (0 done, 2 error, 3 aborted). */
    int finish(Filter f) {
        int status;
        try {
            status = run(f);
        } catch (IOException e) {
            BridgeException b = e instanceof BridgeException x ? x : BridgeException.protocol(e.toString());
            Wire.Json j = new Wire.Json("ERROR").put("code", b.code()).put("message", b.getMessage());
            if (b.record() >= 0) j.put("record", b.record());
            try {
                send(j);
            } catch (IOException ignored) {
                // the channel is gone; the exit status tells the host
            }
            System.err.println("heddle bridge: " + b.getMessage());
            status = EXIT_ERROR;
        }
        try {
            ch.out.flush();
        } catch (IOException ignored) {
            // as above
        }
        return status;
    }
}
