/* Stand-in raylet (and, built as gcs_server, the head's GCS). Sources in
 * test/fakeray/SOURCES.md. What it does, as Ray's does:
 *  - binds 0.0.0.0 on --node_manager_port and --object_manager_port (the
 *    raylet's gRPC servers bind every interface) and listens on the AF_UNIX
 *    --raylet_socket_name; any failure is fatal (exit 1);
 *  - starts the runtime-env agent and the dashboard agent from
 *    --runtime_env_agent_command / --dashboard_agent_command and fate-shares
 *    with them: when one exits, the raylet kills the rest and exits 1;
 *  - connects to node_ip:--runtime_env_agent_port (the raylet's HTTP client
 *    of the runtime-env agent) and records the outcome;
 *  - leases --num_prestart_python_workers core workers, each taking a free
 *    port of --worker_port_list ("No available ports" when none is free),
 *    answers their registration on the node manager port, and connects to
 *    each at node_ip:its worker port (the raylet is a client of its workers);
 *  - on SIGTERM stops its children and exits 0 (graceful shutdown).
 */
#define _GNU_SOURCE
#include "status.h"

#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#define MAXKIDS 256
#define MAXCONNS 256

struct kid {
	char name[64];
	pid_t pid;
	int agent; /* fate-shared */
	int port;  /* worker port, 0 for agents */
	int exited, status;
};

static struct kid kids[MAXKIDS];
static int nkids;
static volatile sig_atomic_t got_term;
static int argc_g;
static char **argv_g;
static const char *session, *role;
static struct sockop binds[3], agent_conn, worker_conns[128];
static int nworker_conns;
static const char *node_ip;
static int nbinds, registered, no_ports, nfree;
static int free_ports[1024];
static char state[32] = "starting", exit_reason[256] = "";

static void on_term(int s) { (void)s; got_term = 1; }

static void write_status(void) {
	char tmp[4096];
	FILE *f = status_open(session, role, tmp, sizeof tmp);
	if (!f)
		return;
	fprintf(f, "{\"name\":\"%s\",\"pid\":%d,\"ppid\":%d,\"state\":\"%s\",\"exit_reason\":", role, (int)getpid(), (int)getppid(), state);
	jstr(f, exit_reason);
	fprintf(f, ",\"argv\":");
	jargv(f, argc_g, argv_g);
	fprintf(f, ",\"env\":");
	jenv(f);
	fprintf(f, ",\"binds\":[");
	for (int i = 0; i < nbinds; i++) {
		if (i)
			fputc(',', f);
		jop(f, &binds[i]);
	}
	fprintf(f, "],\"runtime_env_agent_connect\":");
	if (agent_conn.done)
		jop(f, &agent_conn);
	else
		fprintf(f, "null");
	fprintf(f, ",\"worker_connects\":[");
	for (int i = 0; i < nworker_conns; i++) {
		if (i)
			fputc(',', f);
		jop(f, &worker_conns[i]);
	}
	fprintf(f, "]");
	fprintf(f, ",\"registered_workers\":%d,\"no_available_ports\":%d,\"children\":[", registered, no_ports);
	for (int i = 0; i < nkids; i++) {
		fprintf(f, "%s{\"name\":\"%s\",\"pid\":%d,\"port\":%d,\"exited\":%s,\"exit_code\":%d}", i ? "," : "",
			kids[i].name, (int)kids[i].pid, kids[i].port, kids[i].exited ? "true" : "false",
			kids[i].exited ? (WIFEXITED(kids[i].status) ? WEXITSTATUS(kids[i].status) : -WTERMSIG(kids[i].status)) : 0);
	}
	fprintf(f, "]}\n");
	status_commit(f, session, role, tmp);
}

/* split parses a command made by Python's subprocess.list2cmdline (what
 * Ray passes): spaces separate, double quotes group. Enough for paths. */
static char **split(const char *cmd) {
	static char buf[8][8192];
	static int used;
	char *b = buf[used++ % 8];
	char **out = calloc(256, sizeof *out);
	int n = 0, inq = 0;
	char *w = b, *start = NULL;
	for (const char *p = cmd;; p++) {
		if (*p == '"') {
			inq = !inq;
			if (!start)
				start = w;
			continue;
		}
		if (*p == 0 || (*p == ' ' && !inq)) {
			if (start) {
				*w++ = 0;
				if (n < 255)
					out[n++] = start;
				start = NULL;
			}
			if (*p == 0)
				break;
			continue;
		}
		if (!start)
			start = w;
		*w++ = *p;
	}
	return out;
}

