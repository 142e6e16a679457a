/*
 * natshim: the native layer of rayvast's shim (docs/protocol.md §9), preloaded into Ray's
 * children by sitecustomize.py. Where the node IP is on no interface of the
 * container (vast's NAT), C/C++ binds to the node IP go to the container's
 * own IP, and connects to the node IP on the node's own ports go there too:
 * the same rules as the Python layer, for AF_INET and v4-mapped AF_INET6
 * (gRPC uses both).
 *
 * It reads NAT_SHIM="<node ip> <container ip> <port>[,<port>|,<lo>-<hi>]..."
 * once at load; without it, or malformed, it changes nothing.
 *
 * With NAT_SHIM_MESH="127.0.0.1:<port>" (the agent's mesh, agent/mesh) it
 * also carries collective traffic (torch.distributed, gloo, NCCL):
 * - connects to the node IP on any port go to the container's IP (a rank
 *   dials its own TCPStore at the node IP; no hairpin NAT brings it back);
 * - getsockname on a listening socket bound to the container's IP answers
 *   the node IP, so gloo and NCCL advertise an address other nodes reach;
 * - a TCP connect to any other address (not loopback, not the container's
 *   own) is first asked of the agent: "D" goes direct as it was, "C" means
 *   the agent now carries it to the member that owns the address (over
 *   mutual TLS), and the process's socket is replaced (dup3) by the
 *   connected loopback socket; "E <errno>" fails the connect with it;
 * - a TCP listener on a port outside the node's own takes packets from this
 *   container only (guard_listener, where the kernel lets it attach a
 *   filter) and hands the process connections from this container only
 *   (guarded_accept, everywhere): a co-tenant on the host's bridge reaches
 *   no TCPStore or gloo pair at the container's private address.
 *
 * The real calls are raw syscalls, not dlsym(RTLD_NEXT): before glibc 2.34
 * dlsym lives in libdl, which a process may not have loaded. Every libc
 * symbol is pinned to its architecture's first glibc version so the library
 * loads on old images.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/time.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define GLIBC_BASE "GLIBC_2.17"
#else
#error "natshim: pin the glibc base version for this architecture"
#endif
__asm__(".symver getenv,getenv@" GLIBC_BASE);
__asm__(".symver syscall,syscall@" GLIBC_BASE);
__asm__(".symver memcpy,memcpy@" GLIBC_BASE);
__asm__(".symver memset,memset@" GLIBC_BASE);
__asm__(".symver memcmp,memcmp@" GLIBC_BASE);
__asm__(".symver __errno_location,__errno_location@" GLIBC_BASE);

#define EXPORT __attribute__((visibility("default")))

static int active;
static unsigned char node[4], self[4];
static int mesh;                    /* NAT_SHIM_MESH parsed */
static unsigned char mesh_ip[4];
static unsigned mesh_port;
static unsigned char own[65536 / 8]; /* the node's own ports, a bitmap */

static const char *ipv4(const char *s, unsigned char out[4])
{
	for (int i = 0; i < 4; i++) {
		unsigned v = 0, digits = 0;
		while (*s >= '0' && *s <= '9' && digits < 4) {
			v = v * 10 + (unsigned)(*s++ - '0');
			digits++;
		}
		if (digits == 0 || v > 255 || (i < 3 && *s++ != '.'))
			return NULL;
		out[i] = (unsigned char)v;
	}
	return s;
}

static const char *port(const char *s, unsigned *out)
{
	unsigned v = 0, digits = 0;
	while (*s >= '0' && *s <= '9' && digits < 6) {
		v = v * 10 + (unsigned)(*s++ - '0');
		digits++;
	}
	if (digits == 0 || v > 65535) /* 0: the node's ports are not known */
		return NULL;
	*out = v;
	return s;
}

