/* Heddle bridge SDK for C: write a filter (DataCutter's init / process / finalize) that runs
 * as a task of a Heddle job, speaking the bridge protocol of spec/bridge.md over anonymous
 * pipes, named pipes, TCP or Unix domain sockets.
 *
 *     static int upper(void *user, const hb_record *in, hb_session *s) {
 *         ... make `out` from in->data ...
 *         return hb_emit(s, HB_UTF8, out, in->len, in->key, in->key_len);
 *     }
 *     int main(void) {
 *         hb_filter f = { .process = upper };
 *         return hb_run(&f);
 *     }
 *
 * Every function returning int returns 0 on success and -1 on failure; the session then
 * holds an error (hb_error) that ends it with an ERROR message to the host. */
#ifndef HEDDLE_BRIDGE_H
#define HEDDLE_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The bridge protocol version this SDK speaks (spec/bridge.md). */
#define HB_PROTOCOL_VERSION 1u

/* Record codecs (spec/wire.md §5): how a record's bytes are read. */
enum {
    HB_RAW = 0x00,
    HB_UTF8 = 0x01,
    HB_ARROW_IPC = 0x03,
    HB_JSON = 0x05,
    HB_U8 = 0x10, HB_I8, HB_U16, HB_I16, HB_U32, HB_I32, HB_U64, HB_I64, HB_F32, HB_F64
};

/* Exit statuses of a filter (spec/bridge.md §4). */
enum { HB_EXIT_OK = 0, HB_EXIT_ERROR = 2, HB_EXIT_ABORT = 3 };

/* One record. `data` and `key` stay valid until the callback that received it returns;
 * array records are little-endian elements (aligned to 8 bytes in memory). */
typedef struct hb_record {
    uint8_t codec;
    uint64_t seq;
    const uint8_t *key;
    size_t key_len;
    const uint8_t *data;
    size_t len;
} hb_record;

/* Where the task runs, given to init. */
typedef struct hb_context {
    const char *task;
    uint32_t instance;
    uint32_t parallelism;
} hb_context;

typedef struct hb_session hb_session;

/* A filter: any callback may be NULL (process then echoes the record). A callback returns
 * 0, or non-zero after hb_fail() to end the bridge with an ERROR naming the failure. */
typedef struct hb_filter {
    void *user;
    int (*init)(void *user, int argc, const char *const *argv, const hb_context *ctx,
                hb_session *s);
    int (*process)(void *user, const hb_record *record, hb_session *s);
    int (*finalize)(void *user, hb_session *s);
} hb_filter;

/* Sends one result (waiting for credit if the host has granted none). */
int hb_emit(hb_session *s, uint8_t codec, const void *data, size_t len, const void *key,
            size_t key_len);

/* Records why the current callback fails (printf-style); the callback then returns -1. */
void hb_fail(hb_session *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The session's error text, "" if none. */
const char *hb_error(const hb_session *s);

/* Runs the filter as the bridged process Heddle started (HEDDLE_BRIDGE and
 * HEDDLE_BRIDGE_TOKEN in the environment) and returns the exit status for main(). */
int hb_run(const hb_filter *filter);

/* Runs one session over two open descriptors without switching (tests, embedding). */
int hb_run_fds(int read_fd, int write_fd, const char *token, const char *language,
               const hb_filter *filter);

#ifdef __cplusplus
}
#endif
#endif
