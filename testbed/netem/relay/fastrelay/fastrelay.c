/* fastrelay: compiled delay/jitter/loss data plane for kernels without sch_netem.
 *
 * Same semantics as testbed/netem/relay/relay.py (see its module doc): each link is two interfaces
 * (a, b) in the current network namespace; every Ethernet frame read from one is held for the
 * one-way delay (+ normal jitter, clamped at 0, never reordered: release = max(previous release,
 * arrival + d)), dropped with independent probability loss_pct/100, then written to the other.
 * One process serves any number of links (--link ... repeated, each in its own namespace if need be)
 * with one epoll loop (epoll_pwait2 sleeps until the next frame is due); each direction keeps its
 * held frames in a byte ring (chunks of one MAP_NORESERVE range, reused last-freed first) in arrival
 * order, so the head is always the next frame due. Frames are read with recvmmsg (frame mode) or
 * recv (GSO mode: PACKET_VNET_HDR super-frames of up to 256 KB, IPv4 BIG TCP included; TCP and UDP
 * super-frames cut into their segments where the link has loss or jitter: loss and delay drawn per
 * segment, see "per-segment loss and jitter" below) straight into the ring and written with sendmmsg. Random streams: splitmix64 seeded from (seed, direction, purpose) — reproducible
 * per seed, but not the same draws as the Python relay.
 *
 * Control: SIGUSR1 re-reads each link's --control JSON file that is new or changed since it was last
 * applied (a missing one is skipped: one process serves several links, the signal is for one)
 * ({"a_to_b": {"delay_ms":..,"jitter_ms":..,"loss_pct":..}, "b_to_a": {...}}); SIGTERM/SIGINT stop
 * the relay, which then writes each link's stats JSON (same fields as the Python relay's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <net/if.h>
#include <pthread.h>
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <linux/if_ether.h>
#include <linux/virtio_net.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif
#define BATCH 64
#define GSO_FRAME_BYTES (256 * 1024)
#define SOCK_BUF_BYTES (256 * 1024 * 1024) /* a scheduling gap of the relay must not overrun it at 10 Gbit/s (200 ms) */
#define WRAP_MARK 0xFFFFFFFFu
#define HDR_BYTES 16
#define CHUNK_MIN (512 * 1024) /* > GSO_FRAME_BYTES + HDR_BYTES: a super-frame fits a chunk */
#define CHUNK_MAX (2 * 1024 * 1024)
/* per-segment loss on GSO super-frames: at most this many segments are drawn one by one (more: the
 * frame is dropped whole with probability 1 - (1 - p)^segments); a frame with holes goes out as one
 * message per run of kept segments, each with its own copy of the headers */
#define MAX_SEGS 512
#define MAX_PIECES (MAX_SEGS / 2 + 1)
#define PIECE_HDR_BYTES 192

typedef struct { double delay_ms, jitter_ms, loss_pct; } imp_t;

typedef struct {
  uint64_t frames_in, bytes_in, frames_out, bytes_out, dropped_loss, dropped_overflow,
      dropped_oversize, tx_errors, rx_errors, kernel_drops, max_queue_frames, queued_at_exit,
      gso_split, gso_unsplit; /* super-frames drawn per segment / drawn whole (a kind this relay cannot cut) */
} dstats_t;

/* each packet's scheduled one-way delay (release - arrival; a super-frame's segments each count once) */
#define DELAY_BIN_NS 100000ull /* 0.1 ms */
#define DELAY_BINS 8192
typedef struct {
  int fd_in, fd_out;
  uint32_t *delay_hist; /* DELAY_BINS bins, the last one open-ended; allocated at the first packet */
  uint64_t delay_pkts;
  imp_t imp;
  uint64_t loss_rng, jitter_rng;
  uint64_t last_release;
  /* held frames: a queue of fixed-size chunks of one address range (see "ring" below) */
  uint8_t *ring;
  size_t size, chunk, nchunks;
  uint32_t *q;             /* chunk indices in arrival order (circular, nchunks slots) */
  size_t qhead, qcount;    /* q[qhead] holds the head entry; q[(qhead + qcount - 1) % nchunks] the tail */
  size_t head, tail;       /* byte offsets in the head and the tail chunk */
  uint32_t *free_chunks;   /* chunks used before and free now: reused last-freed first (memory already in use) */
  size_t nfree, fresh;     /* chunks [fresh, nchunks) never touched yet */
  uint64_t queued;
  dstats_t st;
  size_t frame_bytes;
  int gso;
  uint64_t head_mask[MAX_SEGS / 64]; /* kept segments of the head entry, once drawn */
  int head_mask_valid;     /* the head entry was partly released: its draws and progress below */
  uint32_t head_seg_done;  /* segments of the head entry already sent or dropped */
} dir_t;

typedef struct {
  char if_a[IFNAMSIZ], if_b[IFNAMSIZ];
  int fd_a, fd_b;
  uint64_t seed;
  int gso;
  const char *stats_path, *control_path, *netns;
  struct timespec control_mtime; /* of the control file last applied */
  uint64_t control_ino;
  dir_t d[2];
} link_t;

static volatile sig_atomic_t g_stop = 0, g_reload = 0;
static void on_stop(int s) { (void)s; g_stop = 1; }
static void on_usr1(int s) { (void)s; g_reload = 1; }

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double unif(uint64_t *s) { return (splitmix(s) >> 11) * (1.0 / 9007199254740992.0); }
static double gauss(uint64_t *s) {
  double u1 = unif(s), u2 = unif(s);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
static uint64_t seed_of(uint64_t seed, int dir, int purpose) {
  uint64_t s = seed * 1000003ull + (uint64_t)dir * 7919ull + (uint64_t)purpose * 104729ull + 12345;
  splitmix(&s);
  return s;
}

static void die(const char *msg) { fprintf(stderr, "fastrelay: %s\n", msg); exit(1); }
static void die_errno(const char *what, const char *arg) {
  fprintf(stderr, "fastrelay: %s %s: %s\n", what, arg, strerror(errno));
  exit(1);
}

static int open_sock(const char *ifname, int vnet) {
  int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) die_errno("socket for", ifname);
  int one = 1, buf = SOCK_BUF_BYTES;
  setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
  if (vnet && setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) < 0) die_errno("PACKET_VNET_HDR on", ifname);
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) < 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) < 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  struct sockaddr_ll sll = {0};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = (int)if_nametoindex(ifname);
  if (!sll.sll_ifindex) die_errno("no interface", ifname);
  if (bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0) die_errno("bind to", ifname);
  return fd;
}