/* parse fills the rules from NAT_SHIM's value; 0 when malformed. */
static int parse(const char *s)
{
	if (!(s = ipv4(s, node)) || *s++ != ' ' || !(s = ipv4(s, self)) || *s++ != ' ')
		return 0;
	for (;;) {
		unsigned lo, hi;
		if (!(s = port(s, &lo)))
			return 0;
		hi = lo;
		if (*s == '-' && (!(s = port(s + 1, &hi)) || hi < lo))
			return 0;
		for (unsigned p = lo; p <= hi; p++)
			own[p / 8] |= (unsigned char)(1u << (p % 8));
		if (*s == '\0')
			return 1;
		if (*s++ != ',')
			return 0;
	}
}

__attribute__((constructor)) static void init(void)
{
	const char *v = getenv("NAT_SHIM");
	if (v && !parse(v))
		memset(own, 0, sizeof own);
	else if (v)
		active = 1;
	const char *m = getenv("NAT_SHIM_MESH");
	if (active && m && (m = ipv4(m, mesh_ip)) && *m++ == ':' && (m = port(m, &mesh_port)) && *m == '\0' &&
	    mesh_port > 0)
		mesh = 1;
}

static int is_own(unsigned p) { return own[p / 8] >> (p % 8) & 1; }

static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/*
 * rewrite returns the address to use: sa itself, or buf holding a copy with
 * the node IP replaced by the container's (binds always, connects only to
 * the node's own ports: another rental behind the same IP owns the others).
 */
static const struct sockaddr *rewrite(const struct sockaddr *sa, socklen_t len,
				      struct sockaddr_storage *buf, int bind)
{
	unsigned char *ip;
	unsigned p;
	if (!active || sa == NULL || len > sizeof *buf)
		return sa;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;
		if (memcmp(&in->sin_addr, node, 4) != 0)
			return sa;
		p = ntohs(in->sin_port);
		memcpy(buf, sa, len);
		ip = (unsigned char *)&((struct sockaddr_in *)buf)->sin_addr;
	} else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		const unsigned char *a = in6->sin6_addr.s6_addr;
		if (memcmp(a, mapped, 12) != 0 || memcmp(a + 12, node, 4) != 0)
			return sa;
		p = ntohs(in6->sin6_port);
		memcpy(buf, sa, len);
		ip = ((struct sockaddr_in6 *)buf)->sin6_addr.s6_addr + 12;
	} else {
		return sa;
	}
	if (!bind && !is_own(p) && !mesh)
		return sa;
	memcpy(ip, self, 4);
	return (const struct sockaddr *)buf;
}

/*
 * reuse_own: a TCP bind to one of the node's own ports (the 64 that vast
 * forwards) gets SO_REUSEADDR first, so a connection on that port in TCP
 * TIME_WAIT never fails the bind. Ray's raylet tests a worker port by
 * binding it without SO_REUSEADDR, and Ray 2.52's dashboard agent closes
 * loopback connections from the node's own workers first, which leaves
 * its gRPC port (one of the 64) in TIME_WAIT for a minute (issue 41). A
 * port some socket listens on still fails the bind (Linux refuses it with
 * or without the option), so "in use" keeps its meaning.
 */
