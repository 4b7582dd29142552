/* Four threads writing shared arrays, each with its own malloc'd buffers (per-thread
 * malloc arenas), passes separated by a barrier and a phasemark. Prints a checksum that
 * is the same on every correct run; exits 1 on any failed check. Used by
 * tests/profiler/record_robustness_test.cc: recorded, it must end exactly as alone. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/phasemark.h"

enum { kThreads = 4, kPasses = 6, kShared = 1 << 20 /* doubles: 8 MiB */ };

static double* g_shared_a;
static double* g_shared_b;
static pthread_barrier_t g_barrier;
static uint64_t g_private_sums[kThreads];

static void* Worker(void* arg) {
  const int id = (int)(intptr_t)arg;
  const size_t slice = kShared / kThreads;
  double* a = g_shared_a + (size_t)id * slice;
  double* b = g_shared_b + (size_t)id * slice;
  uint64_t sum = 0;
  for (int pass = 0; pass < kPasses; ++pass) {
    /* Per-thread allocations of many sizes, written and freed each pass. */
    size_t bytes = (size_t)(64 << 10) << (pass % 4);
    uint32_t* mine = malloc(bytes);
    if (mine == NULL) {
      fprintf(stderr, "thread %d: malloc(%zu) failed\n", id, bytes);
      exit(1);
    }
    for (size_t i = 0; i < bytes / 4; ++i) mine[i] = (uint32_t)(i * 2654435761u + (unsigned)pass);
    for (size_t i = 0; i < slice; ++i) {
      a[i] = a[i] * 0.5 + (double)(mine[i % (bytes / 4)] & 1023);
      b[i] += a[i];
    }
    for (int k = 0; k < 64; ++k) {
      char* small = malloc((size_t)(16 + k * 24));
      memset(small, k, (size_t)(16 + k * 24));
      sum += (uint64_t)small[k];
      free(small);
    }
    for (size_t i = 0; i < bytes / 4; i += 97) sum += mine[i];
    free(mine);
    pthread_barrier_wait(&g_barrier);
    if (id == 0) phasemark();
    pthread_barrier_wait(&g_barrier);
  }
  g_private_sums[id] = sum;
  return NULL;
}

int main(void) {
  g_shared_a = calloc(kShared, sizeof(double));
  g_shared_b = calloc(kShared, sizeof(double));
  if (g_shared_a == NULL || g_shared_b == NULL) return 1;
  for (size_t i = 0; i < kShared; ++i) g_shared_a[i] = (double)(i % 1000);
  pthread_barrier_init(&g_barrier, NULL, kThreads);
  phasemark();
  pthread_t threads[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    if (pthread_create(&threads[t], NULL, Worker, (void*)(intptr_t)t) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      return 1;
    }
  }
  for (int t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
  double total = 0;
  for (size_t i = 0; i < kShared; ++i) total += g_shared_a[i] + g_shared_b[i];
  uint64_t private_total = 0;
  for (int t = 0; t < kThreads; ++t) private_total += g_private_sums[t];
  printf("mt_writers checksum %.6e private %llu\n", total, (unsigned long long)private_total);
  free(g_shared_a);
  free(g_shared_b);
  return 0;
}
