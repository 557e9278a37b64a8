/* The filter's side of a channel (spec/bridge.md §3): buffered frames over two
 * descriptors, and the four transports. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define READ_CHUNK (256u << 10)

/* ---- shared-memory rings ------------------------------------------------------------ */

#define SHM_BLOCK 4096u
#define POS_WRITE 0u
#define POS_READ 64u
#define POS_CLOSED 128u

static uint64_t *pos(hb_channel *c, size_t ring, size_t at) {
    return (uint64_t *)(void *)(c->shm + ring + at);
}

/* Waits a little (spin 50 µs, then sleeps growing to 1 ms on the host's pidfd); returns 1
 * once the host has exited. */
static int backoff(hb_channel *c, struct timespec *start, long *nap_us) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (start->tv_sec < 0) *start = now; /* the first wait: a ready ring reads no clock */
    long spent = (now.tv_sec - start->tv_sec) * 1000000L + (now.tv_nsec - start->tv_nsec) / 1000;
    if (spent < 50) {
        static unsigned spins;
        /* Now and then the host may be waiting for this core; a yield is a system call. */
        if (++spins % 1024 == 0) sched_yield();
        return 0;
    }
    if (*nap_us < 1000) {
        struct timespec t = {0, *nap_us * 1000L};
        nanosleep(&t, NULL);
        *nap_us *= 2;
        struct pollfd p = {c->peer, POLLIN, 0};
        return c->peer >= 0 && poll(&p, 1, 0) > 0;
    }
    struct pollfd p = {c->peer, POLLIN, 0};
    if (c->peer < 0) {
        struct timespec t = {0, 1000000L};
        nanosleep(&t, NULL);
        return 0;
    }
    return poll(&p, 1, 1) > 0;
}

/* Reads what is available (at least one byte, waiting for it): >0, 0 at the end. */
static ssize_t ring_read(hb_channel *c, void *dst, size_t n) {
    struct timespec start = {-1, 0};
    long nap = 20;
    for (;;) {
        uint64_t head = __atomic_load_n(pos(c, c->rx, POS_WRITE), __ATOMIC_ACQUIRE);
        uint64_t tail = __atomic_load_n(pos(c, c->rx, POS_READ), __ATOMIC_RELAXED);
        if (head != tail) {
            size_t at = (size_t)(tail & (c->cap - 1));
            size_t take = (size_t)(head - tail);
            if (take > n) take = n;
            if (take > c->cap - at) take = (size_t)(c->cap - at);
            memcpy(dst, c->shm + c->rx + SHM_BLOCK + at, take);
            __atomic_store_n(pos(c, c->rx, POS_READ), tail + take, __ATOMIC_RELEASE);
            return (ssize_t)take;
        }
        uint32_t closed = __atomic_load_n((uint32_t *)(void *)(c->shm + c->rx + POS_CLOSED), __ATOMIC_ACQUIRE);
        /* Closed with nothing published before the close (the host publishes its last
         * bytes, then sets the flag: look at the head again after the flag). */
        if (closed && __atomic_load_n(pos(c, c->rx, POS_WRITE), __ATOMIC_ACQUIRE) == tail) return 0;
        if (backoff(c, &start, &nap) &&
            __atomic_load_n(pos(c, c->rx, POS_WRITE), __ATOMIC_ACQUIRE) == tail)
            return 0;
    }
}

static int ring_write(hb_channel *c, const uint8_t *p, size_t n) {
    struct timespec start = {-1, 0};
    long nap = 20;
    while (n) {
        uint64_t head = __atomic_load_n(pos(c, c->tx, POS_WRITE), __ATOMIC_RELAXED);
        uint64_t tail = __atomic_load_n(pos(c, c->tx, POS_READ), __ATOMIC_ACQUIRE);
        size_t free_ = (size_t)(c->cap - (head - tail));
        if (!free_) {
            if (backoff(c, &start, &nap)) {
                errno = EPIPE;
                return -1;
            }
            continue;
        }
        size_t at = (size_t)(head & (c->cap - 1));
        size_t put = n < free_ ? n : free_;
        if (put > c->cap - at) put = (size_t)(c->cap - at);
        memcpy(c->shm + c->tx + SHM_BLOCK + at, p, put);
        __atomic_store_n(pos(c, c->tx, POS_WRITE), head + put, __ATOMIC_RELEASE);
        p += put;
        n -= put;
        start.tv_sec = -1;
        nap = 20;
    }
    return 0;
}

static ssize_t raw_read(hb_channel *c, void *dst, size_t n) {
    return c->shm ? ring_read(c, dst, n) : read(c->rfd, dst, n);
}

