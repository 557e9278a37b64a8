/* The canonical JSON of spec/bridge.md B4: no whitespace, members in the order written,
 * integers in decimal, strings escaping only '"', '\' and U+0000-U+001F. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int hb_buf_put(hb_buf *b, const void *data, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
}

void hb_buf_free(hb_buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static void put_str(hb_buf *b, const char *s) {
    hb_buf_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        switch (*p) {
        case '"': hb_buf_put(b, "\\\"", 2); break;
        case '\\': hb_buf_put(b, "\\\\", 2); break;
        case '\b': hb_buf_put(b, "\\b", 2); break;
        case '\t': hb_buf_put(b, "\\t", 2); break;
        case '\n': hb_buf_put(b, "\\n", 2); break;
        case '\f': hb_buf_put(b, "\\f", 2); break;
        case '\r': hb_buf_put(b, "\\r", 2); break;
        default:
            if (*p < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                hb_buf_put(b, esc, 6);
            } else {
                hb_buf_put(b, p, 1);
            }
        }
    }
    hb_buf_put(b, "\"", 1);
}

static void member(hb_json *j, const char *key) {
    if (!j->first) hb_buf_put(&j->b, ",", 1);
    j->first = false;
    put_str(&j->b, key);
    hb_buf_put(&j->b, ":", 1);
}

void hb_json_begin(hb_json *j, const char *type) {
    j->b.len = 0;
    j->first = true;
    hb_buf_put(&j->b, "{", 1);
    hb_json_str(j, "type", type);
}

void hb_json_str(hb_json *j, const char *key, const char *value) {
    member(j, key);
    put_str(&j->b, value);
}

void hb_json_u64(hb_json *j, const char *key, uint64_t value) {
    char num[24];
    int n = snprintf(num, sizeof num, "%" PRIu64, value);
    member(j, key);
    hb_buf_put(&j->b, num, (size_t)n);
}

void hb_json_bool(hb_json *j, const char *key, bool value) {
    member(j, key);
    hb_buf_put(&j->b, value ? "true" : "false", value ? 4 : 5);
}

int hb_json_end(hb_json *j) { return hb_buf_put(&j->b, "}", 1); }

void hb_json_str_array(hb_json *j, const char *key, const char *const *values, size_t n) {
    member(j, key);
    hb_buf_put(&j->b, "[", 1);
    for (size_t i = 0; i < n; i++) {
        if (i) hb_buf_put(&j->b, ",", 1);
        put_str(&j->b, values[i]);
    }
    hb_buf_put(&j->b, "]", 1);
}
