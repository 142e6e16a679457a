/* Stand-in core worker (the C++ core of every Ray worker process). Sources
 * in test/fakeray/SOURCES.md. As Ray's: its gRPC server binds 0.0.0.0 on the
 * worker port the raylet leased it; it connects to the raylet at
 * node_ip:node_manager_port and registers; it exits 1 when it cannot, and
 * when the raylet goes away (a worker never outlives its raylet).
 */
#define _GNU_SOURCE
#include "status.h"

#include <signal.h>

static struct sockop srv, conn;
static int argc_g, registered;
static char **argv_g;
static const char *session, *name;
static char state[32] = "starting";

static void write_status(void) {
	char tmp[4096];
	FILE *f = status_open(session, name, tmp, sizeof tmp);
	if (!f)
		return;
	fprintf(f, "{\"name\":");
	jstr(f, name);
	fprintf(f, ",\"pid\":%d,\"ppid\":%d,\"state\":\"%s\",\"registered\":%s,\"argv\":", (int)getpid(), (int)getppid(), state, registered ? "true" : "false");
	jargv(f, argc_g, argv_g);
	fprintf(f, ",\"env\":");
	jenv(f);
	fprintf(f, ",\"binds\":[");
	if (srv.done)
		jop(f, &srv);
	fprintf(f, "],\"connect\":");
	if (conn.done)
		jop(f, &conn);
	else
		fprintf(f, "null");
	fprintf(f, "}\n");
	status_commit(f, session, name, tmp);
}

int main(int argc, char **argv) {
	argc_g = argc, argv_g = argv;
	session = flag(argc, argv, "session_dir", NULL);
	name = flag(argc, argv, "name", "core_worker");
	if (!session) {
		fprintf(stderr, "core_worker: --session_dir is required\n");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	int port = atoi(flag(argc, argv, "worker_port", "0"));
	int lfd = tcp_op("bind", "0.0.0.0", port, &srv);
	if (lfd < 0) {
		snprintf(state, sizeof state, "exited");
		write_status();
		return 1;
	}
	const char *ip = flag(argc, argv, "node_ip_address", "127.0.0.1");
	int fd = tcp_op("connect", ip, atoi(flag(argc, argv, "node_manager_port", "0")), &conn);
	if (fd < 0) {
		fprintf(stderr, "%s: connect to the raylet at %s:%s: %s\n", name, ip, flag(argc, argv, "node_manager_port", "0"), strerror(conn.err));
		snprintf(state, sizeof state, "exited");
		write_status();
		return 1;
	}
	char msg[64], buf[64];
	int n = snprintf(msg, sizeof msg, "register %d %d\n", (int)getpid(), port);
	if (write(fd, msg, (size_t)n) == n && read(fd, buf, sizeof buf) >= 3 && memcmp(buf, "ok\n", 3) == 0)
		registered = 1;
	snprintf(state, sizeof state, registered ? "running" : "exited");
	write_status();
	if (!registered)
		return 1;
	while (read(fd, buf, sizeof buf) > 0) /* until the raylet is gone */
		;
	snprintf(state, sizeof state, "exited");
	write_status();
	return 1;
}