static int raw_write(hb_channel *c, const uint8_t *p, size_t n) {
    if (c->shm) return ring_write(c, p, n);
    while (n) {
        ssize_t w = write(c->wfd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int hb_channel_flush(hb_channel *c) {
    if (raw_write(c, c->out.p, c->out.len)) return -1;
    c->out.len = 0;
    return 0;
}

int hb_channel_write(hb_channel *c, const void *data, size_t n) {
    if (n >= READ_CHUNK) {
        /* Large payloads go straight to the descriptor after what is buffered. */
        if (hb_channel_flush(c)) return -1;
        return raw_write(c, data, n);
    }
    if (hb_buf_put(&c->out, data, n)) return -1;
    return c->out.len >= READ_CHUNK ? hb_channel_flush(c) : 0;
}

int hb_channel_read(hb_channel *c, void *dst, size_t n) {
    uint8_t *out = dst;
    size_t got = 0;
    while (got < n) {
        size_t avail = c->in.len - c->in_pos;
        if (avail) {
            size_t take = avail < n - got ? avail : n - got;
            memcpy(out + got, c->in.p + c->in_pos, take);
            c->in_pos += take;
            got += take;
            continue;
        }
        if (hb_channel_flush(c)) return -1;
        if (n - got >= READ_CHUNK) {
            ssize_t r = raw_read(c, out + got, n - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return (r == 0 && got == 0) ? 0 : -1;
            got += (size_t)r;
            continue;
        }
        c->in_pos = 0;
        c->in.len = 0;
        if (c->in.cap < READ_CHUNK) {
            uint8_t *p = realloc(c->in.p, READ_CHUNK);
            if (!p) return -1;
            c->in.p = p;
            c->in.cap = READ_CHUNK;
        }
        ssize_t r = raw_read(c, c->in.p, c->in.cap);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return (r == 0 && got == 0) ? 0 : -1;
        c->in.len = (size_t)r;
    }
    return 1;
}

void hb_channel_close(hb_channel *c) {
    hb_channel_flush(c);
    if (c->shm) {
        __atomic_store_n((uint32_t *)(void *)(c->shm + c->tx + POS_CLOSED), 1u, __ATOMIC_RELEASE);
        munmap(c->shm, c->shm_len);
        c->shm = NULL;
        if (c->peer >= 0) close(c->peer);
    } else if (c->owned) {
        close(c->rfd);
        if (c->wfd != c->rfd) close(c->wfd);
    }
    hb_buf_free(&c->in);
    hb_buf_free(&c->out);
    c->in_pos = 0;
}

static int fail(char *err, size_t errlen, const char *what, const char *where) {
    snprintf(err, errlen, "%s %s: %s", what, where, strerror(errno));
    return -1;
}

int hb_channel_open(hb_channel *c, const char *spec, int pipe_r, int pipe_w, char *err,
                    size_t errlen) {
    memset(c, 0, sizeof *c);
    const char *colon = strchr(spec, ':');
    const char *addr = colon ? colon + 1 : "";
    size_t tlen = colon ? (size_t)(colon - spec) : strlen(spec);
    if (tlen == 4 && !strncmp(spec, "pipe", 4)) {
        c->rfd = pipe_r;
        c->wfd = pipe_w;
        c->owned = false;
        return 0;
    }
    if (tlen == 4 && !strncmp(spec, "fifo", 4)) {
        char path[4096];
        snprintf(path, sizeof path, "%s/to-filter", addr);
        c->rfd = open(path, O_RDONLY | O_CLOEXEC);
        if (c->rfd < 0) return fail(err, errlen, "opening", path);
        snprintf(path, sizeof path, "%s/from-filter", addr);
        c->wfd = open(path, O_WRONLY | O_CLOEXEC);
        if (c->wfd < 0) return fail(err, errlen, "opening", path);
        c->owned = true;
        return 0;
    }
    if (tlen == 3 && !strncmp(spec, "shm", 3)) {
        int fd = open(addr, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        if (fd < 0 || fstat(fd, &st)) return fail(err, errlen, "opening", addr);
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (m == MAP_FAILED) return fail(err, errlen, "mapping", addr);
        c->shm = m;
        c->shm_len = (size_t)st.st_size;
        memcpy(&c->cap, c->shm + 8, 8);
        if (memcmp(c->shm, "HDBRSHM1", 8) || c->cap < SHM_BLOCK || (c->cap & (c->cap - 1)) ||
            c->shm_len < SHM_BLOCK + 2 * (SHM_BLOCK + c->cap)) {
            munmap(m, c->shm_len);
            c->shm = NULL;
            snprintf(err, errlen, "%s is not a Heddle shared-memory channel", addr);
            return -1;
        }
        c->rx = SHM_BLOCK;
        c->tx = SHM_BLOCK + SHM_BLOCK + (size_t)c->cap;
        c->peer = (int)syscall(SYS_pidfd_open, getppid(), 0);
        prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); /* short back-off sleeps stay short */
        c->rfd = c->wfd = -1;
        c->owned = false;
        return 0;
    }
    int fd = -1;
    if (tlen == 3 && !strncmp(spec, "tcp", 3)) {
        char host[256];
        const char *port = strrchr(addr, ':');
        if (!port || (size_t)(port - addr) >= sizeof host) {
            snprintf(err, errlen, "a bad TCP address %s", addr);
            return -1;
        }
        memcpy(host, addr, (size_t)(port - addr));
        host[port - addr] = 0;
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
        int rc = getaddrinfo(host, port + 1, &hints, &res);
        if (rc) {
            snprintf(err, errlen, "resolving %s: %s", addr, gai_strerror(rc));
            return -1;
        }
        for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
            fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen)) {
                close(fd);
                fd = -1;
            }
        }
        freeaddrinfo(res);
        if (fd < 0) return fail(err, errlen, "connecting to", addr);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    } else if (tlen == 4 && !strncmp(spec, "unix", 4)) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(addr) >= sizeof sa.sun_path) {
            snprintf(err, errlen, "a socket path too long: %s", addr);
            return -1;
        }
        strcpy(sa.sun_path, addr);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
            if (fd >= 0) close(fd);
            return fail(err, errlen, "connecting to", addr);
        }
    } else {
        snprintf(err, errlen, "unknown bridge transport '%s'", spec);
        return -1;
    }
    c->rfd = c->wfd = fd;
    c->owned = true;
    return 0;
}
