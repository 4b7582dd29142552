/* A process doing what the recorder must not disturb: its own signal handlers (SIGUSR1
 * raised, SIGALRM from a timer interrupting a blocking read, SIGSEGV from a guard page it
 * protected itself, recovered with siglongjmp), fork (the child writes heap memory and
 * exits with a code the parent checks), exec (of itself, with --exec-child, which writes
 * heap memory and exits through atexit handlers), and exit through atexit. Prints what
 * happened; exits 1 on any unexpected outcome. */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t g_usr1, g_alarm;
static sigjmp_buf g_jump;

static void OnUsr1(int sig) {
  (void)sig;
  g_usr1++;
}
static void OnAlarm(int sig) {
  (void)sig;
  g_alarm++;
}
static void OnSegv(int sig) {
  (void)sig;
  siglongjmp(g_jump, 1);
}
static void AtExit(void) { printf("atexit ran\n"); }

static uint64_t Churn(size_t bytes, unsigned seed) {
  unsigned char* p = malloc(bytes);
  if (p == NULL) exit(1);
  for (size_t i = 0; i < bytes; ++i) p[i] = (unsigned char)(i * seed);
  uint64_t sum = 0;
  for (size_t i = seed; i < bytes; i += 4096) sum += p[i];
  free(p);
  return sum;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--exec-child") == 0) {
    atexit(AtExit);
    printf("exec child sum %llu\n", (unsigned long long)Churn(4 << 20, 3));
    return 7;
  }
  atexit(AtExit);
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnUsr1;
  sigaction(SIGUSR1, &sa, NULL);
  sa.sa_handler = OnAlarm; /* no SA_RESTART: the read is interrupted */
  sigaction(SIGALRM, &sa, NULL);
  sa.sa_handler = OnSegv;
  sa.sa_flags = SA_NODEFER;
  sigaction(SIGSEGV, &sa, NULL);

  for (int i = 0; i < 5; ++i) raise(SIGUSR1);
  printf("usr1 handled %d\n", (int)g_usr1);

  int fds[2];
  if (pipe(fds) != 0) return 1;
  struct itimerval t = {{0, 0}, {0, 20000}};
  setitimer(ITIMER_REAL, &t, NULL);
  char byte;
  const ssize_t n = read(fds[0], &byte, 1);
  printf("read interrupted %d (alarm %d)\n", n < 0 && errno == EINTR, (int)g_alarm);

  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char* guard =
      mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (guard == MAP_FAILED) return 1;
  memset(guard, 1, 4 * page);
  mprotect(guard + 2 * page, page, PROT_NONE);
  int caught = 0;
  for (int i = 0; i < 3; ++i) {
    if (sigsetjmp(g_jump, 1) == 0) {
      guard[2 * page + 8] = 2; /* faults: the program's own handler recovers */
    } else {
      caught++;
    }
  }
  printf("own segv caught %d\n", caught);

  printf("parent sum %llu\n", (unsigned long long)Churn(8 << 20, 5));
  const pid_t child = fork();
  if (child == 0) _exit((int)(Churn(6 << 20, 7) % 200) + 1);
  int status = 0;
  waitpid(child, &status, 0);
  printf("fork child %s %d\n", WIFEXITED(status) ? "exit" : "signal",
         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));

  const pid_t execd = fork();
  if (execd == 0) {
    char* args[] = {argv[0], "--exec-child", NULL};
    execv("/proc/self/exe", args);
    _exit(99);
  }
  waitpid(execd, &status, 0);
  printf("exec child %s %d\n", WIFEXITED(status) ? "exit" : "signal",
         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  return 0;
}
