/* An allocator-heavy program: malloc/calloc/realloc/posix_memalign/free of sizes from
 * 16 bytes to 4 MiB (both sides of glibc's mmap threshold), memset, strided
 * read-modify-write, its own mmap/mremap/mprotect/munmap, six phasemarks. Prints a
 * checksum; exits 1 on any failed check. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "profiler/phasemark.h"

enum { kSlots = 512 };

static int Fail(const char* what) {
  fprintf(stderr, "alloc_churn: %s failed: %s\n", what, strerror(errno));
  return 1;
}

int main(void) {
  void* slots[kSlots] = {0};
  size_t sizes[kSlots] = {0};
  uint64_t x = 0x9e3779b97f4a7c15ull, checksum = 0;
  for (int phase = 0; phase < 6; ++phase) {
    phasemark();
    for (int step = 0; step < 400; ++step) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      const int s = (int)(x % kSlots);
      if (slots[s] != NULL) {
        unsigned char* p = slots[s];
        for (size_t i = 0; i < sizes[s]; i += 61) checksum += p[i];
        if ((x & 1) && sizes[s] < ((size_t)1 << 20)) { /* grow up to 2 MiB */
          const size_t grown = sizes[s] * 2 + 24;
          unsigned char* q = realloc(p, grown);
          if (q == NULL) return Fail("realloc");
          memset(q + sizes[s], (int)(x & 0xff), grown - sizes[s]);
          slots[s] = q;
          sizes[s] = grown;
        } else {
          free(p);
          slots[s] = NULL;
        }
        continue;
      }
      size_t bytes = (size_t)16 << (x >> 8) % 14;          /* 16 B .. 128 KiB */
      if (x % 197 == 0) bytes = (size_t)(1 + x % 4) << 20; /* a few of 1..4 MiB */
      unsigned char* p = NULL;
      switch ((x >> 20) % 3) {
        case 0:
          p = malloc(bytes);
          if (p) memset(p, (int)(s & 0xff), bytes);
          break;
        case 1:
          p = calloc(1, bytes);
          break;
        default:
          if (posix_memalign((void**)&p, 4096, bytes) != 0)
            p = NULL;
          else
            memset(p, 7, bytes);
      }
      if (p == NULL) return Fail("an allocation");
      for (size_t i = 0; i < bytes; i += 64) p[i] = (unsigned char)(p[i] + i); /* strided RMW */
      slots[s] = p;
      sizes[s] = bytes;
    }
    /* Its own mappings and protection changes. */
    size_t len = (size_t)(1 + phase / 2) << 20;
    unsigned char* m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return Fail("mmap");
    memset(m, phase + 1, len);
    if (mprotect(m, len / 2, PROT_READ) != 0) return Fail("mprotect(PROT_READ)");
    checksum += m[len / 4];
    if (mprotect(m, len / 2, PROT_READ | PROT_WRITE) != 0)
      return Fail("mprotect(PROT_READ|PROT_WRITE)");
    m[0] = 9;
    unsigned char* r = mremap(m, len, len * 2, MREMAP_MAYMOVE);
    if (r == MAP_FAILED) return Fail("mremap");
    memset(r + len, 3, len);
    checksum += r[0] + r[len * 2 - 1];
    if (munmap(r, len * 2) != 0) return Fail("munmap");
  }
  for (int s = 0; s < kSlots; ++s) {
    if (slots[s] == NULL) continue;
    unsigned char* p = slots[s];
    for (size_t i = 0; i < sizes[s]; i += 61) checksum += p[i];
    free(p);
  }
  printf("alloc_churn checksum %llu\n", (unsigned long long)checksum);
  return 0;
}
