/* The raw baseline of `heddle bench bridges`: a ping-pong of SIZE-byte messages between this
 * process and a forked child over one transport, with no protocol at all — what the bridge
 * adds is measured against it. Usage: raw_pingpong pipe|fifo|tcp|unix|shm SIZE ITERS.
 * Prints the median round trip in microseconds. The shm rings spin, then back off to sleeps
 * of up to 1 ms, as the bridge's do (spec/bridge.md §3.1). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CAP (4u << 20)

typedef struct ring {
    uint64_t write;
    char pad1[56];
    uint64_t read;
    char pad2[56];
    uint8_t data[CAP];
} ring;

typedef struct end {
    int rfd, wfd;
    ring *in, *out;
} end;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void nap(double started, long *ns) {
    if (now_us() - started < 50) return;
    struct timespec t = {0, *ns};
    nanosleep(&t, NULL);
    if (*ns < 1000000) *ns *= 2;
}

static void ring_put(ring *r, const uint8_t *p, size_t n) {
    double s = now_us();
    long ns = 20000;
    while (n) {
        uint64_t head = __atomic_load_n(&r->write, __ATOMIC_RELAXED);
        uint64_t tail = __atomic_load_n(&r->read, __ATOMIC_ACQUIRE);
        size_t free_ = CAP - (size_t)(head - tail);
        if (!free_) {
            nap(s, &ns);
            continue;
        }
        size_t at = (size_t)(head & (CAP - 1)), k = n < free_ ? n : free_;
        if (k > CAP - at) k = CAP - at;
        memcpy(r->data + at, p, k);
        __atomic_store_n(&r->write, head + k, __ATOMIC_RELEASE);
        p += k;
        n -= k;
    }
}

static void ring_get(ring *r, uint8_t *p, size_t n) {
    double s = now_us();
    long ns = 20000;
    while (n) {
        uint64_t head = __atomic_load_n(&r->write, __ATOMIC_ACQUIRE);
        uint64_t tail = __atomic_load_n(&r->read, __ATOMIC_RELAXED);
        if (head == tail) {
            nap(s, &ns);
            continue;
        }
        size_t at = (size_t)(tail & (CAP - 1)), k = (size_t)(head - tail);
        if (k > n) k = n;
        if (k > CAP - at) k = CAP - at;
        memcpy(p, r->data + at, k);
        __atomic_store_n(&r->read, tail + k, __ATOMIC_RELEASE);
        p += k;
        n -= k;
        s = now_us();
        ns = 20000;
    }
}

static void put(end *e, const uint8_t *p, size_t n) {
    if (e->out) return ring_put(e->out, p, n);
    while (n) {
        ssize_t w = write(e->wfd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) _exit(3);
        p += w;
        n -= (size_t)w;
    }
}

static void get(end *e, uint8_t *p, size_t n) {
    if (e->in) return ring_get(e->in, p, n);
    while (n) {
        ssize_t r = read(e->rfd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) _exit(3);
        p += r;
        n -= (size_t)r;
    }
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s pipe|fifo|tcp|unix|shm SIZE ITERS\n", argv[0]);
        return 2;
    }
    const char *t = argv[1];
    size_t size = (size_t)strtoull(argv[2], NULL, 10);
    int iters = atoi(argv[3]);
    end parent = {-1, -1, NULL, NULL}, child = {-1, -1, NULL, NULL};
    int listener = -1;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    char dir[] = "/tmp/heddle-raw-XXXXXX";
    char pa[64] = "", pb[64] = ""; /* the two FIFOs: parent -> child, child -> parent */
    if (!strcmp(t, "pipe")) {
        int a[2], b[2];
        if (pipe(a) || pipe(b)) return 1;
        parent = (end){b[0], a[1], NULL, NULL};
        child = (end){a[0], b[1], NULL, NULL};
    } else if (!strcmp(t, "unix")) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 1;
        parent = (end){sv[0], sv[0], NULL, NULL};
        child = (end){sv[1], sv[1], NULL, NULL};
    } else if (!strcmp(t, "shm")) {
        ring *r = mmap(NULL, 2 * sizeof(ring), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (r == MAP_FAILED) return 1;
        parent = (end){-1, -1, &r[1], &r[0]};
        child = (end){-1, -1, &r[0], &r[1]};
    } else if (!strcmp(t, "tcp")) {
        listener = socket(AF_INET, SOCK_STREAM, 0);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof sa;
        if (bind(listener, (struct sockaddr *)&sa, sizeof sa) || listen(listener, 1) ||
            getsockname(listener, (struct sockaddr *)&sa, &len))
            return 1;
    } else if (!strcmp(t, "fifo")) {
        if (!mkdtemp(dir)) return 1;
        snprintf(pa, sizeof pa, "%s/a", dir);
        snprintf(pb, sizeof pb, "%s/b", dir);
        if (mkfifo(pa, 0600) || mkfifo(pb, 0600)) return 1;
    } else {
        fprintf(stderr, "unknown transport %s\n", t);
        return 2;
    }
    uint8_t *buf = malloc(size ? size : 1);
    memset(buf, 7, size);
    pid_t pid = fork();
    if (pid == 0) {
        if (!strcmp(t, "tcp")) {
            int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
            if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) _exit(1);
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            child = (end){fd, fd, NULL, NULL};
        } else if (!strcmp(t, "fifo")) {
            int r = open(pa, O_RDONLY), w = open(pb, O_WRONLY);
            child = (end){r, w, NULL, NULL};
        }
        for (int i = 0; i < iters + 50; i++) {
            get(&child, buf, size);
            put(&child, buf, size);
        }
        _exit(0);
    }
    if (!strcmp(t, "tcp")) {
        int fd = accept(listener, NULL, NULL), one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        parent = (end){fd, fd, NULL, NULL};
    } else if (!strcmp(t, "fifo")) {
        int w = open(pa, O_WRONLY), r = open(pb, O_RDONLY);
        parent = (end){r, w, NULL, NULL};
    }
    double *rtt = malloc(sizeof(double) * (size_t)iters);
    for (int i = 0; i < iters + 50; i++) {
        double t0 = now_us();
        put(&parent, buf, size);
        get(&parent, buf, size);
        if (i >= 50) rtt[i - 50] = now_us() - t0;
    }
    waitpid(pid, NULL, 0);
    if (!strcmp(t, "fifo")) {
        unlink(pa);
        unlink(pb);
        rmdir(dir);
    }
    qsort(rtt, (size_t)iters, sizeof(double), cmp);
    printf("%.2f\n", rtt[iters / 2]);
    free(rtt);
    free(buf);
    return 0;
}
