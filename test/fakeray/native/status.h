/* status.h: shared by the stand-in's native programs (raylet.c, core_worker.c).
 *
 * They are plain dynamically linked C against glibc on purpose: a real
 * raylet and core worker call libc's bind()/connect(), so an LD_PRELOAD
 * library in their environment sees these calls exactly as it would see
 * Ray's. Each program writes its own status as JSON (atomically) to
 * SESSION_DIR/fakeray/NAME.json, which `ray start` folds into its record.
 */
#ifndef FAKERAY_STATUS_H
#define FAKERAY_STATUS_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

extern char **environ;

/* flag returns the value of --NAME=value in argv, or def. Ray's natives take
 * gflags in this form. */
static const char *flag(int argc, char **argv, const char *name, const char *def) {
	size_t n = strlen(name);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] == '-' && a[1] == '-' && strncmp(a + 2, name, n) == 0 && a[2 + n] == '=')
			return a + 3 + n;
	}
	return def;
}

static void jstr(FILE *f, const char *s) {
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* jenv writes the whole environment as a JSON object: tests check what the
 * process inherited (LD_PRELOAD, PYTHONPATH, no RAYVAST_*). */
static void jenv(FILE *f) {
	fputc('{', f);
	for (char **e = environ; *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq)
			continue;
		char name[512];
		size_t n = (size_t)(eq - *e) < sizeof name - 1 ? (size_t)(eq - *e) : sizeof name - 1;
		memcpy(name, *e, n);
		name[n] = 0;
		if (e != environ)
			fputc(',', f);
		jstr(f, name);
		fputc(':', f);
		jstr(f, eq + 1);
	}
	fputc('}', f);
}

/* sockop is one bind or connect: what was asked, what happened, and where
 * the socket ended up (getsockname/getpeername), so a test sees a rewrite
 * done underneath by an LD_PRELOAD library. */
struct sockop {
	char op[8];
	char addr[64];
	int port;
	int done, ok, err;
	char result[80]; /* local (bind) or peer (connect) address:port */
};

static void jop(FILE *f, const struct sockop *o) {
	fprintf(f, "{\"op\":\"%s\",\"addr\":", o->op);
	jstr(f, o->addr);
	fprintf(f, ",\"port\":%d,\"ok\":%s,\"errno\":%d,\"error\":", o->port, o->ok ? "true" : "false", o->err);
	jstr(f, o->err ? strerror(o->err) : "");
	fprintf(f, ",\"errno_name\":");
	jstr(f, o->err == EADDRNOTAVAIL ? "EADDRNOTAVAIL" : o->err == ENETUNREACH ? "ENETUNREACH"
		: o->err == ECONNREFUSED ? "ECONNREFUSED" : o->err == EADDRINUSE ? "EADDRINUSE"
		: o->err == EACCES ? "EACCES" : o->err == ENAMETOOLONG ? "ENAMETOOLONG"
		: o->err == ETIMEDOUT ? "ETIMEDOUT" : o->err ? "other" : "");
	fprintf(f, ",\"result\":");
	jstr(f, o->result);
	fputc('}', f);
}

static void fmt_sa(const struct sockaddr_storage *ss, char *out, size_t n) {
	char ip[INET6_ADDRSTRLEN] = "";
	int port = 0;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)ss;
		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof ip);
		port = ntohs(s->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)ss;
		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof ip);
		port = ntohs(s->sin6_port);
	}
	snprintf(out, n, "%s:%d", ip, port);
}

/* connect_timeout is connect() that gives up after ms (ETIMEDOUT): a SYN
 * into a NAT without hairpin is dropped, and a stand-in must not hang. */
static int connect_timeout(int fd, const struct sockaddr *sa, socklen_t len, int ms) {
	int fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	int rc = connect(fd, sa, len);
	if (rc != 0 && errno == EINPROGRESS) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		if (poll(&p, 1, ms) != 1) {
			errno = ETIMEDOUT;
			return -1;
		}
		int err = 0;
		socklen_t el = sizeof err;
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
		rc = err ? -1 : 0;
		errno = err;
	}
	fcntl(fd, F_SETFL, fl);
	return rc;
}

/* tcp_op makes a TCP socket for the numeric address addr:port (IPv4 or
 * IPv6) and does op ("bind" then listen, or "connect"). Returns the fd or -1;
 * o records the outcome either way. */
static int tcp_op(const char *op, const char *addr, int port, struct sockop *o) {
	memset(o, 0, sizeof *o);
	snprintf(o->op, sizeof o->op, "%s", op);
	snprintf(o->addr, sizeof o->addr, "%s", addr);
	o->port = port;
	o->done = 1;
	struct sockaddr_storage ss;
	socklen_t len;
	memset(&ss, 0, sizeof ss);
	struct sockaddr_in *s4 = (void *)&ss;
	struct sockaddr_in6 *s6 = (void *)&ss;
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((unsigned short)port);
		len = sizeof *s4;
	} else if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((unsigned short)port);
		len = sizeof *s6;
	} else {
		o->err = EINVAL;
		return -1;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		o->err = errno;
		return -1;
	}
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* gRPC sets it too */
	int rc;
	if (strcmp(op, "bind") == 0) {
		rc = bind(fd, (void *)&ss, len);
		if (rc == 0)
			rc = listen(fd, 64);
	} else {
		rc = connect_timeout(fd, (void *)&ss, len, 2000);
	}
	if (rc != 0) {
		o->err = errno;
		close(fd);
		return -1;
	}
	struct sockaddr_storage got;
	socklen_t gl = sizeof got;
	memset(&got, 0, sizeof got);
	if ((strcmp(op, "bind") == 0 ? getsockname(fd, (void *)&got, &gl) : getpeername(fd, (void *)&got, &gl)) == 0)
		fmt_sa(&got, o->result, sizeof o->result);
	o->ok = 1;
	return fd;
}

/* status_open opens a temp file beside SESSION_DIR/fakeray/NAME.json; status_commit
 * renames it into place, so a reader never sees half a status. */
static FILE *status_open(const char *session, const char *name, char *tmp, size_t n) {
	snprintf(tmp, n, "%s/fakeray/.%s.json.%d", session, name, (int)getpid());
	return fopen(tmp, "w");
}

static void status_commit(FILE *f, const char *session, const char *name, const char *tmp) {
	char final[4096];
	snprintf(final, sizeof final, "%s/fakeray/%s.json", session, name);
	fclose(f);
	rename(tmp, final);
}

static void jargv(FILE *f, int argc, char **argv) {
	fputc('[', f);
	for (int i = 0; i < argc; i++) {
		if (i)
			fputc(',', f);
		jstr(f, argv[i]);
	}
	fputc(']', f);
}

#endif
