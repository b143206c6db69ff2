/* hpcval-labdelay: hold every packet of one NFQUEUE queue for a fixed time, then accept it.
 *
 * A link delay for the lab where the kernel has no netem qdisc. In a node's network
 * namespace an iptables rule sends what the node sends on its lab link to queue QUEUE
 * (NFQUEUE); this program, started in the same namespace, reads each packet's id (its
 * metadata only: no payload is copied, GSO packets are queued whole) and accepts it
 * DELAY_US microseconds after it arrived. One FIFO and one constant delay: packets leave
 * in the order they came.
 *
 * Nothing is dropped here: the kernel queue holds as many packets as this program can
 * (CAP); its socket buffer is raised so that the kernel never finds it full, and if it
 * ever does (ENOBUFS: the kernel dropped a packet) that is counted in the statistics and
 * shown by `hpcval lab status`, as are the kernel's own drop counters. On SIGTERM or
 * SIGINT every packet still held is accepted before the program exits (closing the
 * queue with packets in it would drop them).
 *
 * usage: hpcval-labdelay QUEUE DELAY_US STATS_FILE
 *
 * STATS_FILE is written when the queue is bound ("ready 1") and then at most five times
 * a second while packets pass, as "key value" lines: packets, held_max, late_sum_ns,
 * late_max_ns, overruns, sched.
 *
 * Built by `hpcval lab fabric --delay` (hpcval.lab.delay) with
 *   cc -O2 -o hpcval-labdelay labdelay.c -lnetfilter_queue -lnfnetlink
 * (Debian: apt-get install gcc libnetfilter-queue-dev).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <libnetfilter_queue/libnetfilter_queue.h>

#define CAP 65536u                 /* packets held at most: the kernel queue's length */
#define RCVBUF (32 * 1024 * 1024)  /* socket buffer: CAP metadata messages and more */

static uint32_t ids[CAP];
static uint64_t due[CAP];
static uint32_t head, count;
static uint64_t delay_ns;
static struct nfq_q_handle *qh;

static unsigned long long n_packets, held_max, overruns, late_sum_ns, late_max_ns;
static const char *sched_name = "other";
static const char *stats_path;
static volatile sig_atomic_t stopping;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void write_stats(int ready)
{
    char tmp[4096];
    FILE *f;

    snprintf(tmp, sizeof tmp, "%s.tmp", stats_path);
    f = fopen(tmp, "w");
    if (f == NULL)
        return;
    fprintf(f, "ready %d\ndelay_us %llu\npackets %llu\nheld_max %llu\nlate_sum_ns %llu\n"
            "late_max_ns %llu\noverruns %llu\nsched %s\n", ready,
            (unsigned long long)(delay_ns / 1000), n_packets, held_max, late_sum_ns,
            late_max_ns, overruns, sched_name);
    fclose(f);
    rename(tmp, stats_path);
}

/* Accept every held packet due by `now` (all of them with now = UINT64_MAX): one batch
 * verdict for the newest of them accepts it and every older one still queued. */
static void release(uint64_t now)
{
    uint32_t last = 0;
    int any = 0;
    uint64_t t = now == UINT64_MAX ? now_ns() : now;

    while (count > 0 && due[head] <= now) {
        uint64_t late = t > due[head] ? t - due[head] : 0;
        late_sum_ns += late;
        if (late > late_max_ns)
            late_max_ns = late;
        last = ids[head];
        head = (head + 1) % CAP;
        count--;
        any = 1;
    }
    if (any && nfq_set_verdict_batch(qh, last, NF_ACCEPT) < 0) {
        perror("hpcval-labdelay: verdict");
        exit(3);
    }
}

static int on_packet(struct nfq_q_handle *q, struct nfgenmsg *msg, struct nfq_data *nfa,
                     void *data)
{
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    uint32_t tail;

    (void)q;
    (void)msg;
    (void)data;
    if (ph == NULL)
        return 0;
    if (count == CAP)  /* cannot happen (the kernel queues CAP at most); keep the order */
        release(due[head]);
    tail = (head + count) % CAP;
    ids[tail] = ntohl(ph->packet_id);
    due[tail] = now_ns() + delay_ns;
    count++;
    n_packets++;
    if (count > held_max)
        held_max = count;
    return 0;
}