static int if_mtu(const char *ifname) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr = {0};
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
  int mtu = 1500;
  if (s >= 0 && ioctl(s, SIOCGIFMTU, &ifr) == 0) mtu = ifr.ifr_mtu;
  if (s >= 0) close(s);
  return mtu;
}

/* ---- ring: entries [u64 release][u32 len][u32 nrel][data, padded to 8][nrel x u64: each segment's
 * release, a super-frame jittered per segment; the entry's release is that of its next segment] in arrival order, in a
 * queue of chunks carved from one MAP_NORESERVE range. A chunk that the head has left goes to a
 * free stack and is the next one the tail takes, so the memory a direction touches stays about the
 * data it holds (a 10 Gbit/s x 25 ms link: ~32 MB) however large the range: touching fresh pages is
 * slow (zeroing; in a VM whose host reclaims freed memory, far slower), reused ones are not. An
 * entry never spans chunks: the tail marks a chunk's unused end (WRAP_MARK) and moves on. ---- */
static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }
static uint8_t *chunk_at(dir_t *d, size_t qi) { return d->ring + (size_t)d->q[qi % d->nchunks] * d->chunk; }

static int take_chunk(dir_t *d) {
  uint32_t c;
  if (d->qcount == d->nchunks) return -1;
  if (d->nfree) c = d->free_chunks[--d->nfree];
  else if (d->fresh < d->nchunks) c = (uint32_t)d->fresh++;
  else return -1;
  d->q[(d->qhead + d->qcount) % d->nchunks] = c;
  d->qcount++;
  d->tail = 0;
  return 0;
}
static void drop_head_chunk(dir_t *d) {
  d->free_chunks[d->nfree++] = d->q[d->qhead];
  d->qhead = (d->qhead + 1) % d->nchunks;
  d->qcount--;
  d->head = 0;
}

/* room for `need` bytes (one entry header included) at the tail; NULL when every chunk is in use */
static uint8_t *ring_reserve(dir_t *d, size_t need) {
  need += HDR_BYTES;
  if (need > d->chunk) return NULL;
  if (d->queued == 0) { /* empty: keep one chunk, start it over */
    while (d->qcount > 1) drop_head_chunk(d);
    d->head = d->tail = 0;
  }
  if (d->qcount == 0 && take_chunk(d) < 0) return NULL;
  if (d->chunk - d->tail < need) {
    size_t tail = d->tail, qcount = d->qcount;
    if (take_chunk(d) < 0) return NULL;
    uint8_t *old = chunk_at(d, d->qhead + qcount - 1);
    if (d->chunk - tail >= HDR_BYTES) *(uint32_t *)(old + tail + 8) = WRAP_MARK;
  }
  return chunk_at(d, d->qhead + d->qcount - 1) + d->tail;
}

static size_t entry_bytes(const uint8_t *e) {
  return HDR_BYTES + pad8(*(const uint32_t *)(e + 8)) + 8 * (size_t)*(const uint32_t *)(e + 12);
}
static void ring_push(dir_t *d, uint64_t release, uint32_t len, uint32_t nrel) {
  uint8_t *p = chunk_at(d, d->qhead + d->qcount - 1) + d->tail;
  *(uint64_t *)p = release;
  *(uint32_t *)(p + 8) = len;
  *(uint32_t *)(p + 12) = nrel;
  d->tail += entry_bytes(p);
  d->queued++;
  if (d->queued > d->st.max_queue_frames) d->st.max_queue_frames = d->queued;
}

/* a read cursor over the held entries (release_due gathers a batch before it knows how many go) */
typedef struct { size_t qi, off; uint64_t left; } cursor_t;
static uint8_t *cursor_entry(dir_t *d, cursor_t *c) {
  if (!c->left) return NULL;
  uint8_t *base = chunk_at(d, c->qi);
  if (d->chunk - c->off < HDR_BYTES || *(uint32_t *)(base + c->off + 8) == WRAP_MARK) {
    c->qi++;
    c->off = 0;
    base = chunk_at(d, c->qi);
  }
  return base + c->off;
}
static void cursor_next(cursor_t *c, const uint8_t *e) {
  c->off += entry_bytes(e);
  c->left--;
}

/* head entry (moving past a chunk's end, which frees that chunk); NULL when empty */
static uint8_t *ring_head(dir_t *d) {
  if (!d->queued) return NULL;
  uint8_t *base = chunk_at(d, d->qhead);
  if (d->chunk - d->head < HDR_BYTES || *(uint32_t *)(base + d->head + 8) == WRAP_MARK) {
    drop_head_chunk(d);
    base = chunk_at(d, d->qhead);
  }
  return base + d->head;
}
static void ring_pop(dir_t *d) {
  d->head += entry_bytes(chunk_at(d, d->qhead) + d->head);
  d->queued--;
}

/* a frame's delay (and loss, drawn for `segs` segments at once: 0 = none now, its segments are drawn
 * one by one at release; 1 = the frame; n = a super-frame that cannot be split, dropped whole with
 * probability 1 - (1 - p)^n) */
/* one delay draw: arrival + delay + N(0, jitter) clamped at 0, never before the previous release */
static uint64_t next_release(dir_t *d, uint64_t arrival) {
  double delay = d->imp.delay_ms * 1e6;
  if (d->imp.jitter_ms > 0) {
    delay += gauss(&d->jitter_rng) * d->imp.jitter_ms * 1e6;
    if (delay < 0) delay = 0;
  }
  uint64_t r = arrival + (uint64_t)llround(delay);
  if (r < d->last_release) r = d->last_release;
  d->last_release = r;
  return r;
}

static void note_delay(dir_t *d, uint64_t delay_ns, uint32_t pkts) {
  if (!d->delay_hist && !(d->delay_hist = calloc(DELAY_BINS, sizeof(uint32_t)))) return;
  uint64_t b = delay_ns / DELAY_BIN_NS;
  d->delay_hist[b < DELAY_BINS ? b : DELAY_BINS - 1] += pkts;
  d->delay_pkts += pkts;
}

