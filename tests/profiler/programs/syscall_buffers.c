/* Heap buffers passed to the kernel: write/pwrite/writev/raw syscall(SYS_write) into a
 * temporary file and a pipe, read back with read/pread/readv/raw syscall(SYS_read) and
 * syscall(SYS_pread64), compared with memcpy'd copies. The buffers are rewritten between
 * rounds (so that a recorder re-protecting pages finds them written). Prints a checksum;
 * on any short or failed call prints the call and errno and exits 3 (4 for EFAULT).
 * With --bad-pointer it first makes one read(2) into an unmapped address on purpose (it
 * fails with EFAULT), which a recorder counting EFAULT returns must report. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "profiler/phasemark.h"

enum { kBytes = 2 << 20, kRounds = 8 };

static void Check(long got, long want, const char* what) {
  if (got == want) return;
  const int err = errno;
  fprintf(stderr, "syscall_buffers: %s returned %ld, expected %ld (%s)\n", what, got, want,
          got < 0 ? strerror(err) : "short");
  exit(got < 0 && err == EFAULT ? 4 : 3);
}

static void Fill(unsigned char* p, size_t n, unsigned seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (unsigned char)x;
  }
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--bad-pointer") == 0) {
    const int zero = open("/dev/zero", O_RDONLY);
    void* volatile bad = (void*)16; /* volatile: the compiler must not see the bad pointer */
    const long n = read(zero, bad, 8);
    printf("bad pointer read %ld (%s)\n", n, n < 0 ? strerror(errno) : "no error");
    close(zero);
  }
  char path[] = "/tmp/tiergym_syscall_buffers.XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) {
    perror("mkstemp");
    return 3;
  }
  unlink(path);
  int pipefd[2];
  Check(pipe(pipefd), 0, "pipe");
  unsigned char* src = malloc(kBytes);
  unsigned char* dst = malloc(kBytes);
  unsigned char* copy = malloc(kBytes);
  unsigned char* small = malloc(60000);
  if (src == NULL || dst == NULL || copy == NULL || small == NULL) return 3;
  uint64_t checksum = 0;
  for (int round = 0; round < kRounds; ++round) {
    phasemark();
    Fill(src, kBytes, (unsigned)round);
    memcpy(copy, src, kBytes);
    const long half = kBytes / 2, quarter = kBytes / 4;
    Check(pwrite(fd, src, (size_t)half, 0), half, "pwrite");
    Check(lseek(fd, half, SEEK_SET), half, "lseek");
    Check(write(fd, src + half, (size_t)quarter), quarter, "write");
    struct iovec out[2] = {{src + half + quarter, (size_t)quarter / 2},
                           {src + half + quarter + quarter / 2, (size_t)quarter / 2}};
    Check(writev(fd, out, 2), quarter, "writev");

    memset(dst, 0xa5, kBytes); /* written again: the pages are dirty before the reads */
    Check(pread(fd, dst, (size_t)quarter, 0), quarter, "pread");
    Check(syscall(SYS_pread64, fd, dst + quarter, (size_t)quarter, (long)quarter), quarter,
          "syscall(SYS_pread64)");
    Check(lseek(fd, half, SEEK_SET), half, "lseek");
    Check(syscall(SYS_read, fd, dst + half, (size_t)quarter), quarter, "syscall(SYS_read)");
    struct iovec in[3] = {{dst + half + quarter, 4096},
                          {dst + half + quarter + 4096, (size_t)quarter / 2 - 4096},
                          {dst + half + quarter + quarter / 2, (size_t)quarter / 2}};
    Check(readv(fd, in, 3), quarter, "readv");
    if (memcmp(dst, copy, kBytes) != 0) {
      fprintf(stderr, "syscall_buffers: round %d: data read back differs\n", round);
      return 3;
    }
    /* Through a pipe with raw system calls, in pieces smaller than the pipe. */
    for (int piece = 0; piece < 8; ++piece) {
      Fill(small, 60000, (unsigned)(round * 8 + piece));
      Check(syscall(SYS_write, pipefd[1], small, 60000), 60000, "syscall(SYS_write) to a pipe");
      memset(small, 0, 60000);
      long got = 0;
      while (got < 60000) {
        const long n = read(pipefd[0], small + got, (size_t)(60000 - got));
        Check(n > 0 ? 1 : n, 1, "read from a pipe");
        got += n;
      }
      checksum += small[piece * 7919 % 60000];
    }
    for (size_t i = 0; i < kBytes; i += 4093) checksum = checksum * 31 + dst[i];
  }
  printf("syscall_buffers checksum %llu\n", (unsigned long long)checksum);
  close(fd);
  free(src);
  free(dst);
  free(copy);
  free(small);
  return 0;
}