/* Read every message waiting on the socket; returns 0, or -1 on a fatal error. */
static int drain(struct nfq_handle *h, int fd, char *buf, size_t size)
{
    for (;;) {
        ssize_t n = recv(fd, buf, size, MSG_DONTWAIT);
        if (n >= 0) {
            nfq_handle_packet(h, buf, (int)n);
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        if (errno == EINTR)
            continue;
        if (errno == ENOBUFS) {  /* the kernel found the buffer full: a packet was lost */
            overruns++;
            continue;
        }
        perror("hpcval-labdelay: recv");
        return -1;
    }
}

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

int main(int argc, char **argv)
{
    static char buf[256 * 1024] __attribute__((aligned));
    struct nfq_handle *h;
    struct sigaction sa;
    struct sched_param sp = {.sched_priority = 1};
    uint64_t last_stats = 0;
    unsigned long long written = ~0ull;
    char *end;
    long queue;
    unsigned long long us;
    int fd;

    if (argc != 4) {
        fprintf(stderr, "usage: hpcval-labdelay QUEUE DELAY_US STATS_FILE\n");
        return 2;
    }
    queue = strtol(argv[1], &end, 10);
    if (*end || queue < 0 || queue > 65535) {
        fprintf(stderr, "hpcval-labdelay: QUEUE %s: a number from 0 to 65535\n", argv[1]);
        return 2;
    }
    us = strtoull(argv[2], &end, 10);
    if (*end || us > 10000000ull) {
        fprintf(stderr, "hpcval-labdelay: DELAY_US %s: microseconds, 0 to 10000000\n", argv[2]);
        return 2;
    }
    delay_ns = us * 1000ull;
    stats_path = argv[3];

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;  /* no SA_RESTART: ppoll returns EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* wake-ups on time: no timer slack, and ahead of ordinary work on a loaded machine
       (a NIC's delay does not wait for the CPU) */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0)
        sched_name = "fifo";

    h = nfq_open();
    if (h == NULL) {
        perror("hpcval-labdelay: nfq_open");
        return 3;
    }
    qh = nfq_create_queue(h, (uint16_t)queue, on_packet, NULL);
    if (qh == NULL) {
        perror("hpcval-labdelay: nfq_create_queue (is another program bound to the queue?)");
        return 3;
    }
    if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0 || nfq_set_queue_maxlen(qh, CAP) < 0) {
        perror("hpcval-labdelay: queue settings");
        return 3;
    }
    /* GSO packets whole: this program never reads a payload, so it never needs them split */
    if (nfq_set_queue_flags(qh, NFQA_CFG_F_GSO, NFQA_CFG_F_GSO) < 0) {
        perror("hpcval-labdelay: queue flags");
        return 3;
    }
    fd = nfq_fd(h);
    nfnl_rcvbufsiz(nfq_nfnlh(h), RCVBUF);
    write_stats(1);

    while (!stopping) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        struct timespec ts = {.tv_sec = 1, .tv_nsec = 0};
        uint64_t now = now_ns();

        if (count > 0) {
            uint64_t wait = due[head] > now ? due[head] - now : 0;
            ts.tv_sec = (time_t)(wait / 1000000000ull);
            ts.tv_nsec = (long)(wait % 1000000000ull);
        }
        if (ppoll(&p, 1, &ts, NULL) < 0 && errno != EINTR) {
            perror("hpcval-labdelay: ppoll");
            break;
        }
        if (drain(h, fd, buf, sizeof buf) < 0)
            break;
        now = now_ns();
        release(now);
        if (n_packets != written && now - last_stats >= 200000000ull) {
            write_stats(1);
            written = n_packets;
            last_stats = now;
        }
    }
    /* stopping: take what is still on the socket and let everything go, in order */
    drain(h, fd, buf, sizeof buf);
    release(UINT64_MAX);
    write_stats(0);
    nfq_destroy_queue(qh);
    nfq_close(h);
    return 0;
}