static int admit(dir_t *d, uint64_t arrival, uint64_t *release, uint32_t segs) {
  if (segs == 1 && d->imp.loss_pct > 0 && unif(&d->loss_rng) * 100.0 < d->imp.loss_pct) return 0;
  if (segs > 1 && d->imp.loss_pct > 0 && unif(&d->loss_rng) >= pow(1.0 - d->imp.loss_pct / 100.0, segs)) return 0;
  *release = next_release(d, arrival);
  return 1;
}

/* ---- per-segment loss and jitter on GSO super-frames (GSO mode: [virtio_net_hdr][Ethernet][IP][L4][payload]).
 * A TCP (IPv4 or IPv6) or UDP (UDP_L4 GSO, IPv4 or IPv6) super-frame with a partial checksum is cut
 * where the kernel would cut it (gso_size bytes of payload each); each segment is kept or dropped on
 * its own draw and, with jitter, gets its own delay draw. Every run of kept segments due together goes
 * out as one message: a fresh copy of the headers (IPv4 length, id and checksum / IPv6 payload length;
 * TCP sequence number, CWR only on the first segment, FIN/PSH only on the last / UDP length; the
 * pseudo-header sum for the new length) followed by that run's payload, in place in the ring (no copy
 * of the payload). IPv6 with extension headers and VLAN-tagged frames are not split (whole-frame
 * draws, counted in the stats as gso_unsplit). ---- */
#ifndef VIRTIO_NET_HDR_GSO_UDP_L4
#define VIRTIO_NET_HDR_GSO_UDP_L4 5
#endif
typedef struct { uint32_t l3, ihl, thl, p0, paylen, mss, nseg, v6, proto; } tcpseg_t;
static uint32_t get16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static void put16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static uint32_t get32(const uint8_t *p) { return get16(p) << 16 | get16(p + 2); }
static void put32(uint8_t *p, uint32_t v) { put16(p, v >> 16); put16(p + 2, v & 0xffff); }
static uint32_t fold(uint32_t s) { while (s >> 16) s = (s & 0xffff) + (s >> 16); return s; }

/* 1: a super-frame this relay can cut into segments (t filled in); 0: not one */
static int gso_split(const uint8_t *f, uint32_t len, tcpseg_t *t) {
  struct virtio_net_hdr vh;
  const uint32_t vl = sizeof vh, l3 = vl + 14;
  if (len < l3 + 48) return 0;
  memcpy(&vh, f, vl);
  uint32_t type = vh.gso_type & ~VIRTIO_NET_HDR_GSO_ECN, proto, v6, ihl, thl;
  if (type == VIRTIO_NET_HDR_GSO_TCPV4) { proto = IPPROTO_TCP; v6 = 0; }
  else if (type == VIRTIO_NET_HDR_GSO_TCPV6) { proto = IPPROTO_TCP; v6 = 1; }
  else if (type == VIRTIO_NET_HDR_GSO_UDP_L4) { proto = IPPROTO_UDP; v6 = get16(f + vl + 12) == ETH_P_IPV6; }
  else return 0;
  if (!(vh.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) || !vh.gso_size) return 0;
  if (!v6) {
    if (get16(f + vl + 12) != ETH_P_IP || (f[l3] >> 4) != 4 || f[l3 + 9] != proto) return 0;
    ihl = (f[l3] & 0xfu) * 4;
    if (ihl < 20) return 0;
  } else {
    if (get16(f + vl + 12) != ETH_P_IPV6 || (f[l3] >> 4) != 6 || f[l3 + 6] != proto) return 0;
    ihl = 40;
  }
  if (len < l3 + ihl + 20) return 0;
  thl = proto == IPPROTO_TCP ? (uint32_t)(f[l3 + ihl + 12] >> 4) * 4 : 8;
  if (thl < 8 || len <= l3 + ihl + thl || l3 + ihl + thl > PIECE_HDR_BYTES) return 0;
  if (vh.csum_start != 14 + ihl || vh.csum_offset != (proto == IPPROTO_TCP ? 16 : 6)) return 0;
  *t = (tcpseg_t){l3, ihl, thl, l3 + ihl + thl, len - (l3 + ihl + thl), vh.gso_size, 0, v6, proto};
  t->nseg = (t->paylen + t->mss - 1) / t->mss;
  return t->nseg > 1;
}

/* the headers of the run of segments [i, j) of super-frame f into h */
static void piece_header(uint8_t *h, const uint8_t *f, const tcpseg_t *t, uint32_t i, uint32_t j) {
  memcpy(h, f, t->p0);
  uint32_t off = i * t->mss, end = j * t->mss < t->paylen ? j * t->mss : t->paylen, plen = end - off;
  if (j - i == 1) { /* one segment: an ordinary frame */
    struct virtio_net_hdr vh;
    memcpy(&vh, h, sizeof vh);
    vh.gso_type = VIRTIO_NET_HDR_GSO_NONE;
    vh.gso_size = 0;
    memcpy(h, &vh, sizeof vh);
  }
  uint8_t *ip = h + t->l3, *l4 = ip + t->ihl;
  uint32_t l4_len = t->thl + plen, sum = 0;
  if (!t->v6) {
    uint32_t ip_len = t->ihl + l4_len;
    put16(ip + 2, ip_len > 0xffff ? 0 : ip_len); /* 0: an IPv4 BIG TCP super-frame */
    put16(ip + 4, (get16(ip + 4) + i) & 0xffff);
    put16(ip + 10, 0);
    for (uint32_t k = 0; k < t->ihl; k += 2) sum += get16(ip + k);
    put16(ip + 10, ~fold(sum) & 0xffff);
    sum = 0;
    for (uint32_t k = 12; k < 20; k += 2) sum += get16(ip + k);
  } else {
    put16(ip + 4, l4_len > 0xffff ? 0 : l4_len);
    for (uint32_t k = 8; k < 40; k += 2) sum += get16(ip + k);
  }
  if (t->proto == IPPROTO_TCP) {
    put32(l4 + 4, get32(l4 + 4) + off);
    if (i > 0) l4[13] &= (uint8_t)~0x80;          /* CWR */
    if (j < t->nseg) l4[13] &= (uint8_t)~0x09;    /* FIN, PSH */
  } else put16(l4 + 4, l4_len > 0xffff ? 0 : l4_len);
  sum += t->proto + (l4_len >> 16) + (l4_len & 0xffff);
  /* partial checksum: the pseudo-header sum, completed by the kernel */
  put16(l4 + (t->proto == IPPROTO_TCP ? 16 : 6), fold(sum));
}