static void reuse_own(int fd, const struct sockaddr *sa, socklen_t len)
{
	unsigned p;
	int type = 0, on = 1;
	socklen_t tl = sizeof type;
	if (!active || sa == NULL)
		return;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
		p = ntohs(((const struct sockaddr_in *)sa)->sin_port);
	else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
		p = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	else
		return;
	if (p == 0 || !is_own(p) || syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 ||
	    type != SOCK_STREAM)
		return;
	syscall(SYS_setsockopt, fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
}

EXPORT int bind(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr_storage buf;
	reuse_own(fd, sa, len);
	return (int)syscall(SYS_bind, fd, rewrite(sa, len, &buf, 1), len);
}

/*
 * guard_listener: with the mesh on, a TCP listener on a port outside the
 * node's 64 (a TCPStore, gloo's and NCCL's pairs: whatever a rank opens)
 * takes packets only from this container: an IPv4 source in 127/8 or the
 * container's own address, or IPv6 ::1. On a vast host, co-tenants may sit
 * on the container's bridge and reach its private address at any port,
 * and what listens there runs pickles (pytorch's SECURITY.md). The node's
 * own ranks dial the container's address over loopback, the mesh's far
 * end dials from this container too, so both pass. A classic BPF socket
 * filter needs no capability on most kernels (some refuse it without
 * CAP_NET_ADMIN: then guarded_accept alone holds), SO_BINDTODEVICE needs
 * NET_RAW before Linux 5.7, and the sockets a listener accepts inherit the
 * filter. A dropped SYN looks like a host that does not answer.
 */
static void guard_listener(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss, tl = sizeof(int);
	int type = 0;
	unsigned p;
	if (!mesh || syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM ||
	    syscall(SYS_getsockname, fd, &ss, &sl) != 0)
		return;
	if (ss.ss_family == AF_INET)
		p = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	else if (ss.ss_family == AF_INET6)
		p = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	else
		return;
	if (is_own(p))
		return;
	unsigned me = (unsigned)self[0] << 24 | (unsigned)self[1] << 16 | (unsigned)self[2] << 8 | self[3];
	struct sock_filter code[] = {
		/* 0 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, SKF_NET_OFF + 0),
		/* 1 */ BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 4),
		/* 2 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 6, 4, 0), /* IPv6: 7 */
		/* 3 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_NET_OFF + 12),
		/* 4 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, me, 11, 0),
		/* 5 */ BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xff000000u),
		/* 6 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x7f000000u, 9, 8),
		/* 7 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_NET_OFF + 8),
		/* 8 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 6),
		/* 9 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_NET_OFF + 12),
		/* 10 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 4),
		/* 11 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_NET_OFF + 16),
		/* 12 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 2),
		/* 13 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_NET_OFF + 20),
		/* 14 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 1, 1, 0),
		/* 15 */ BPF_STMT(BPF_RET | BPF_K, 0),
		/* 16 */ BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),
	};
	struct sock_fprog prog = {sizeof code / sizeof code[0], code};
	syscall(SYS_setsockopt, fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog);
}

EXPORT int listen(int fd, int backlog)
{
	guard_listener(fd);
	return (int)syscall(SYS_listen, fd, backlog);
}

/*
 * guarded_port: a TCP listener that guard_listener covers (mesh on, a port
 * outside the node's own). The filter is the first layer only: attaching
 * it needs CAP_NET_ADMIN on some kernels (EPERM without it, as in Docker's
 * default capabilities and so in Ray's workers on most rentals), so accept
 * checks the peer as well.
 */
static int guarded_port(int fd, int family)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	unsigned p;
	if (!mesh || (family != AF_INET && family != AF_INET6) || syscall(SYS_getsockname, fd, &ss, &sl) != 0)
		return 0;
	if (ss.ss_family == AF_INET)
		p = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	else if (ss.ss_family == AF_INET6)
		p = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	else
		return 0;
	return !is_own(p);
}

/* local_peer: the filter's rule, for an accepted peer: IPv4 in 127/8 or
 * the container's own address (plain or v4-mapped), or IPv6 ::1. */
static int local_peer(const struct sockaddr_storage *ss)
{
	static const unsigned char loop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	const unsigned char *ip;
	if (ss->ss_family == AF_INET)
		ip = (const unsigned char *)&((const struct sockaddr_in *)ss)->sin_addr;
	else if (ss->ss_family == AF_INET6) {
		ip = ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
		if (memcmp(ip, loop6, 16) == 0)
			return 1;
		if (memcmp(ip, mapped, 12) != 0)
			return 0;
		ip += 12;
	} else
		return 0;
	return ip[0] == 127 || memcmp(ip, self, 4) == 0;
}

