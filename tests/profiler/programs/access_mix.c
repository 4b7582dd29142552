/* Known access patterns for the timer backend's tests (tests/profiler/record_timer_test.cc).
 * `access_mix MODE` runs one of:
 *   read     sums a 32 MiB array, pass after pass (loads only)
 *   write    stores into a 32 MiB array, pass after pass (stores only)
 *   chase    follows a random cyclic chain of pointers through 32 MiB (dependent loads)
 *   hotcold  streams a hot 128 KiB array three times for every pass over a cold 128 KiB
 *            array, with the same loop: three hot samples for one cold one. The arrays
 *            are small so that both come from the same cache level on any machine: with
 *            32 MiB each, a last-level cache between 32 and 64 MiB holds the hot one but
 *            not both, its passes run faster, and a timer samples it less than 3:1
 * for about SECONDS (default 0.5) of CPU time, and prints the arrays' address ranges as
 * `name start end` lines (hex), then a checksum. Phase 1 (one phasemark) begins when the
 * arrays are ready. Exits 1 on a bad argument. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profiler/phasemark.h"

enum { kBytes = 32 << 20, kHotColdBytes = 128 << 10 };

static double CpuSeconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t* ArrayOf(size_t bytes) {
  uint64_t* a = aligned_alloc(4096, bytes);
  if (a == NULL) exit(1);
  for (size_t i = 0; i < bytes / 8; ++i) a[i] = i * 2654435761u;
  return a;
}

static uint64_t* Array(void) { return ArrayOf(kBytes); }

static void PrintOf(const char* name, const void* p, size_t bytes) {
  printf("%s %lx %lx\n", name, (unsigned long)(uintptr_t)p, (unsigned long)(uintptr_t)p + bytes);
}

static void Print(const char* name, const void* p) { PrintOf(name, p, kBytes); }

/* One streaming pass of loads; noinline so that hot and cold passes run the same code. */
__attribute__((noinline)) static uint64_t SumPass(const volatile uint64_t* a, size_t bytes) {
  uint64_t s = 0;
  for (size_t i = 0; i < bytes / 8; i += 8) s += a[i];
  return s;
}

int main(int argc, char** argv) {
  if (argc < 2) return 1;
  const double seconds = argc > 2 ? atof(argv[2]) : 0.5;
  const char* mode = argv[1];
  uint64_t sum = 0;
  double start = 0;
  if (strcmp(mode, "read") == 0) {
    uint64_t* a = Array();
    Print("read", a);
    phasemark();
    start = CpuSeconds();
    while (CpuSeconds() - start < seconds) sum += SumPass(a, kBytes);
  } else if (strcmp(mode, "write") == 0) {
    volatile uint64_t* a = Array();
    Print("write", (const void*)a);
    phasemark();
    start = CpuSeconds();
    for (uint64_t pass = 1; CpuSeconds() - start < seconds; ++pass) {
      for (size_t i = 0; i < kBytes / 8; i += 8) a[i] = pass ^ i;
    }
    sum = a[8];
  } else if (strcmp(mode, "chase") == 0) {
    /* 64-byte nodes linked in a random cycle (Sattolo's shuffle). */
    const size_t n = kBytes / 64;
    uint64_t* a = Array();
    size_t* order = malloc(n * sizeof *order);
    if (order == NULL) return 1;
    for (size_t i = 0; i < n; ++i) order[i] = i;
    uint64_t x = 88172645463325252ull;
    for (size_t i = n - 1; i > 0; --i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const size_t j = (size_t)(x % i);
      const size_t t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    for (size_t i = 0; i < n; ++i)
      a[order[i] * 8] = (uint64_t)(uintptr_t)&a[order[(i + 1) % n] * 8];
    free(order);
    Print("chase", a);
    phasemark();
    start = CpuSeconds();
    volatile uint64_t* p = a;
    while (CpuSeconds() - start < seconds) {
      for (int k = 0; k < 100000; ++k) p = (volatile uint64_t*)(uintptr_t)*p;
    }
    sum = (uint64_t)(uintptr_t)p;
  } else if (strcmp(mode, "hotcold") == 0) {
    uint64_t* hot = ArrayOf(kHotColdBytes);
    uint64_t* cold = ArrayOf(kHotColdBytes);
    PrintOf("hot", hot, kHotColdBytes);
    PrintOf("cold", cold, kHotColdBytes);
    phasemark();
    start = CpuSeconds();
    while (CpuSeconds() - start < seconds) {
      sum += SumPass(hot, kHotColdBytes);
      sum += SumPass(cold, kHotColdBytes);
      sum += SumPass(hot, kHotColdBytes);
      sum += SumPass(hot, kHotColdBytes);
    }
  } else {
    return 1;
  }
  printf("checksum %llu\n", (unsigned long long)sum);
  return 0;
}