static void draw_segments(dir_t *d, uint32_t nseg, uint64_t *mask) {
  memset(mask, 0, sizeof(uint64_t) * (MAX_SEGS / 64));
  for (uint32_t k = 0; k < nseg; k++)
    if (!(unif(&d->loss_rng) * 100.0 < d->imp.loss_pct)) mask[k / 64] |= 1ull << (k % 64);
}
static int seg_kept(const uint64_t *mask, uint32_t k) { return (int)(mask[k / 64] >> (k % 64) & 1); }

/* segments of a GSO frame (for a whole-frame draw); 1 for an ordinary frame */
static uint32_t frame_segs(const uint8_t *f, uint32_t len) {
  struct virtio_net_hdr vh;
  if (len < sizeof vh) return 1;
  memcpy(&vh, f, sizeof vh);
  if (vh.gso_type == VIRTIO_NET_HDR_GSO_NONE || !vh.gso_size || len <= sizeof vh + vh.hdr_len) return 1;
  uint32_t pay = len - (uint32_t)sizeof vh - vh.hdr_len;
  return (pay + vh.gso_size - 1) / vh.gso_size;
}

/* how a frame's loss is drawn at arrival (see admit) */
static uint32_t loss_segs(dir_t *d, const uint8_t *f, uint32_t len) {
  if (!d->gso || d->imp.loss_pct <= 0) return 1;
  tcpseg_t t;
  if (gso_split(f, len, &t) && t.nseg <= MAX_SEGS) return 0; /* drawn per segment at release */
  uint32_t n = frame_segs(f, len);
  if (n > 1) d->st.gso_unsplit++;
  return n;
}

static uint8_t scratch[GSO_FRAME_BYTES];
static uint64_t g_rel[MAX_SEGS];

static void drain(dir_t *d) {
  for (int rounds = 0; rounds < 16; rounds++) {
    size_t fb = d->frame_bytes;
    int batch = fb >= GSO_FRAME_BYTES ? 1 : BATCH;
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    size_t stride = HDR_BYTES + pad8(fb);
    uint8_t *base = ring_reserve(d, stride * (size_t)batch + (d->gso ? 8 * MAX_SEGS : 0));
    int overflow = base == NULL;
    if (overflow) { base = scratch; batch = 1; }
    memset(msgs, 0, sizeof(struct mmsghdr) * (size_t)batch);
    for (int i = 0; i < batch; i++) {
      iov[i].iov_base = overflow ? scratch : base + (size_t)i * stride + HDR_BYTES;
      iov[i].iov_len = overflow ? sizeof scratch : fb;
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int n = recvmmsg(d->fd_in, msgs, (unsigned)batch, MSG_DONTWAIT | MSG_TRUNC, NULL);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) d->st.rx_errors++;
      return;
    }
    uint64_t t = now_ns();
    for (int i = 0; i < n; i++) {
      uint32_t len = msgs[i].msg_len;
      d->st.frames_in++;
      d->st.bytes_in += len;
      if (overflow) { d->st.dropped_overflow++; continue; }
      if (len >= fb) { d->st.dropped_oversize++; continue; }
      uint64_t rel;
      uint8_t *src = (uint8_t *)iov[i].iov_base;
      uint32_t segs = loss_segs(d, src, len), nrel = 0;
      tcpseg_t ts;
      if (d->gso && d->imp.jitter_ms > 0 && gso_split(src, len, &ts)) {
        if (ts.nseg <= MAX_SEGS) nrel = ts.nseg; /* each segment its own delay draw, in order */
        else if (d->imp.loss_pct <= 0) d->st.gso_unsplit++;
      }
      if (nrel) {
        for (uint32_t k = 0; k < nrel; k++) {
          g_rel[k] = next_release(d, t);
          note_delay(d, g_rel[k] - t, 1);
        }
        rel = g_rel[0];
      } else if (!admit(d, t, &rel, segs)) { d->st.dropped_loss += segs; continue; }
      else note_delay(d, rel - t, d->gso ? frame_segs(src, len) : 1);
      uint8_t *dst = chunk_at(d, d->qhead + d->qcount - 1) + d->tail + HDR_BYTES;
      if (dst != src) memmove(dst, src, len); /* compact: previous entries were shorter than the stride */
      if (nrel) memcpy(dst + pad8(len), g_rel, 8 * (size_t)nrel);
      if (segs == 0 || nrel) d->st.gso_split++;
      ring_push(d, rel, len, nrel);
    }
    if (n < batch) return;
  }
}

/* send every due frame; returns the next due time (0 if empty) */
typedef struct { int first, nmsgs, split; uint32_t start, upto, nseg; uint64_t *rel; } gathered_t;
static struct mmsghdr g_msgs[BATCH + MAX_PIECES];
static struct iovec g_iov[2 * (BATCH + MAX_PIECES)];
static uint8_t g_hdr[BATCH + MAX_PIECES][PIECE_HDR_BYTES];
static uint32_t g_seg_end[BATCH + MAX_PIECES]; /* a split message: the segment after its run */
static uint64_t g_masks[BATCH][MAX_SEGS / 64];

static void pop_head(dir_t *d) {
  ring_head(d);
  ring_pop(d);
  d->head_mask_valid = 0;
  d->head_seg_done = 0;
}

static uint32_t lost_in(const uint64_t *mask, uint32_t i, uint32_t j) {
  uint32_t n = 0;
  for (; i < j; i++) n += !seg_kept(mask, i);
  return n;
}

static void count_sent(dir_t *d, int m0, int m1) {
  for (int m = m0; m < m1; m++) {
    d->st.frames_out++;
    d->st.bytes_out += g_iov[2 * m].iov_len + (g_msgs[m].msg_hdr.msg_iovlen > 1 ? g_iov[2 * m + 1].iov_len : 0);
  }
}