/*
 * guarded_accept: accept4 that, on a guarded listener, resets (SO_LINGER
 * 0, so the peer reads ECONNRESET, not a stream that stays open) every
 * connection from outside the container before the process sees it, and
 * takes the next. A non-blocking listener with nothing else queued answers
 * EAGAIN, as after a spurious wakeup. The caller's address buffer gets
 * what the kernel would give it: truncated to *len, *len the full size.
 */
static int guarded_accept(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	struct sockaddr_storage ss;
	int type = 0, domain = 0;
	socklen_t tl = sizeof type, dl = sizeof domain;
	if (!mesh || syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM ||
	    syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_DOMAIN, &domain, &dl) != 0 || !guarded_port(fd, domain))
		return (int)syscall(SYS_accept4, fd, sa, len, flags);
	for (;;) {
		socklen_t sl = sizeof ss;
		int c = (int)syscall(SYS_accept4, fd, &ss, &sl, flags);
		if (c < 0)
			return c;
		if (local_peer(&ss)) {
			if (sa != NULL && len != NULL) {
				memcpy(sa, &ss, *len < sl ? *len : sl);
				*len = sl;
			}
			return c;
		}
		struct linger lg = {1, 0};
		syscall(SYS_setsockopt, c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
		syscall(SYS_close, c);
	}
}

EXPORT int accept(int fd, struct sockaddr *sa, socklen_t *len) { return guarded_accept(fd, sa, len, 0); }

EXPORT int accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	return guarded_accept(fd, sa, len, flags);
}

/* dest4 gives the IPv4 address and port of an AF_INET or v4-mapped
 * AF_INET6 address; 0 for anything else. */
static int dest4(const struct sockaddr *sa, socklen_t len, unsigned char ip[4], unsigned *p)
{
	if (sa == NULL)
		return 0;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;
		memcpy(ip, &in->sin_addr, 4);
		*p = ntohs(in->sin_port);
		return 1;
	}
	if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		if (memcmp(in6->sin6_addr.s6_addr, mapped, 12) != 0)
			return 0;
		memcpy(ip, in6->sin6_addr.s6_addr + 12, 4);
		*p = ntohs(in6->sin6_port);
		return 1;
	}
	return 0;
}

/* ask_mesh is worth asking: a TCP socket toward an address that is not
 * loopback, unspecified, multicast, the node's or the container's own. */
static int ask_mesh(int fd, const unsigned char ip[4], unsigned p)
{
	int type = 0;
	socklen_t tl = sizeof type;
	if (!mesh || p == 0 || ip[0] == 127 || ip[0] == 0 || ip[0] >= 224 || memcmp(ip, node, 4) == 0 ||
	    memcmp(ip, self, 4) == 0)
		return 0;
	if (syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM)
		return 0;
	return 1;
}

