/* A bridged filter in C: each UTF-8 line in, each of its words out, lower-cased (ASCII
 * letters; other bytes kept). Words are the runs between ASCII whitespace. Part of the
 * mixed-language pipeline (examples/bridges). */
#include <stdlib.h>
#include <string.h>

#include "heddle_bridge.h"

static char *buf;
static size_t cap;

static int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static int process(void *user, const hb_record *r, hb_session *s) {
    (void)user;
    if (r->len > cap) {
        char *p = realloc(buf, r->len);
        if (!p) {
            hb_fail(s, "out of memory for a %zu-byte line", r->len);
            return -1;
        }
        buf = p;
        cap = r->len;
    }
    size_t i = 0;
    while (i < r->len) {
        while (i < r->len && is_space(r->data[i])) i++;
        size_t start = i;
        while (i < r->len && !is_space(r->data[i])) {
            unsigned char c = r->data[i];
            buf[i] = (char)((c >= 'A' && c <= 'Z') ? c + 32 : c);
            i++;
        }
        if (i > start && hb_emit(s, HB_UTF8, buf + start, i - start, NULL, 0)) return -1;
    }
    return 0;
}

int main(void) {
    hb_filter f = {.process = process};
    int status = hb_run(&f);
    free(buf);
    return status;
}
