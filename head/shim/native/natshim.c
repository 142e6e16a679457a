/*
 * natshim: the native layer of rayvast's shim (SPEC §9), preloaded into Ray's
 * children by sitecustomize.py. Where the node IP is on no interface of the
 * container (vast's NAT), C/C++ binds to the node IP go to the container's
 * own IP, and connects to the node IP on the node's own ports go there too:
 * the same rules as the Python layer, for AF_INET and v4-mapped AF_INET6
 * (gRPC uses both).
 *
 * It reads NAT_SHIM="<node ip> <container ip> <port>[,<port>|,<lo>-<hi>]..."
 * once at load; without it, or malformed, it changes nothing.
 *
 * The real calls are raw syscalls, not dlsym(RTLD_NEXT): before glibc 2.34
 * dlsym lives in libdl, which a process may not have loaded. Every libc
 * symbol is pinned to its architecture's first glibc version so the library
 * loads on old images.
 */
#define _GNU_SOURCE
#include <netinet/in.h>
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

#define EXPORT __attribute__((visibility("default")))

static int active;
static unsigned char node[4], self[4];
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
	if (!bind && !is_own(p))
		return sa;
	memcpy(ip, self, 4);
	return (const struct sockaddr *)buf;
}

EXPORT int bind(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr_storage buf;
	return (int)syscall(SYS_bind, fd, rewrite(sa, len, &buf, 1), len);
}

EXPORT int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr_storage buf;
	return (int)syscall(SYS_connect, fd, rewrite(sa, len, &buf, 0), len);
}