/* the head entry (gathered as g, its draws in mask) handled up to segment `done`: the rest waits */
static void head_progress(dir_t *d, const gathered_t *g, const uint64_t *mask, uint32_t done) {
  d->st.dropped_loss += lost_in(mask, g->start, done);
  if (mask != d->head_mask) memcpy(d->head_mask, mask, sizeof d->head_mask);
  d->head_mask_valid = 1;
  d->head_seg_done = done;
  if (g->rel && done < g->nseg) *(uint64_t *)ring_head(d) = g->rel[done]; /* due with its next segment */
}

static uint64_t release_due(dir_t *d, uint64_t t) {
  for (;;) {
    gathered_t ents[BATCH];
    int n = 0, ne = 0;
    uint8_t *e;
    /* gather due entries without popping: a super-frame with lost segments, or whose segments are due at
     * different times (jitter per segment), goes out as one message per run of kept segments due now */
    cursor_t c = {d->qhead, d->head, d->queued};
    while (n < BATCH && (e = cursor_entry(d, &c)) != NULL && *(uint64_t *)e <= t) {
      uint32_t len = *(uint32_t *)(e + 8), nrel = *(uint32_t *)(e + 12);
      uint8_t *f = e + HDR_BYTES;
      tcpseg_t ts;
      gathered_t *g = &ents[ne];
      *g = (gathered_t){n, 0, 0, 0, 0, 0, NULL};
      if (d->gso && (d->imp.loss_pct > 0 || nrel || (ne == 0 && d->head_mask_valid)) && gso_split(f, len, &ts) &&
          ts.nseg <= MAX_SEGS) {
        uint64_t *mask = g_masks[ne];
        uint32_t start = 0;
        if (ne == 0 && d->head_mask_valid) { /* the head, partly sent before: same draws, from where it stopped */
          memcpy(mask, d->head_mask, sizeof d->head_mask);
          start = d->head_seg_done;
        } else if (d->imp.loss_pct > 0) draw_segments(d, ts.nseg, mask);
        else memset(mask, 0xff, sizeof d->head_mask);
        uint64_t *rel = nrel == ts.nseg ? (uint64_t *)(f + pad8(len)) : NULL;
        uint32_t upto = ts.nseg;
        if (rel) for (upto = start + 1; upto < ts.nseg && rel[upto] <= t; upto++) {}
        *g = (gathered_t){n, 0, 1, start, upto, ts.nseg, rel};
        if (start == 0 && upto == ts.nseg && !lost_in(mask, 0, ts.nseg)) { g->split = 0; goto whole; }
        for (uint32_t i = start; i < upto;) {
          if (!seg_kept(mask, i)) { i++; continue; }
          uint32_t j = i;
          while (j < upto && seg_kept(mask, j)) j++;
          piece_header(g_hdr[n], f, &ts, i, j);
          uint32_t end = j * ts.mss < ts.paylen ? j * ts.mss : ts.paylen;
          g_iov[2 * n] = (struct iovec){g_hdr[n], ts.p0};
          g_iov[2 * n + 1] = (struct iovec){f + ts.p0 + i * ts.mss, end - i * ts.mss};
          memset(&g_msgs[n], 0, sizeof g_msgs[n]);
          g_msgs[n].msg_hdr.msg_iov = &g_iov[2 * n];
          g_msgs[n].msg_hdr.msg_iovlen = 2;
          g_seg_end[n] = j;
          n++;
          g->nmsgs++;
          i = j;
        }
        ne++;
        cursor_next(&c, e);
        if (upto < ts.nseg) break; /* its other segments are due later, and so is every entry after it */
        continue;
      }
    whole:
      g_iov[2 * n] = (struct iovec){f, len};
      memset(&g_msgs[n], 0, sizeof g_msgs[n]);
      g_msgs[n].msg_hdr.msg_iov = &g_iov[2 * n];
      g_msgs[n].msg_hdr.msg_iovlen = 1;
      n++;
      g->nmsgs = 1;
      ne++;
      cursor_next(&c, e);
    }
    if (ne == 0) {
      e = ring_head(d);
      return e ? *(uint64_t *)e : 0;
    }
    int sent = n ? sendmmsg(d->fd_out, g_msgs, (unsigned)n, MSG_DONTWAIT) : 0;
    if (sent < 0) {
      if (errno == ENOBUFS || errno == EAGAIN || errno == EWOULDBLOCK) sent = 0;
      else { /* EMSGSIZE, ENETDOWN...: drop the first frame, keep going */
        d->st.tx_errors++;
        pop_head(d);
        continue;
      }
    }
    int k = 0;
    for (; k < ne && ents[k].first + ents[k].nmsgs <= sent; k++) {
      gathered_t *g = &ents[k];
      count_sent(d, g->first, g->first + g->nmsgs);
      if (g->split && g->upto < g->nseg) { /* all due now sent; the rest of it is due later */
        head_progress(d, g, g_masks[k], g->upto);
        break;
      }
      if (g->split) d->st.dropped_loss += lost_in(g_masks[k], g->start, g->nseg);
      pop_head(d);
    }
    if (k == ne || (k < ne && ents[k].first + ents[k].nmsgs <= sent)) continue; /* more may be due */
    /* transmit queue full: the first entry not wholly sent is the head now; keep its draws */
    gathered_t *g = &ents[k];
    int done = sent > g->first ? sent - g->first : 0;
    count_sent(d, g->first, g->first + done);
    if (g->split) head_progress(d, g, g_masks[k], done ? g_seg_end[g->first + done - 1] : g->start);
    return t + 200000;
  }
}

/* ---- control file: tiny reader for {"a_to_b": {...}, "b_to_a": {...}} ---- */
static int json_num(const char *obj, const char *end, const char *key, double *out) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\"", key);
  const char *p = strstr(obj, pat);
  if (!p || p >= end) return -1;
  p = strchr(p + strlen(pat), ':');
  if (!p || p >= end) return -1;
  char *q;
  double v = strtod(p + 1, &q);
  if (q == p + 1 || !isfinite(v) || v < 0) return -1;
  *out = v;
  return 0;
}
static int read_control(const char *path, imp_t out[2], char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) { snprintf(err, errlen, "%s", strerror(errno)); return -1; }
  char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *tags[2] = {"\"a_to_b\"", "\"b_to_a\""};
  for (int i = 0; i < 2; i++) {
    const char *p = strstr(buf, tags[i]);
    if (!p) { snprintf(err, errlen, "no %s", tags[i]); return -1; }
    const char *o = strchr(p, '{'), *c = o ? strchr(o, '}') : NULL;
    if (!o || !c) { snprintf(err, errlen, "%s is not an object", tags[i]); return -1; }
    imp_t im = {0, 0, 0};
    if (json_num(o, c, "delay_ms", &im.delay_ms) || json_num(o, c, "jitter_ms", &im.jitter_ms) ||
        json_num(o, c, "loss_pct", &im.loss_pct) || im.loss_pct > 100) {
      snprintf(err, errlen, "%s: delay_ms, jitter_ms, loss_pct must be numbers >= 0", tags[i]);
      return -1;
    }
    out[i] = im;
  }
  return 0;
}