static pid_t spawn(char **av, const char *name, int agent, int port) {
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGTERM, SIG_DFL);
		execvp(av[0], av);
		fprintf(stderr, "raylet: exec %s: %s\n", av[0], strerror(errno));
		_exit(127);
	}
	if (pid > 0 && nkids < MAXKIDS) {
		struct kid *k = &kids[nkids++];
		snprintf(k->name, sizeof k->name, "%s", name);
		k->pid = pid;
		k->agent = agent;
		k->port = port;
	}
	return pid;
}

static void stop_kids(void) {
	for (int i = 0; i < nkids; i++)
		if (!kids[i].exited)
			kill(kids[i].pid, SIGTERM);
	for (int t = 0; t < 20; t++) { /* 2 s grace, then SIGKILL */
		int alive = 0;
		for (int i = 0; i < nkids; i++) {
			if (kids[i].exited)
				continue;
			if (waitpid(kids[i].pid, &kids[i].status, WNOHANG) == kids[i].pid)
				kids[i].exited = 1;
			else
				alive = 1;
		}
		if (!alive)
			return;
		usleep(100000);
	}
	for (int i = 0; i < nkids; i++)
		if (!kids[i].exited)
			kill(kids[i].pid, SIGKILL);
}

static void die(const char *why) {
	snprintf(state, sizeof state, "exited");
	snprintf(exit_reason, sizeof exit_reason, "%s", why);
	fprintf(stderr, "%s: %s\n", role, why);
	stop_kids();
	write_status();
	exit(1);
}

/* port_free is Ray's CheckPortFree: a port is free when it can be bound. */
static int port_free(int port) {
	struct sockop o;
	int fd = tcp_op("bind", "0.0.0.0", port, &o);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

/* next_port is WorkerPool::GetNextFreePort: try each pooled port once. */
static int next_port(void) {
	for (int i = 0; i < nfree; i++) {
		int p = free_ports[0];
		memmove(free_ports, free_ports + 1, (size_t)(nfree - 1) * sizeof *free_ports);
		if (port_free(p)) {
			nfree--;
			return p;
		}
		free_ports[nfree - 1] = p;
	}
	return -1;
}

static void lease_worker(int i, const char *cmd, const char *ip, const char *nm_port) {
	int port = next_port();
	if (port < 0) {
		no_ports++;
		fprintf(stderr, "raylet: No available ports. Please specify a wider port range using --min-worker-port and --max-worker-port.\n");
		return;
	}
	char name[64], a1[128], a2[64], a3[64], a4[4096], a5[96];
	snprintf(name, sizeof name, "core_worker_%d", i);
	snprintf(a1, sizeof a1, "--node_ip_address=%s", ip);
	snprintf(a2, sizeof a2, "--node_manager_port=%s", nm_port);
	snprintf(a3, sizeof a3, "--worker_port=%d", port);
	snprintf(a4, sizeof a4, "--session_dir=%s", session);
	snprintf(a5, sizeof a5, "--name=%s", name);
	char **base = split(cmd);
	char *av[300];
	int n = 0;
	while (base[n] && n < 290) {
		av[n] = base[n];
		n++;
	}
	av[n++] = a1, av[n++] = a2, av[n++] = a3, av[n++] = a4, av[n++] = a5, av[n] = NULL;
	spawn(av, name, 0, port);
}

static int bind_or_die(const char *port) {
	if (!port || atoi(port) <= 0)
		return -1;
	int fd = tcp_op("bind", "0.0.0.0", atoi(port), &binds[nbinds]);
	nbinds++;
	write_status();
	if (fd < 0) {
		char why[128];
		snprintf(why, sizeof why, "bind 0.0.0.0:%s: %s", port, strerror(binds[nbinds - 1].err));
		die(why);
	}
	return fd;
}

static void bind_unix(const char *path) {
	struct sockaddr_un su;
	memset(&su, 0, sizeof su);
	su.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof su.sun_path) {
		char why[512];
		snprintf(why, sizeof why, "AF_UNIX path longer than %zu bytes: %s", sizeof su.sun_path - 1, path);
		die(why);
	}
	strcpy(su.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unlink(path);
	if (fd < 0 || bind(fd, (void *)&su, sizeof su) != 0 || listen(fd, 16) != 0) {
		char why[512];
		snprintf(why, sizeof why, "bind unix %s: %s", path, strerror(errno));
		die(why);
	}
}

static void reap(void) {
	int st;
	pid_t pid;
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (int i = 0; i < nkids; i++) {
			if (kids[i].pid != pid)
				continue;
			kids[i].exited = 1;
			kids[i].status = st;
			write_status();
			if (kids[i].agent) {
				char why[160];
				snprintf(why, sizeof why, "The raylet fate shares with the agent: %s exited", kids[i].name);
				die(why);
			}
			if (kids[i].port && nfree < 1024)
				free_ports[nfree++] = kids[i].port; /* MarkPortAsFree */
		}
	}
}

