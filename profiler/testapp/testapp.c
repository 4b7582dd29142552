/* tiergym-testapp: the bundled test application of the profiler.
 *
 * STREAM-like kernels (copy, scale, add, triad over three arrays of doubles) and a
 * dependent pointer chase through a random cycle of 64-byte nodes, each kernel a phase
 * started by phasemark() (libphasemark). Used by the profiler's end-to-end tests and the
 * docs (profiler/README.md): its phases have distinct access patterns over distinct
 * arrays, so a recorded trace shows them apart.
 *
 *   tiergym-testapp [--size-mb N] [--iterations K] [--chase-mb M] [--chase-steps S]
 *                   [--threads T] [--print-layout]
 *
 * Phases: 1 init (first touch of all arrays), then per iteration copy, scale, add,
 * triad, chase, and a last one that sums the arrays (the result line). The result line (checksum)
 * lets a run check the others did the same work. Deterministic: the chase cycle comes from a
 * fixed-seed generator.
 * --print-layout prints where the arrays are ("layout a=0x... b=... c=... chase=...
 * array_bytes=N chase_bytes=M"), so that tests can check where samples land.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/phasemark.h"

typedef struct Node {
  struct Node* next;
  uint64_t payload[7];
} Node;

typedef enum { kInit, kCopy, kScale, kAdd, kTriad } Kernel;

static double* g_a;
static double* g_b;
static double* g_c;
static size_t g_n;
static int g_threads = 1;

typedef struct {
  Kernel kernel;
  size_t begin, end;
} Work;

static void* RunSlice(void* arg) {
  const Work* w = (const Work*)arg;
  const double s = 3.0;
  switch (w->kernel) {
    case kInit:
      for (size_t i = w->begin; i < w->end; ++i) {
        g_a[i] = 1.0;
        g_b[i] = 2.0;
        g_c[i] = 0.0;
      }
      break;
    case kCopy:
      for (size_t i = w->begin; i < w->end; ++i) g_c[i] = g_a[i];
      break;
    case kScale:
      for (size_t i = w->begin; i < w->end; ++i) g_b[i] = s * g_c[i];
      break;
    case kAdd:
      for (size_t i = w->begin; i < w->end; ++i) g_c[i] = g_a[i] + g_b[i];
      break;
    case kTriad:
      for (size_t i = w->begin; i < w->end; ++i) g_a[i] = g_b[i] + s * g_c[i];
      break;
  }
  return NULL;
}

/* Runs one kernel over the arrays, split across g_threads threads. */
static void RunKernel(Kernel k) {
  pthread_t tids[64];
  Work work[64];
  const int t = g_threads;
  for (int i = 0; i < t; ++i) {
    work[i].kernel = k;
    work[i].begin = g_n * (size_t)i / (size_t)t;
    work[i].end = g_n * (size_t)(i + 1) / (size_t)t;
  }
  for (int i = 1; i < t; ++i) pthread_create(&tids[i], NULL, RunSlice, &work[i]);
  RunSlice(&work[0]);
  for (int i = 1; i < t; ++i) pthread_join(tids[i], NULL);
}

/* xorshift64*: a fixed sequence, whatever the C library. */
static uint64_t NextRandom(uint64_t* state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1DULL;
}

static Node* BuildChase(size_t nodes) {
  Node* pool = malloc(nodes * sizeof(Node));
  size_t* order = malloc(nodes * sizeof(size_t));
  if (pool == NULL || order == NULL) return NULL;
  for (size_t i = 0; i < nodes; ++i) order[i] = i;
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  for (size_t i = nodes - 1; i > 0; --i) { /* Fisher-Yates */
    size_t j = (size_t)(NextRandom(&state) % (i + 1));
    size_t tmp = order[i];
    order[i] = order[j];
    order[j] = tmp;
  }
  for (size_t i = 0; i < nodes; ++i) {
    pool[order[i]].next = &pool[order[(i + 1) % nodes]];
    pool[order[i]].payload[0] = i;
  }
  free(order);
  return pool;
}

