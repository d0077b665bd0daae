//go:build cgo

// The init of `conch run`'s session, started from a constructor: before
// the Go runtime of this process starts, while the process is small and
// has one thread (docs/containment.md#conch-run-starts-its-init-early).
// The Go start (prestart.go) does the same later, about 2 ms into the
// process, in a build without cgo or where this one did not start it.
//
// What it does is what prestart.start does with Attr: a clone into new
// user, PID and mount namespaces (and a network namespace when wanted),
// the child in a process group of its own, SIGKILL at its parent's
// death, this process's ids mapped to themselves (every id for root),
// the capabilities an unprivileged init needs as ambient ones, and an
// exec of this binary as `__init` with prestart.Env and its socket on
// descriptor 3. TestEarlyStartMatches holds the two starts to the same
// result, TestEarlyWanted the two readings of the command line.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

// What the constructor started, for prestart's initialisation: the
// init's pid and this process's end of its socket (-1: none), a pipe
// that reads its end once the child has exec'd (or died), whether it has
// a network namespace of its own, and whether the command line asked for
// one at all (1: the Go start must not try again).
int conch_early_pid = -1;
int conch_early_fd = -1;
int conch_early_execd = -1;
int conch_early_netns = 0;
int conch_early_tried = 0;

static int tun_usable(void) {
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

// conch_early_wanted is prestart.wanted: whether argv is a conch run
// that starts an init with the defaults of the flags it gives, and
// whether that init gets a network namespace (*netns). tun reports
// whether the TUN device opens (tests give their own).
int conch_early_wanted(int argc, char **argv, int (*tun)(void), int *netns) {
	*netns = 0;
	if (argc < 3 || strcmp(argv[1], "run") != 0)
		return 0;
	const char *containment = NULL, *provider = NULL, *network = NULL, *sandbox = NULL;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0 || a[0] != '-')
			break;
		while (*a == '-')
			a++;
		const char *eq = strchr(a, '=');
		size_t n = eq ? (size_t)(eq - a) : strlen(a);
		const char *value = eq ? eq + 1 : "";
#define NAMED(s) (n == sizeof(s) - 1 && strncmp(a, s, n) == 0)
		if (NAMED("h") || NAMED("help"))
			return 0;
		if (!NAMED("containment") && !NAMED("provider") && !NAMED("network") && !NAMED("sandbox"))
			continue;
		if (!eq && i + 1 < argc)
			value = argv[++i];
		if (NAMED("containment"))
			containment = value;
		else if (NAMED("provider"))
			provider = value;
		else if (NAMED("network"))
			network = value;
		else
			sandbox = value;
#undef NAMED
	}
	if ((containment && strcmp(containment, "off") == 0) || (provider && strcmp(provider, "local") == 0))
		return 0;
	int given = network != NULL;
	if (!given)
		network = sandbox && strcmp(sandbox, "full-access") == 0 ? "on" : "public";
	*netns = strcmp(network, "on") != 0;
	if (*netns && !given && !tun())
		*netns = 0;
	return 1;
}

static int write_file(const char *path, const char *s, size_t n) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t w = write(fd, s, n);
	close(fd);
	return w == (ssize_t)n ? 0 : -1;
}

// identity_map writes to out the ranges of this namespace's map file
// (/proc/self/uid_map or gid_map), each mapped to itself, as
// prestart.identityMap does: every id where the file gives none.
static size_t identity_map(const char *file, char *out, size_t cap) {
	size_t len = 0;
	FILE *f = fopen(file, "re");
	if (f) {
		unsigned long inside, outside, size;
		while (fscanf(f, "%lu %lu %lu", &inside, &outside, &size) == 3) {
			if (size == 0 || inside > 0xffffffffUL || size > 0xffffffffUL)
				continue;
			int k = snprintf(out + len, cap - len, "%lu %lu %lu\n", inside, inside, size);
			if (k < 0 || (size_t)k >= cap - len)
				break;
			len += (size_t)k;
		}
		fclose(f);
	}
	if (len == 0)
		len = (size_t)snprintf(out, cap, "0 0 4294967295\n");
	return len;
}