/* the delay histogram's quantile q in ms (bin midpoints) */
static double delay_quantile(const dir_t *d, double q) {
  uint64_t want = (uint64_t)ceil(q * (double)d->delay_pkts), acc = 0;
  if (want < 1) want = 1;
  for (int b = 0; b < DELAY_BINS; b++)
    if ((acc += d->delay_hist[b]) >= want) return (b + 0.5) * DELAY_BIN_NS / 1e6;
  return DELAY_BINS * DELAY_BIN_NS / 1e6;
}
static void write_delays(FILE *f, const char *name, const dir_t *d, int last) {
  fprintf(f, "    \"%s\": {\"packets\": %llu", name, (unsigned long long)d->delay_pkts);
  if (d->delay_pkts && d->delay_hist) {
    double sum = 0, sq = 0;
    for (int b = 0; b < DELAY_BINS; b++) {
      double v = (b + 0.5) * DELAY_BIN_NS / 1e6;
      sum += v * d->delay_hist[b];
      sq += v * v * d->delay_hist[b];
    }
    double mean = sum / (double)d->delay_pkts, var = sq / (double)d->delay_pkts - mean * mean;
    fprintf(f, ", \"mean\": %.3f, \"std\": %.3f", mean, var > 0 ? sqrt(var) : 0.0);
    const double qs[] = {0.01, 0.05, 0.5, 0.95, 0.99};
    const char *qn[] = {"p1", "p5", "p50", "p95", "p99"};
    for (int i = 0; i < 5; i++) fprintf(f, ", \"%s\": %.2f", qn[i], delay_quantile(d, qs[i]));
  }
  fprintf(f, "}%s\n", last ? "" : ",");
}

static void write_dstats(FILE *f, const char *name, const dstats_t *s, int last) {
  fprintf(f, "  \"%s\": {\"frames_in\": %llu, \"bytes_in\": %llu, \"frames_out\": %llu, \"bytes_out\": %llu, "
             "\"dropped_loss\": %llu, \"dropped_overflow\": %llu, \"dropped_oversize\": %llu, \"tx_errors\": %llu, "
             "\"rx_errors\": %llu, \"kernel_drops\": %llu, \"max_queue_frames\": %llu, \"queued_at_exit\": %llu, "
             "\"gso_split\": %llu, \"gso_unsplit\": %llu}%s\n",
          name, (unsigned long long)s->frames_in, (unsigned long long)s->bytes_in, (unsigned long long)s->frames_out,
          (unsigned long long)s->bytes_out, (unsigned long long)s->dropped_loss, (unsigned long long)s->dropped_overflow,
          (unsigned long long)s->dropped_oversize, (unsigned long long)s->tx_errors, (unsigned long long)s->rx_errors,
          (unsigned long long)s->kernel_drops, (unsigned long long)s->max_queue_frames,
          (unsigned long long)s->queued_at_exit, (unsigned long long)s->gso_split,
          (unsigned long long)s->gso_unsplit, last ? "" : ",");
}

/* --split-test KEPT: cut the super-frame on stdin ([virtio_net_hdr][Ethernet]...) as the relay would
 * with the segments marked '1' in KEPT kept and write each message as [u32 length][headers][payload]
 * to stdout (exit 3: a frame this relay does not cut); for tests without privileges */
static int split_test(const char *kept) {
  static uint8_t f[GSO_FRAME_BYTES];
  size_t len = fread(f, 1, sizeof f, stdin);
  tcpseg_t t;
  if (!gso_split(f, (uint32_t)len, &t) || t.nseg > MAX_SEGS) return 3;
  uint64_t mask[MAX_SEGS / 64] = {0};
  for (uint32_t k = 0; k < t.nseg && kept[k]; k++)
    if (kept[k] == '1') mask[k / 64] |= 1ull << (k % 64);
  static uint8_t h[PIECE_HDR_BYTES];
  for (uint32_t i = 0; i < t.nseg;) {
    if (!seg_kept(mask, i)) { i++; continue; }
    uint32_t j = i;
    while (j < t.nseg && seg_kept(mask, j)) j++;
    piece_header(h, f, &t, i, j);
    uint32_t end = j * t.mss < t.paylen ? j * t.mss : t.paylen, n = t.p0 + end - i * t.mss;
    fwrite(&n, 4, 1, stdout);
    fwrite(h, 1, t.p0, stdout);
    fwrite(f + t.p0 + i * t.mss, 1, end - i * t.mss, stdout);
    i = j;
  }
  return 0;
}

static int g_rt_prio = 0; /* the SCHED_FIFO priority in effect (0: normal scheduling) */

static void write_stats(link_t *l, double dur_s, double cpu_s) {
  if (!l->stats_path) return;
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp%d", l->stats_path, (int)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  fprintf(f, "{\n  \"if_a\": \"%s\",\n  \"if_b\": \"%s\",\n  \"mode\": \"%s\",\n  \"implementation\": \"fastrelay\",\n"
             "  \"seed\": %llu,\n", l->if_a, l->if_b, l->gso ? "gso" : "frame", (unsigned long long)l->seed);
  fprintf(f, "  \"impairments\": {\"a_to_b\": {\"delay_ms\": %.17g, \"jitter_ms\": %.17g, \"loss_pct\": %.17g}, "
             "\"b_to_a\": {\"delay_ms\": %.17g, \"jitter_ms\": %.17g, \"loss_pct\": %.17g}},\n",
          l->d[0].imp.delay_ms, l->d[0].imp.jitter_ms, l->d[0].imp.loss_pct, l->d[1].imp.delay_ms,
          l->d[1].imp.jitter_ms, l->d[1].imp.loss_pct);
  write_dstats(f, "a_to_b", &l->d[0].st, 0);
  write_dstats(f, "b_to_a", &l->d[1].st, 0);
  /* scheduled one-way delay of each packet, ms (0.1 ms bins; a super-frame's segments each count once) */
  fprintf(f, "  \"delay_ms\": {\n");
  write_delays(f, "a_to_b", &l->d[0], 0);
  write_delays(f, "b_to_a", &l->d[1], 1);
  fprintf(f, "  },\n");
  fprintf(f, "  \"duration_s\": %.6f,\n  \"cpu_s\": %.6f,\n  \"rt_prio\": %d\n}\n", dur_s, cpu_s, g_rt_prio);
  fclose(f);
  rename(tmp, l->stats_path);
}