static uint64_t Chase(Node* start, size_t steps) {
  uint64_t sum = 0;
  Node* p = start;
  for (size_t i = 0; i < steps; ++i) {
    sum += p->payload[0];
    p = p->next;
  }
  return sum;
}

static int ParseSize(const char* flag, const char* value, size_t* out) {
  char* end = NULL;
  unsigned long long v = strtoull(value, &end, 10);
  if (end == value || *end != '\0' || v == 0) {
    fprintf(stderr, "tiergym-testapp: %s needs a positive integer, got '%s'\n", flag, value);
    return 0;
  }
  *out = (size_t)v;
  return 1;
}

int main(int argc, char** argv) {
  size_t size_mb = 8, iterations = 3, chase_mb = 8, chase_steps = 1000000, threads = 1;
  int print_layout = 0;
  for (int i = 1; i < argc; ++i) {
    const char* value = i + 1 < argc ? argv[i + 1] : "";
    size_t* target = NULL;
    if (strcmp(argv[i], "--print-layout") == 0) {
      print_layout = 1;
      continue;
    }
    if (strcmp(argv[i], "--size-mb") == 0)
      target = &size_mb;
    else if (strcmp(argv[i], "--iterations") == 0)
      target = &iterations;
    else if (strcmp(argv[i], "--chase-mb") == 0)
      target = &chase_mb;
    else if (strcmp(argv[i], "--chase-steps") == 0)
      target = &chase_steps;
    else if (strcmp(argv[i], "--threads") == 0)
      target = &threads;
    else {
      fprintf(stderr,
              "usage: tiergym-testapp [--size-mb N] [--iterations K] [--chase-mb M]"
              " [--chase-steps S] [--threads T] [--print-layout]\n");
      return strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
    if (!ParseSize(argv[i], value, target)) return 2;
    ++i;
  }
  if (threads > 64) threads = 64;
  g_threads = (int)threads;
  g_n = size_mb * 1024 * 1024 / sizeof(double);
  g_a = malloc(g_n * sizeof(double));
  g_b = malloc(g_n * sizeof(double));
  g_c = malloc(g_n * sizeof(double));
  const size_t nodes = chase_mb * 1024 * 1024 / sizeof(Node);
  if (g_a == NULL || g_b == NULL || g_c == NULL || nodes < 2) {
    fprintf(stderr, "tiergym-testapp: out of memory\n");
    return 1;
  }

  phasemark(); /* phase 1: first touch of the arrays and the chase cycle */
  RunKernel(kInit);
  Node* chase = BuildChase(nodes);
  if (chase == NULL) return 1;
  if (print_layout) {
    printf("layout a=%p b=%p c=%p chase=%p array_bytes=%zu chase_bytes=%zu\n", (void*)g_a,
           (void*)g_b, (void*)g_c, (void*)chase, g_n * sizeof(double), nodes * sizeof(Node));
    fflush(stdout);
  }

  uint64_t chased = 0;
  for (size_t it = 0; it < iterations; ++it) {
    phasemark();
    RunKernel(kCopy);
    phasemark();
    RunKernel(kScale);
    phasemark();
    RunKernel(kAdd);
    phasemark();
    RunKernel(kTriad);
    phasemark();
    chased += Chase(chase, chase_steps);
  }
  phasemark(); /* the last phase: the checksum */
  double checksum = 0;
  for (size_t i = 0; i < g_n; i += 4096) checksum += g_a[i] + g_b[i] + g_c[i];
  printf("tiergym-testapp: phases %zu checksum %.1f chase %llu\n", 2 + 5 * iterations, checksum,
         (unsigned long long)chased);
  free(chase);
  free(g_a);
  free(g_b);
  free(g_c);
  return 0;
}
