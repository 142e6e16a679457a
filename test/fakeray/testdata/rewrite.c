/* Test-only LD_PRELOAD library: connect() to 127.0.0.9 goes to 127.0.0.1
 * instead. TestPreloadReachesNatives uses it to prove the stand-in's native
 * programs call libc's connect() and inherit LD_PRELOAD through the tree,
 * as the rayvast shim's native layer needs. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

int connect(int fd, const struct sockaddr *sa, socklen_t len) {
	static int (*real)(int, const struct sockaddr *, socklen_t);
	if (!real)
		real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
	struct sockaddr_in s;
	if (sa && sa->sa_family == AF_INET && len >= sizeof s) {
		memcpy(&s, sa, sizeof s);
		if (s.sin_addr.s_addr == inet_addr("127.0.0.9")) {
			s.sin_addr.s_addr = inet_addr("127.0.0.1");
			return real(fd, (const struct sockaddr *)&s, sizeof s);
		}
	}
	return real(fd, sa, len);
}
