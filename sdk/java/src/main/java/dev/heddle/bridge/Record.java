package dev.heddle.bridge;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/** One record crossing the bridge: its codec, number, key and bytes. */
public record Record(int codec, long seq, byte[] key, byte[] data) {
    /** The payload as text. */
    public String text() {
        return new String(data, StandardCharsets.UTF_8);
    }

    /** The payload as little-endian doubles (an F64 array record), without a copy. */
    public java.nio.DoubleBuffer doubles() {
        return ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN).asDoubleBuffer();
    }

    /** The payload as little-endian longs (an I64 array record), without a copy. */
    public java.nio.LongBuffer longs() {
        return ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer();
    }

    /** Little-endian bytes of doubles, for an F64 array record. */
    public static byte[] f64Bytes(double... values) {
        ByteBuffer b = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        for (double v : values) {
            b.putDouble(v);
        }
        return b.array();
    }
}