static int setgroups_allowed(void) {
	char b[8] = {0};
	int fd = open("/proc/self/setgroups", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	ssize_t n = read(fd, b, sizeof b - 1);
	close(fd);
	return !(n >= 4 && strncmp(b, "deny", 4) == 0);
}

// write_maps gives the child's user namespace its id maps (prestart.Attr).
static int write_maps(pid_t pid, uid_t uid, gid_t gid) {
	char path[64], buf[4096];
	size_t n;
	if (uid == 0) {
		snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
		n = identity_map("/proc/self/uid_map", buf, sizeof buf);
		if (write_file(path, buf, n) < 0)
			return -1;
		if (!setgroups_allowed()) {
			snprintf(path, sizeof path, "/proc/%d/setgroups", (int)pid);
			if (write_file(path, "deny", 4) < 0)
				return -1;
		}
		snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
		n = identity_map("/proc/self/gid_map", buf, sizeof buf);
		return write_file(path, buf, n);
	}
	snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
	n = (size_t)snprintf(buf, sizeof buf, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if (write_file(path, buf, n) < 0)
		return -1;
	snprintf(path, sizeof path, "/proc/%d/setgroups", (int)pid);
	if (write_file(path, "deny", 4) < 0)
		return -1;
	snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
	n = (size_t)snprintf(buf, sizeof buf, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	return write_file(path, buf, n);
}

// child runs in the clone until its exec: it waits for its id maps,
// takes the attributes prestart.Attr gives, and becomes the init.
static void child(int ready, int sock, int null, uid_t uid, const char *exe) {
	char c;
	if (read(ready, &c, 1) != 1)
		_exit(127); // the parent could not map the ids
	if (setpgid(0, 0) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		_exit(127);
	if (uid != 0) {
		// CAP_SYS_ADMIN, CAP_SETPCAP, CAP_SYS_PTRACE, CAP_DAC_OVERRIDE,
		// CAP_NET_ADMIN: Attr's AmbientCaps.
		static const int caps[] = {CAP_SYS_ADMIN, CAP_SETPCAP, CAP_SYS_PTRACE, CAP_DAC_OVERRIDE, CAP_NET_ADMIN};
		struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
		struct __user_cap_data_struct d[2];
		if (syscall(SYS_capget, &h, d) < 0)
			_exit(127);
		for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
			d[caps[i] / 32].inheritable |= 1u << (caps[i] % 32);
		if (syscall(SYS_capset, &h, d) < 0)
			_exit(127);
		for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
			if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, caps[i], 0, 0) < 0)
				_exit(127);
	}
	// Descriptors 0 and 1 read and write nothing, 2 stays this
	// process's, 3 is the socket (dup2 clears its close-on-exec).
	if (dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(sock, 3) < 0)
		_exit(127);
	char *argv[] = {(char *)exe, "__init", NULL};
	char *envp[] = {"GOMAXPROCS=1", "GOGC=off", NULL};
	execve("/proc/self/exe", argv, envp);
	_exit(127);
}

__attribute__((constructor)) static void conch_early(int argc, char **argv) {
	int netns;
	if (!conch_early_wanted(argc, argv, tun_usable, &netns))
		return;
	conch_early_tried = 1;
	// Descriptors 0-2 closed would be taken by the ones below and then
	// overwritten in the child: leave such a start to Go, whose runtime
	// opens /dev/null in their place first.
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0) {
			conch_early_tried = 0;
			return;
		}
	char exe[4096];
	ssize_t en = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (en <= 0)
		return;
	exe[en] = 0;
	int sv[2], ready[2], execd[2], null = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	// A socket, not a pipe: the write below must not raise SIGPIPE (whose
	// default ends this process) for a child already gone.
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ready) < 0)
		goto closesock;
	if (pipe2(execd, O_CLOEXEC) < 0)
		goto closepipe;
	if ((null = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
		goto closeexecd;
	uid_t uid = getuid();
	gid_t gid = getgid();
	long flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | SIGCHLD;
	if (netns)
		flags |= CLONE_NEWNET;
	// A fork (no stack given: the child runs on a copy of this one).
	pid_t pid = (pid_t)syscall(SYS_clone, flags, 0, 0, 0, 0);
	if (pid == 0) {
		// execd[1] stays open in the child until its exec closes it.
		close(ready[1]);
		close(execd[0]);
		child(ready[0], sv[1], null, uid, exe);
	}
	if (pid < 0)
		goto closenull;
	close(ready[0]);
	close(execd[1]);
	int ok = write_maps(pid, uid, gid) == 0 && send(ready[1], "x", 1, MSG_NOSIGNAL) == 1;
	close(ready[1]);
	close(null);
	close(sv[1]);
	if (!ok) {
		close(sv[0]);
		close(execd[0]);
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		return;
	}
	conch_early_pid = pid;
	conch_early_fd = sv[0];
	conch_early_execd = execd[0];
	conch_early_netns = netns;
	return;
closenull:
	close(null);
closeexecd:
	close(execd[0]);
	close(execd[1]);
closepipe:
	close(ready[0]);
	close(ready[1]);
closesock:
	close(sv[0]);
	close(sv[1]);
}
