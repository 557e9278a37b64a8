/* The reference filter of spec/bridge.md §9: utf8 upper-cased (ASCII), f64 arrays summed,
 * anything else echoed, keys kept; finalize emits the prefix and the count. A second
 * argument N makes record N fail (the conformance suite's error case). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

typedef struct state {
    char prefix[256];
    uint64_t count;
    long long fail_at;
    char *buf;
    size_t cap;
} state;

static state ST;

static int init(void *user, int argc, const char *const *argv, const hb_context *ctx,
                hb_session *s) {
    (void)ctx;
    (void)s;
    state *st = user;
    snprintf(st->prefix, sizeof st->prefix, "%s", argc > 0 ? argv[0] : "");
    st->count = 0;
    st->fail_at = argc > 1 ? atoll(argv[1]) : -1;
    return 0;
}

static int process(void *user, const hb_record *r, hb_session *s) {
    state *st = user;
    if ((long long)st->count == st->fail_at) {
        hb_fail(s, "asked to fail at record %llu", (unsigned long long)st->count);
        return -1;
    }
    st->count++;
    if (r->codec == HB_UTF8) {
        if (r->len > st->cap) {
            char *p = realloc(st->buf, r->len);
            if (!p) {
                hb_fail(s, "out of memory");
                return -1;
            }
            st->buf = p;
            st->cap = r->len;
        }
        for (size_t i = 0; i < r->len; i++) {
            char c = (char)r->data[i];
            st->buf[i] = (c >= 'a' && c <= 'z') ? (char)(c - 32) : c;
        }
        return hb_emit(s, HB_UTF8, st->buf, r->len, r->key, r->key_len);
    }
    if (r->codec == HB_F64) {
        double sum = 0, v;
        for (size_t i = 0; i + 8 <= r->len; i += 8) {
            memcpy(&v, r->data + i, 8); /* little-endian hosts only (x86-64, aarch64) */
            sum += v;
        }
        return hb_emit(s, HB_F64, &sum, 8, r->key, r->key_len);
    }
    return hb_emit(s, r->codec, r->data, r->len, r->key, r->key_len);
}

static int finalize(void *user, hb_session *s) {
    state *st = user;
    char line[300];
    int n = snprintf(line, sizeof line, "%s%llu", st->prefix, (unsigned long long)st->count);
    return hb_emit(s, HB_UTF8, line, (size_t)n, NULL, 0);
}

hb_filter hb_reference_filter(void) {
    hb_filter f = {&ST, init, process, finalize};
    return f;
}