static uint64_t kernel_drops(int fd) {
  struct tpacket_stats ts;
  socklen_t len = sizeof ts;
  if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &ts, &len) < 0) return 0;
  return ts.tp_drops;
}

static void usage(void) {
  fprintf(stderr,
          "usage: fastrelay [--netns NS] [--ready-file F] [--ring-mb N] [--rt-prio P] --link IF_A,IF_B,DELAY_AB_MS,JITTER_AB_MS,"
          "LOSS_AB_PCT,DELAY_BA_MS,JITTER_BA_MS,LOSS_BA_PCT,SEED,GSO(0|1)[,STATS[,CONTROL[,NETNS]]] [--link ...]\n"
          "  a link's NETNS (name or /proc/PID/ns/net path): its interfaces' namespace, if not the relay's own\n"
          "  --rt-prio P (1-99): run under SCHED_FIFO at priority P (0, the default: normal scheduling)\n");
}

static int parse_link(char *spec, link_t *l) {
  char *f[13] = {0};
  int n = 0;
  char *save = NULL;
  /* split on commas, keeping empty fields */
  char *p = spec;
  while (n < 13) {
    f[n++] = p;
    char *c = strchr(p, ',');
    if (!c) break;
    *c = 0;
    p = c + 1;
  }
  (void)save;
  if (n < 10) return -1;
  if (strlen(f[0]) >= IFNAMSIZ || strlen(f[1]) >= IFNAMSIZ || !*f[0] || !*f[1]) return -1;
  strcpy(l->if_a, f[0]);
  strcpy(l->if_b, f[1]);
  double v[6];
  for (int i = 0; i < 6; i++) {
    char *e;
    v[i] = strtod(f[2 + i], &e);
    if (e == f[2 + i] || *e || !isfinite(v[i]) || v[i] < 0) return -1;
  }
  if (v[2] > 100 || v[5] > 100) return -1;
  l->d[0].imp = (imp_t){v[0], v[1], v[2]};
  l->d[1].imp = (imp_t){v[3], v[4], v[5]};
  char *e;
  l->seed = strtoull(f[8], &e, 10);
  if (e == f[8] || *e) return -1;
  if (strcmp(f[9], "0") && strcmp(f[9], "1")) return -1;
  l->gso = f[9][0] == '1';
  l->stats_path = n > 10 && *f[10] ? f[10] : NULL;
  l->control_path = n > 11 && *f[11] ? f[11] : NULL;
  l->netns = n > 12 && *f[12] ? f[12] : NULL;
  return 0;
}

static void enter_netns(const char *ns) {
  char path[4096];
  snprintf(path, sizeof path, ns[0] == '/' ? "%s" : "/var/run/netns/%s", ns);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) die_errno("cannot enter network namespace", ns);
  close(fd);
}

/* Closing an AF_PACKET socket waits for an RCU grace period (packet_release: synchronize_net), a few
 * ms each: a process serving 50 links would spend a second or more closing its 100 sockets one after
 * the other at exit. Threads closing them at the same time share the grace periods. */
