package dev.heddle.bridge.examples;

import dev.heddle.bridge.Bridge;
import dev.heddle.bridge.Codec;
import dev.heddle.bridge.Emitter;
import dev.heddle.bridge.Filter;
import dev.heddle.bridge.Record;
import java.io.IOException;

/**
 * A bridged filter in Java: drops words shorter than 3 letters (Unicode code points) and
 * emits the others keyed by themselves, so the next stage can partition on the word. Part of
 * the mixed-language pipeline (examples/bridges).
 */
public final class DropShortWords implements Filter {
    @Override
    public void process(Record r, Emitter out) throws IOException {
        String word = r.text();
        if (word.codePointCount(0, word.length()) >= 3) {
            out.emit(Codec.UTF8, r.data(), r.data());
        }
    }

    public static void main(String[] args) {
        System.exit(Bridge.run(new DropShortWords()));
    }
}
