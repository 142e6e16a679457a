/*
 * sockprobe: a tiny C program that binds and connects as Ray's native
 * processes do, through libc (so an LD_PRELOAD library sees the calls).
 * Each op is four words: <tcp4|udp4|tcp6|udp6> <bind|listen|connect> IP PORT;
 * "nbconnect" connects as NCCL's socket transport does: a non-blocking
 * socket, connect(2) answering 0 or EINPROGRESS, then poll for POLLOUT and
 * SO_ERROR; its line ends " nonblock" when the socket is still
 * non-blocking after the connect, and an error is whichever of connect's
 * errno or SO_ERROR said it.
 * "serve" listens as "listen" does, prints its line, then accepts until
 * killed, as torch's TCPStore does (accept with no address buffer, the peer
 * from getpeername); "nbserve" as a Python or epoll server does (a
 * non-blocking listener, poll, accept4 into a buffer of the family's exact
 * size, EAGAIN taken as "wait again"). To each connection it writes
 * "hi <peer ip>:<port>\n" and closes it, and prints "<n> accepted <peer>".
 * "bindnr" binds without SO_REUSEADDR (every other op sets it), as Ray's
 * raylet tests whether a worker port is free.
 * "hold" waits until stdin closes. Per op it prints one line:
 *   <n> ok <local ip>:<port> <peer ip>:<port>   or   <n> err <errno>
 * and exits 1 after the first error. Sockets stay open until exit.
 */
#define _GNU_SOURCE
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

static void show(int fd, int v6, int (*get)(int, struct sockaddr *, socklen_t *))
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	char ip[INET6_ADDRSTRLEN] = "-";
	unsigned port = 0;
	memset(&ss, 0, sizeof ss);
	if (get(fd, (struct sockaddr *)&ss, &len) == 0) {
		if (v6) {
			struct sockaddr_in6 *a = (void *)&ss;
			inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
			port = ntohs(a->sin6_port);
		} else {
			struct sockaddr_in *a = (void *)&ss;
			inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
			port = ntohs(a->sin_port);
		}
	}
	printf(" %s:%u", ip, port);
}

static void peer(char *out, size_t n, const struct sockaddr_storage *ss)
{
	char ip[INET6_ADDRSTRLEN] = "-";
	unsigned port = 0;
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;
		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
		port = ntohs(a->sin6_port);
	} else if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;
		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
		port = ntohs(a->sin_port);
	}
	snprintf(out, n, "%s:%u", ip, port);
}

/* serve accepts on listener fd forever (see the header). */
static int serve(int n, int fd, int v6, int nb)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len = v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
		int c;
		memset(&ss, 0, sizeof ss);
		if (nb) {
			struct pollfd pfd = {fd, POLLIN, 0};
			poll(&pfd, 1, -1);
			c = accept4(fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (c < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				continue;
		} else {
			c = accept(fd, NULL, NULL);
			len = sizeof ss;
			if (c >= 0)
				getpeername(c, (struct sockaddr *)&ss, &len);
		}
		if (c < 0)
			return printf("%d err %s\n", n, strerrorname_np(errno)), 1;
		char who[INET6_ADDRSTRLEN + 8], line[INET6_ADDRSTRLEN + 16];
		peer(who, sizeof who, &ss);
		int l = snprintf(line, sizeof line, "hi %s\n", who);
		if (write(c, line, (size_t)l) != l)
			return printf("%d err write\n", n), 1;
		close(c);
		printf("%d accepted %s\n", n, who);
	}
}

static int op(int n, const char *kind, const char *what, const char *ip, const char *port)
{
	int v6 = kind[3] == '6', tcp = kind[0] == 't';
	struct sockaddr_storage ss;
	socklen_t len;
	memset(&ss, 0, sizeof ss);
	if (v6) {
		struct sockaddr_in6 *a = (void *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((unsigned short)atoi(port));
		if (inet_pton(AF_INET6, ip, &a->sin6_addr) != 1)
			return printf("%d err bad-ip\n", n), 1;
		len = sizeof *a;
	} else {
		struct sockaddr_in *a = (void *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons((unsigned short)atoi(port));
		if (inet_pton(AF_INET, ip, &a->sin_addr) != 1)
			return printf("%d err bad-ip\n", n), 1;
		len = sizeof *a;
	}
	int srv = strcmp(what, "serve") == 0 || strcmp(what, "nbserve") == 0;
	int nb = strcmp(what, "nbconnect") == 0 || strcmp(what, "nbserve") == 0;
	int fd = socket(v6 ? AF_INET6 : AF_INET, (tcp ? SOCK_STREAM : SOCK_DGRAM) | (nb ? SOCK_NONBLOCK : 0), 0);
	int one = 1, rc;
	if (fd < 0)
		return printf("%d err %s\n", n, strerrorname_np(errno)), 1;
	if (strcmp(what, "bindnr") != 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (nb && !srv) {
		rc = connect(fd, (struct sockaddr *)&ss, len);
		if (rc != 0 && errno == EINPROGRESS) {
			struct pollfd pfd = {fd, POLLOUT, 0};
			int err = 0;
			socklen_t el = sizeof err;
			if (poll(&pfd, 1, 10000) != 1)
				return printf("%d err poll-timeout\n", n), 1;
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
				err = errno;
			rc = err ? -1 : 0;
			errno = err;
		}
	} else if (strcmp(what, "connect") == 0)
		rc = connect(fd, (struct sockaddr *)&ss, len);
	else
		rc = bind(fd, (struct sockaddr *)&ss, len);
	if (rc == 0 && (srv || strcmp(what, "listen") == 0))
		rc = listen(fd, 16);
	if (rc != 0)
		return printf("%d err %s\n", n, strerrorname_np(errno)), 1;
	printf("%d ok", n);
	show(fd, v6, getsockname);
	show(fd, v6, getpeername);
	printf(nb && !srv && (fcntl(fd, F_GETFL) & O_NONBLOCK) ? " nonblock\n" : "\n");
	return srv ? serve(n, fd, v6, nb) : 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1, n = 0; i < argc; n++) {
		if (strcmp(argv[i], "hold") == 0) {
			char c;
			while (read(0, &c, 1) > 0)
				;
			i++;
			continue;
		}
		if (i + 4 > argc)
			return fprintf(stderr, "usage: sockprobe [KIND OP IP PORT | hold]...\n"), 2;
		if (op(n, argv[i], argv[i + 1], argv[i + 2], argv[i + 3]))
			return 1;
		i += 4;
	}
	return 0;
}
