package dev.heddle.bridge;

import java.util.List;

/**
 * A DataCutter filter: {@code init} once with the task's arguments, {@code process} per record
 * in order, {@code finalize} once at the end. An exception ends the bridge with an ERROR
 * (INIT, PROCESS with the record's number, or FINALIZE) carrying its message.
 */
public interface Filter {
    /** Where the task runs. */
    record Context(String task, int instance, int parallelism) {}

    default void init(List<String> args, Context ctx) throws Exception {}

    void process(Record record, Emitter out) throws Exception;

    default void finalize(Emitter out) throws Exception {}
}