static char *put_uint(char *b, unsigned v)
{
	char t[12];
	int n = 0;
	do {
		t[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*b++ = t[--n];
	return b;
}

static void set_timeout(int s, long sec)
{
	struct timeval tv = {sec, 0};
	syscall(SYS_setsockopt, s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	syscall(SYS_setsockopt, s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* via_mesh asks the agent about ip:p for fd. It returns 0 to go direct;
 * 1 when fd now carries the mesh stream (*rc = 0) or the far side
 * refused (*rc = -1, errno set). The agent unreachable: direct. */
static int via_mesh(int fd, int family, const unsigned char ip[4], unsigned p, int *rc)
{
	int s = (int)syscall(SYS_socket, family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return 0;
	struct sockaddr_storage a;
	socklen_t al;
	memset(&a, 0, sizeof a);
	if (family == AF_INET6) {
		struct sockaddr_in6 *in6 = (void *)&a;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((unsigned short)mesh_port);
		memcpy(in6->sin6_addr.s6_addr, mapped, 12);
		memcpy(in6->sin6_addr.s6_addr + 12, mesh_ip, 4);
		al = sizeof *in6;
	} else {
		struct sockaddr_in *in = (void *)&a;
		in->sin_family = AF_INET;
		in->sin_port = htons((unsigned short)mesh_port);
		memcpy(&in->sin_addr, mesh_ip, 4);
		al = sizeof *in;
	}
	set_timeout(s, 30); /* the agent's own dial is bounded at about 20 s */
	char q[64], *e = q;
	memcpy(e, "RVMESH1 ", 8);
	e += 8;
	for (int i = 0; i < 4; i++) {
		e = put_uint(e, ip[i]);
		*e++ = i < 3 ? '.' : ' ';
	}
	e = put_uint(e, p);
	*e++ = '\n';
	char ans[16];
	int n = 0;
	if (syscall(SYS_connect, s, (struct sockaddr *)&a, al) != 0 || syscall(SYS_write, s, q, e - q) != e - q)
		goto direct;
	while (n < (int)sizeof ans - 1) { /* byte by byte: nothing past the line */
		long r = syscall(SYS_read, s, ans + n, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r != 1)
			goto direct;
		if (ans[n++] == '\n')
			break;
	}
	ans[n] = '\0';
	if (n == 2 && ans[0] == 'C') {
		int one = 1;
		long fl = syscall(SYS_fcntl, fd, F_GETFL);
		long fdfl = syscall(SYS_fcntl, fd, F_GETFD);
		set_timeout(s, 0);
		syscall(SYS_setsockopt, s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (fl >= 0 && (fl & O_NONBLOCK))
			syscall(SYS_fcntl, s, F_SETFL, O_RDWR | O_NONBLOCK);
		if (syscall(SYS_dup3, s, fd, (fdfl >= 0 && (fdfl & FD_CLOEXEC)) ? O_CLOEXEC : 0) < 0) {
			int saved = errno;
			syscall(SYS_close, s);
			errno = saved;
			*rc = -1;
			return 1;
		}
		syscall(SYS_close, s);
		*rc = 0;
		return 1;
	}
	if (n >= 3 && ans[0] == 'E' && ans[1] == ' ') {
		unsigned code = 0;
		for (int i = 2; ans[i] >= '0' && ans[i] <= '9' && code < 4096; i++)
			code = code * 10 + (unsigned)(ans[i] - '0');
		syscall(SYS_close, s);
		errno = code > 0 && code < 4096 ? (int)code : ECONNREFUSED;
		*rc = -1;
		return 1;
	}
direct:
	syscall(SYS_close, s);
	return 0;
}

EXPORT int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr_storage buf;
	unsigned char ip[4];
	unsigned p;
	int rc;
	if (mesh && dest4(sa, len, ip, &p) && ask_mesh(fd, ip, p) && via_mesh(fd, sa->sa_family, ip, p, &rc))
		return rc;
	return (int)syscall(SYS_connect, fd, rewrite(sa, len, &buf, 0), len);
}

/* getsockname answers the node IP for a listener bound to the container's
 * IP (where its bind to the node IP went), so what a process advertises of
 * its own listener is an address other nodes can reach (through the mesh). */
EXPORT int getsockname(int fd, struct sockaddr *sa, socklen_t *len)
{
	int rc = (int)syscall(SYS_getsockname, fd, sa, len);
	int listening = 0;
	socklen_t ll = sizeof listening;
	unsigned char *ip = NULL;
	if (rc != 0 || !mesh || sa == NULL || len == NULL)
		return rc;
	if (sa->sa_family == AF_INET && *len >= sizeof(struct sockaddr_in))
		ip = (unsigned char *)&((struct sockaddr_in *)sa)->sin_addr;
	else if (sa->sa_family == AF_INET6 && *len >= sizeof(struct sockaddr_in6) &&
		 memcmp(((struct sockaddr_in6 *)sa)->sin6_addr.s6_addr, mapped, 12) == 0)
		ip = ((struct sockaddr_in6 *)sa)->sin6_addr.s6_addr + 12;
	if (ip == NULL || memcmp(ip, self, 4) != 0)
		return rc;
	if (syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ll) == 0 && listening)
		memcpy(ip, node, 4);
	return rc;
}