#define CLOSE_THREADS 32
typedef struct { int *fds; int n; } close_job_t;
static void *close_fds(void *arg) {
  close_job_t *j = arg;
  for (int i = 0; i < j->n; i++) close(j->fds[i]);
  return NULL;
}
static void close_in_parallel(link_t *links, int nlinks) {
  int n = 2 * nlinks;
  int *fds = malloc(sizeof(int) * (size_t)n);
  if (!fds) return; /* the kernel closes them at exit */
  for (int i = 0; i < nlinks; i++) { fds[2 * i] = links[i].fd_a; fds[2 * i + 1] = links[i].fd_b; }
  int nt = n < CLOSE_THREADS ? n : CLOSE_THREADS;
  pthread_t tids[CLOSE_THREADS];
  close_job_t jobs[CLOSE_THREADS];
  int created[CLOSE_THREADS] = {0};
  for (int t = 0; t < nt; t++) {
    jobs[t] = (close_job_t){fds + n * t / nt, n * (t + 1) / nt - n * t / nt};
    created[t] = nt > 1 && pthread_create(&tids[t], NULL, close_fds, &jobs[t]) == 0;
    if (!created[t]) close_fds(&jobs[t]);
  }
  for (int t = 0; t < nt; t++)
    if (created[t]) pthread_join(tids[t], NULL);
  free(fds);
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
  const char *netns = NULL, *ready = NULL;
  size_t ring_mb = 256;
  long rt_prio = 0;
  int nlinks = 0;
  link_t *links = calloc((size_t)argc, sizeof(link_t));
  if (!links) die("out of memory");
  if (argc == 3 && !strcmp(argv[1], "--split-test")) return split_test(argv[2]);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--netns") && i + 1 < argc) netns = argv[++i];
    else if (!strcmp(argv[i], "--ready-file") && i + 1 < argc) ready = argv[++i];
    else if (!strcmp(argv[i], "--ring-mb") && i + 1 < argc) {
      char *e;
      ring_mb = strtoull(argv[++i], &e, 10);
      if (*e || ring_mb < 1) { fprintf(stderr, "fastrelay: --ring-mb must be a whole number >= 1\n"); return 2; }
    } else if (!strcmp(argv[i], "--rt-prio") && i + 1 < argc) {
      char *e;
      rt_prio = strtol(argv[++i], &e, 10);
      if (*e || rt_prio < 0 || rt_prio > 99) { fprintf(stderr, "fastrelay: --rt-prio must be a whole number 0-99\n"); return 2; }
    } else if (!strcmp(argv[i], "--link") && i + 1 < argc) {
      int rc = parse_link(argv[++i], &links[nlinks]);
      if (rc) { fprintf(stderr, "fastrelay: --link %d: malformed (see usage)\n", nlinks + 1); usage(); return 2; }
      nlinks++;
    } else { usage(); return 2; }
  }
  if (!nlinks) { usage(); return 2; }
  if (netns) enter_netns(netns);
  int home_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home_ns < 0) die_errno("cannot open", "/proc/thread-self/ns/net");
  if (ready) unlink(ready);
  struct sigaction sa = {0};
  sa.sa_handler = on_stop;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  /* A link in the kernel (netem, tbf) forwards in softirq context, ahead of every user process; a relay
   * standing in for it at normal priority waits behind them on a busy machine (measured: runnable but
   * not running 46-70 % of the time, its socket queue 25-127 MB deep, the loaded RTT of a 50 ms path
   * 130-230 ms). SCHED_FIFO puts it first; it sleeps in epoll when no frame is due, and the kernel's
   * real-time throttling leaves other tasks their share should it ever spin. Not granted (no
   * CAP_SYS_NICE, or an RT group without runtime): say so and run at normal priority. */
  if (rt_prio > 0) {
    struct sched_param sp = {.sched_priority = (int)rt_prio};
    if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) == 0) g_rt_prio = (int)rt_prio;
    else fprintf(stderr, "fastrelay: real-time priority %ld not granted (%s): normal scheduling\n", rt_prio, strerror(errno));
  }

  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) die("epoll");
  struct epoll_event ev = {.events = EPOLLIN};
  for (int i = 0; i < nlinks; i++) {
    link_t *l = &links[i];
    if (l->netns) enter_netns(l->netns); /* sockets stay in the namespace they were made in */
    l->fd_a = open_sock(l->if_a, l->gso);
    l->fd_b = open_sock(l->if_b, l->gso);
    int mtu = if_mtu(l->if_a) > if_mtu(l->if_b) ? if_mtu(l->if_a) : if_mtu(l->if_b);
    if (l->netns && setns(home_ns, CLONE_NEWNET) < 0) die_errno("cannot return to the relay's namespace from", l->netns);
    size_t fb = l->gso ? GSO_FRAME_BYTES : (size_t)mtu + 64;
    for (int k = 0; k < 2; k++) {
      dir_t *d = &l->d[k];
      d->fd_in = k == 0 ? l->fd_a : l->fd_b;
      d->fd_out = k == 0 ? l->fd_b : l->fd_a;
      d->frame_bytes = fb;
      d->gso = l->gso;
      d->loss_rng = seed_of(l->seed, k, 1);
      d->jitter_rng = seed_of(l->seed, k, 2);
      d->size = ring_mb << 20;
      d->chunk = d->size / 8 < CHUNK_MIN ? CHUNK_MIN : d->size / 8 > CHUNK_MAX ? CHUNK_MAX : d->size / 8;
      if (d->chunk > d->size) d->chunk = d->size;
      d->nchunks = d->size / d->chunk;
      d->ring = mmap(NULL, d->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      d->q = calloc(d->nchunks, sizeof(uint32_t));
      d->free_chunks = calloc(d->nchunks, sizeof(uint32_t));
      if (d->ring == MAP_FAILED || !d->q || !d->free_chunks) die("cannot map the frame ring");
      ev.events = EPOLLIN;
      ev.data.u64 = (uint64_t)i * 2 + (uint64_t)k;
      if (epoll_ctl(ep, EPOLL_CTL_ADD, d->fd_in, &ev) < 0) die("epoll_ctl");
    }
  }
  if (ready) {
    int fd = open(ready, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
  }
  uint64_t t0 = now_ns();
  double c0 = cpu_s();
  struct epoll_event evs[64];
  while (!g_stop) {
    if (g_reload) {
      g_reload = 0;
      for (int i = 0; i < nlinks; i++) {
        link_t *l = &links[i];
        if (!l->control_path) continue;
        struct stat cst;
        /* a process serves several links: the signal was for one of them; a link whose control file
           was never written (or has not changed since it was applied) keeps its values */
        if (stat(l->control_path, &cst) < 0) continue;
        if (cst.st_mtim.tv_sec == l->control_mtime.tv_sec && cst.st_mtim.tv_nsec == l->control_mtime.tv_nsec &&
            (uint64_t)cst.st_ino == l->control_ino) continue;
        l->control_mtime = cst.st_mtim;
        l->control_ino = (uint64_t)cst.st_ino;
        imp_t im[2];
        char err[256];
        if (read_control(l->control_path, im, err, sizeof err)) {
          fprintf(stderr, "fastrelay: control file %s not applied: %s\n", l->control_path, err);
          continue;
        }
        l->d[0].imp = im[0];
        l->d[1].imp = im[1];
      }
    }
    uint64_t t = now_ns(), next = 0;
    for (int i = 0; i < nlinks; i++)
      for (int k = 0; k < 2; k++) {
        uint64_t due = release_due(&links[i].d[k], t);
        if (due && (!next || due < next)) next = due;
      }
    /* sleep until the next frame is due (epoll_pwait2: nanosecond timeout, no timer to re-arm) */
    struct timespec wait = {0, 50 * 1000000L};
    if (next) {
      uint64_t now = now_ns(), left = next > now ? next - now : 0;
      wait.tv_sec = (time_t)(left / 1000000000ull);
      wait.tv_nsec = (long)(left % 1000000000ull);
    }
    int n = epoll_pwait2(ep, evs, 64, &wait, NULL);
    for (int j = 0; j < n; j++) {
      uint64_t tag = evs[j].data.u64;
      drain(&links[tag / 2].d[tag % 2]);
    }
  }
  double dur = (now_ns() - t0) / 1e9, cpu = cpu_s() - c0;
  for (int i = 0; i < nlinks; i++) {
    link_t *l = &links[i];
    l->d[0].st.kernel_drops = kernel_drops(l->fd_a);
    l->d[1].st.kernel_drops = kernel_drops(l->fd_b);
    for (int k = 0; k < 2; k++) l->d[k].st.queued_at_exit = l->d[k].queued;
    write_stats(l, dur, cpu / nlinks);
  }
  close_in_parallel(links, nlinks);
  return 0;
}
