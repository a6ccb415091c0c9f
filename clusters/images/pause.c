/*
 * drakit's pause: the process that holds a pod sandbox's namespaces open. It does nothing but
 * wait: SIGINT or SIGTERM end it with status 0, and as PID 1 of a pod with a shared process
 * namespace it reaps the orphans handed to it. Built static at image-build time
 * (clusters/images/build.py), so its image needs no C library.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
    (void)sig;
    _exit(0);
}

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(int argc, char **argv) {
    struct sigaction on_stop, on_child;

    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        puts("drakit pause");
        return 0;
    }
    memset(&on_stop, 0, sizeof on_stop);
    on_stop.sa_handler = stop;
    memset(&on_child, 0, sizeof on_child);
    on_child.sa_handler = reap;
    on_child.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    if (sigaction(SIGINT, &on_stop, NULL) || sigaction(SIGTERM, &on_stop, NULL) || sigaction(SIGCHLD, &on_child, NULL)) {
        perror("pause: sigaction");
        return 1;
    }
    for (;;) {
        pause();
    }
}
