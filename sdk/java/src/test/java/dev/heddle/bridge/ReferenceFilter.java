package dev.heddle.bridge;

import java.io.IOException;
import java.nio.DoubleBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * The reference filter of spec/bridge.md §9: UTF-8 upper-cased (ASCII), F64 arrays summed,
 * anything else echoed, keys kept; finalize emits the prefix and the count. A second argument
 * N makes record N fail.
 */
public final class ReferenceFilter implements Filter {
    private String prefix = "";
    private long count;
    private long failAt = -1;

    @Override
    public void init(List<String> args, Context ctx) {
        prefix = args.isEmpty() ? "" : args.get(0);
        failAt = args.size() > 1 ? Long.parseLong(args.get(1)) : -1;
        count = 0;
    }

    @Override
    public void process(Record r, Emitter out) throws IOException {
        if (count == failAt) throw new IllegalStateException("asked to fail at record " + count);
        count++;
        if (r.codec() == Codec.UTF8) {
            byte[] b = r.data().clone();
            for (int i = 0; i < b.length; i++) {
                if (b[i] >= 'a' && b[i] <= 'z') b[i] -= 32;
            }
            out.emit(Codec.UTF8, b, r.key());
        } else if (r.codec() == Codec.F64) {
            DoubleBuffer v = r.doubles();
            double sum = 0;
            while (v.hasRemaining()) sum += v.get();
            out.doubles(r.key(), sum);
        } else {
            out.emit(r.codec(), r.data(), r.key());
        }
    }

    @Override
    public void finalize(Emitter out) throws IOException {
        out.emit(Codec.UTF8, (prefix + count).getBytes(StandardCharsets.UTF_8), null);
    }

    public static void main(String[] args) {
        System.exit(Bridge.run(new ReferenceFilter()));
    }
}
