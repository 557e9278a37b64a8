package dev.heddle.bridge;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.List;

/** Frame headers (spec/wire.md §3, §7) and the canonical JSON of spec/bridge.md B4. */
final class Wire {
    private Wire() {}

    static final int HEADER_LEN = 48;
    static final int MAGIC = 0x4448;
    static final int KIND_DATA = 1;
    static final int KIND_CREDIT = 4;
    static final int KIND_CONTROL = 7;
    static final int FIRST = 1;
    static final int LAST = 2;
    static final int TAG_DATA = 0;
    static final int TAG_RESULTS = 1;
    private static final int[] ELEMENT = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8};

    /** A decoded header. */
    static final class Header {
        int kind;
        int flags;
        int codec;
        int keyLen;
        int edge;
        int tag;
        long seq;
        long msgLen;
        int fragLen;
    }

    static void encode(ByteBuffer b, int kind, int flags, int codec, int keyLen, int edge, int tag,
                       long seq, long msgLen, int fragLen) {
        b.order(ByteOrder.LITTLE_ENDIAN);
        b.putShort((short) MAGIC).put((byte) 1).put((byte) kind).put((byte) flags).put((byte) codec);
        b.putShort((short) keyLen).putInt(edge).putInt(tag).putLong(0L).putLong(seq).putLong(msgLen);
        b.putInt(fragLen).putInt(0);
    }

    /** Decodes and checks rules V2-V13; throws with the reason a header is refused. */
    static Header decode(byte[] in) throws BridgeException {
        ByteBuffer b = ByteBuffer.wrap(in).order(ByteOrder.LITTLE_ENDIAN);
        if ((b.getShort(0) & 0xFFFF) != MAGIC) throw BridgeException.protocol("not a Heddle frame (bad magic)");
        if (in[2] != 1) throw BridgeException.protocol("unsupported wire version " + in[2]);
        Header h = new Header();
        h.kind = in[3] & 0xFF;
        h.flags = in[4] & 0xFF;
        h.codec = in[5] & 0xFF;
        h.keyLen = b.getShort(6) & 0xFFFF;
        h.edge = b.getInt(8);
        h.tag = b.getInt(12);
        h.seq = b.getLong(24);
        h.msgLen = b.getLong(32);
        h.fragLen = b.getInt(40);
        long frag = Integer.toUnsignedLong(h.fragLen);
        if (h.kind < 1 || h.kind > 9) throw BridgeException.protocol("unknown frame kind " + h.kind);
        if ((h.flags & 0xFC) != 0) throw BridgeException.protocol("reserved flag bits set");
        if (!(h.codec <= 5 || (h.codec >= 0x10 && h.codec <= 0x19))) throw BridgeException.protocol("unknown codec " + h.codec);
        if (b.getInt(44) != 0) throw BridgeException.protocol("reserved header word is not 0");
        if (frag > (16 << 20) || h.msgLen < 0 || h.msgLen > (1L << 40) || frag > h.msgLen)
            throw BridgeException.protocol("bad lengths (frag_len " + frag + ", msg_len " + h.msgLen + ")");
        if (h.flags == (FIRST | LAST) && frag != h.msgLen)
            throw BridgeException.protocol("a whole frame whose frag_len differs from msg_len");
        if (h.keyLen != 0 && (h.flags & FIRST) == 0) throw BridgeException.protocol("a key on a fragment that is not the first");
        if (h.codec >= 0x10 && h.msgLen % ELEMENT[h.codec - 0x10] != 0)
            throw BridgeException.protocol("an array whose length is not a multiple of its element");
        return h;
    }

    /** Canonical JSON, member by member: {"type":T,...}. */
    static final class Json {
        private final StringBuilder sb = new StringBuilder();

        Json(String type) {
            sb.append("{\"type\":");
            str(type);
        }

        private void str(String s) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"' -> sb.append("\\\"");
                    case '\\' -> sb.append("\\\\");
                    case '\b' -> sb.append("\\b");
                    case '\t' -> sb.append("\\t");
                    case '\n' -> sb.append("\\n");
                    case '\f' -> sb.append("\\f");
                    case '\r' -> sb.append("\\r");
                    default -> {
                        if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
                        else sb.append(c);
                    }
                }
            }
            sb.append('"');
        }

        private Json key(String k) {
            sb.append(',');
            str(k);
            sb.append(':');
            return this;
        }

        Json put(String k, String v) {
            key(k).str(v);
            return this;
        }

        Json put(String k, long v) {
            key(k).sb.append(Long.toUnsignedString(v));
            return this;
        }

        Json put(String k, boolean v) {
            key(k).sb.append(v);
            return this;
        }

        Json put(String k, List<String> v) {
            key(k).sb.append('[');
            for (int i = 0; i < v.size(); i++) {
                if (i > 0) sb.append(',');
                str(v.get(i));
            }
            sb.append(']');
            return this;
        }

        byte[] bytes() {
            return (sb + "}").getBytes(StandardCharsets.UTF_8);
        }
    }
}