int main(int argc, char **argv) {
	argc_g = argc, argv_g = argv;
	role = basename(strdup(argv[0]));
	session = flag(argc, argv, "session_dir", NULL);
	if (!session) {
		fprintf(stderr, "%s: --session_dir is required\n", role);
		return 1;
	}
	signal(SIGTERM, on_term);
	signal(SIGPIPE, SIG_IGN);
	struct pollfd pf[MAXCONNS];
	int np = 0;
	if (strcmp(role, "gcs_server") == 0) {
		pf[np++] = (struct pollfd){.fd = bind_or_die(flag(argc, argv, "gcs_server_port", "6379")), .events = POLLIN};
	} else {
		const char *ip = node_ip = flag(argc, argv, "node_ip_address", "127.0.0.1");
		const char *nm = flag(argc, argv, "node_manager_port", "0");
		int nm_fd = bind_or_die(nm);
		if (nm_fd < 0)
			die("--node_manager_port=0 (a random port) is not modelled");
		pf[np++] = (struct pollfd){.fd = nm_fd, .events = POLLIN};
		int om = bind_or_die(flag(argc, argv, "object_manager_port", "0"));
		if (om >= 0)
			pf[np++] = (struct pollfd){.fd = om, .events = POLLIN};
		bind_unix(flag(argc, argv, "raylet_socket_name", ""));
		const char *list = flag(argc, argv, "worker_port_list", "");
		for (char *p = strdup(list), *t; (t = strsep(&p, ",")) && nfree < 1024;)
			if (*t)
				free_ports[nfree++] = atoi(t);
		if (!*list) {
			int lo = atoi(flag(argc, argv, "min_worker_port", "0")), hi = atoi(flag(argc, argv, "max_worker_port", "0"));
			for (int p = lo; lo > 0 && p <= hi && nfree < 1024; p++)
				free_ports[nfree++] = p;
		}
		const char *rea = flag(argc, argv, "runtime_env_agent_command", "");
		const char *da = flag(argc, argv, "dashboard_agent_command", "");
		if (*rea)
			spawn(split(rea), "runtime_env_agent", 1, 0);
		if (*da)
			spawn(split(da), "dashboard_agent", 1, 0);
		snprintf(state, sizeof state, "agents_started");
		write_status();
		/* The raylet's client of the runtime-env agent: retry until it listens. */
		int rea_port = atoi(flag(argc, argv, "runtime_env_agent_port", "0"));
		for (int t = 0; rea_port > 0 && t < 200 && !got_term; t++) {
			reap();
			int fd = tcp_op("connect", ip, rea_port, &agent_conn);
			if (fd >= 0) {
				close(fd);
				break;
			}
			if (agent_conn.err != ECONNREFUSED)
				break; /* unreachable: retrying changes nothing */
			usleep(50000);
		}
		const char *wc = flag(argc, argv, "python_worker_command", "");
		int n = atoi(flag(argc, argv, "num_prestart_python_workers", "0"));
		for (int i = 0; *wc && i < n && i < 128; i++)
			lease_worker(i, wc, ip, nm);
	}
	snprintf(state, sizeof state, "running");
	write_status();
	while (!got_term) {
		reap();
		if (poll(pf, (nfds_t)np, 100) <= 0)
			continue;
		for (int i = 0; i < np; i++) {
			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (i < nbinds) { /* a listener: accept and keep the connection */
				int c = accept4(pf[i].fd, NULL, NULL, SOCK_CLOEXEC);
				if (c >= 0 && np < MAXCONNS)
					pf[np++] = (struct pollfd){.fd = c, .events = POLLIN};
				else if (c >= 0)
					close(c);
				continue;
			}
			char buf[256];
			ssize_t r = read(pf[i].fd, buf, sizeof buf);
			if (r <= 0) {
				close(pf[i].fd);
				pf[i--] = pf[--np];
				continue;
			}
			if (r >= 8 && memcmp(buf, "register", 8) == 0) {
				registered++;
				/* The raylet is a client of each worker's gRPC server at
				 * node IP:worker port (lease grants, kills). */
				buf[r < (ssize_t)sizeof buf ? r : (ssize_t)sizeof buf - 1] = 0;
				int wpid = 0, wport = 0;
				if (sscanf(buf, "register %d %d", &wpid, &wport) == 2 && wport > 0 && nworker_conns < 128) {
					int wfd = tcp_op("connect", node_ip, wport, &worker_conns[nworker_conns++]);
					if (wfd >= 0)
						close(wfd);
				}
				write_status();
			}
			(void)!write(pf[i].fd, "ok\n", 3);
		}
	}
	snprintf(state, sizeof state, "exited");
	snprintf(exit_reason, sizeof exit_reason, "received SIGTERM");
	stop_kids();
	write_status();
	return 0;
}
