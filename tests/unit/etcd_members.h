/*
 * A three-member etcd on loopback for the unit tests that need a real one:
 * private ports and data directory, members started and stopped by pid.
 * Header-only (static functions): each test binary is one source file.
 */
#ifndef OFCD_TEST_ETCD_MEMBERS_H
#define OFCD_TEST_ETCD_MEMBERS_H

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define ETCD_BIN "/usr/bin/etcd"
#define MEMBERS  3

/** The members: their data under dir, their client URLs, their pids (0: stopped). */
struct etcd_members {
	char dir[64];
	pid_t pid[MEMBERS];
	char client[MEMBERS][128];
};

/* A port the kernel just handed out, free again (a small race, fine for a test). */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int port = -1;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* Creates the data directory and starts the members (they elect a raft leader soon after). */
static void start_members(struct etcd_members *k)
{
	snprintf(k->dir, sizeof(k->dir), "/tmp/ofcd-test-etcd-XXXXXX");
	assert_non_null(mkdtemp(k->dir));
	char peer[MEMBERS][128], initial[512] = "";
	for (int i = 0; i < MEMBERS; i++) {
		snprintf(k->client[i], sizeof(k->client[i]), "http://127.0.0.1:%d", free_port());
		snprintf(peer[i], sizeof(peer[i]), "http://127.0.0.1:%d", free_port());
		size_t n = strlen(initial);
		snprintf(initial + n, sizeof(initial) - n, "%se%d=%s", i ? "," : "", i, peer[i]);
	}
	for (int i = 0; i < MEMBERS; i++) {
		char name[16], data[96], log[96];
		snprintf(name, sizeof(name), "e%d", i);
		snprintf(data, sizeof(data), "%s/e%d", k->dir, i);
		snprintf(log, sizeof(log), "%s/e%d.log", k->dir, i);
		pid_t parent = getpid();
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			/* Gone with the test, even when a failed setup skips the teardown. */
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
				_exit(126);
			int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			dup2(fd, 1);
			dup2(fd, 2);
			execl(ETCD_BIN, ETCD_BIN, "--name", name, "--data-dir", data,
			      "--listen-client-urls", k->client[i], "--advertise-client-urls",
			      k->client[i], "--listen-peer-urls", peer[i],
			      "--initial-advertise-peer-urls", peer[i], "--initial-cluster",
			      initial, "--initial-cluster-state", "new", (char *)NULL);
			_exit(127);
		}
		k->pid[i] = pid;
	}
}

/* Kills member i and reaps it. */
static void stop_member(struct etcd_members *k, int i)
{
	if (k->pid[i] > 0) {
		kill(k->pid[i], SIGKILL);
		waitpid(k->pid[i], NULL, 0);
		k->pid[i] = 0;
	}
}

/* Stops every member and removes the data directory. */
static int remove_members(struct etcd_members *k)
{
	char cmd[128];
	for (int i = 0; i < MEMBERS; i++)
		stop_member(k, i);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", k->dir);
	return system(cmd) == 0 ? 0 : -1;
}

#endif
