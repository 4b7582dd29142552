/* The ABI shared by the McKernel patches (kernel_patches/) and the profiler (profiler/):
 * the phasemark() system call number and the layout of the PEBS dumps that the patched
 * McKernel writes and `tiergym-import-mckernel` (later `tiergym-prof import-mckernel`)
 * reads. kernel_patches/DUMP_FORMAT.md describes the same layout in prose.
 *
 * Macros only and no includes, so that McKernel's freestanding kernel, the libphasemark C
 * library and the C++ importer include the very same file. The kernel_patches issue owns
 * it; patch 0001 adds a byte-identical copy as kernel/include/tiergym_mckernel.h in the
 * McKernel tree, and kernel_patches/check.sh (and the CTest kernel_patches_abi) verify the
 * copy. Changing anything here means regenerating the patch series.
 */
#ifndef TIERGYM_MCKERNEL_ABI_H_
#define TIERGYM_MCKERNEL_ABI_H_

/* ---- The phasemark() system call ----
 *
 * long phasemark(void): the calling process enters its next phase. The process's phase
 * counter is incremented; if PEBS runs for the calling thread, the samples taken so far are
 * harvested into the thread's PEBS stream as one batch, followed by one phasemark word.
 * Returns the index of the phase that starts (1 for the first call). Without the patch
 * (plain Linux, or a McKernel that delegates the unknown number to Linux) it fails with
 * ENOSYS.
 *
 * Why 650: it is free in every table the number could collide with.
 *  - McKernel x86_64 syscall_list.h at 362c9b293 (PEBS-squashed) handles 0-311 (Linux
 *    numbers), 601-606 (pmc_init, pmc_start, pmc_stop, pmc_reset, pmc_read,
 *    pmc_pebs_read), 700 (get_cpu_id), 701 (__NR_profile, the profiling call of
 *    PROFILE_ENABLE), 730-732 (util_migrate_inter_kernel, util_indicate_clone, get_system),
 *    801-804 and 811 (swapout, linux_mlock, suspend_threads, resume_threads,
 *    linux_spawn). The development branch adds 733 (util_register_desc).
 *  - McKernel's pseudo numbers: 999 (__NR_coredump, kernel and mcctrl) and, on the
 *    development branch, 8001 (__NR_syscall_response) and __NR_profile moved to
 *    PROFILE_EVENT_MAX (above 4000).
 *  - The profiling range: kernel/include/profile.h numbers its events after the system
 *    calls, [PROFILE_OFFLOAD_MAX, PROFILE_EVENT_MAX) = [600, 613) at 362c9b293; 650 is above
 *    it (and below PROFILE_SYSCALL_MAX = 2000 on the development branch, where each system
 *    call number has its own profiling slot).
 *  - Linux x86_64: 0-469 (64-bit and common, Linux 6.17) and 512-547 (x32); 650 is
 *    unassigned, and at a handful of new calls per release Linux stays below it for
 *    decades.
 */
#define TIERGYM_PHASEMARK_SYSCALL 650

/* ---- PEBS dump layout ----
 *
 * McKernel writes one dump per thread when the thread exits, into mcexec's working
 * directory, named by TIERGYM_DUMP_NAME_FORMAT. A dump is a sequence of 64-bit words in
 * the machine's byte order (little-endian: x86_64). Three sections follow each other:
 *
 *   1. mmap section: records [TSC, start, length], one per anonymous mapping of at least
 *      TIERGYM_DUMP_MMAP_MIN_BYTES, ended by one TIERGYM_DUMP_WATERMARK word.
 *   2. munmap section: records [TSC, start, length], one per successful munmap, ended by
 *      one TIERGYM_DUMP_WATERMARK word.
 *   3. PEBS section, up to the end of the file, any sequence of
 *        batch:     [TIERGYM_DUMP_WATERMARK, TSC, instructions, count, address x count]
 *        phasemark: [TIERGYM_DUMP_PHASEMARK]
 *      A batch is one harvest of the CPU's PEBS buffer: TSC and instructions are read at
 *      harvest time; instructions is the count retired by the thread in user mode since
 *      its last phasemark (fixed counter 0, INST_RETIRED.ANY), addresses are the data
 *      linear addresses of the PEBS records in the order the CPU wrote them. A phasemark
 *      word follows the batch harvested by the phasemark() call (or, in the other threads
 *      of the process, their next batch), so every phasemark word has a batch before it.
 *      The last harvest, when the thread exits, ends the stream (followed only by the
 *      phasemark words the thread had not written yet).
 */
#define TIERGYM_DUMP_WORD_BYTES 8
/* Ends the mmap and munmap sections; starts every batch. */
#define TIERGYM_DUMP_WATERMARK 0xffffffffffffffffULL
/* One per phasemark, in the PEBS section only. */
#define TIERGYM_DUMP_PHASEMARK 0xfffffffffffffffeULL

/* Record kinds, in file order. */
#define TIERGYM_DUMP_KIND_MMAP 0
#define TIERGYM_DUMP_KIND_MUNMAP 1
#define TIERGYM_DUMP_KIND_BATCH 2
#define TIERGYM_DUMP_KIND_PHASEMARK 3

/* mmap and munmap records: three words. */
#define TIERGYM_DUMP_VMA_WORDS 3
#define TIERGYM_DUMP_VMA_TSC 0
#define TIERGYM_DUMP_VMA_START 1
#define TIERGYM_DUMP_VMA_LENGTH 2
/* Only mappings at least this long are recorded in the mmap section. */
#define TIERGYM_DUMP_MMAP_MIN_BYTES (4ULL << 20)

/* Batch header: four words, then `count` addresses. */
#define TIERGYM_DUMP_BATCH_HEADER_WORDS 4
#define TIERGYM_DUMP_BATCH_MARKER 0
#define TIERGYM_DUMP_BATCH_TSC 1
#define TIERGYM_DUMP_BATCH_INSTRUCTIONS 2
#define TIERGYM_DUMP_BATCH_COUNT 3

/* Width of the instruction counter the kernel reads (fixed counter 0 on Knights Landing and
 * Xeon); the kernel computes differences modulo 2^TIERGYM_DUMP_INSTR_COUNTER_BITS. */
#define TIERGYM_DUMP_INSTR_COUNTER_BITS 48

/* File name: executable base name, PEBS reset (countdown), hardware PEBS buffer size in
 * bytes (0: the default), pid, tid. The importer takes the tid (and, when not given
 * otherwise, the application name and PEBS reset) from it. */
#define TIERGYM_DUMP_NAME_FORMAT "%s-PEBS-countdown-%lu-PEBS-buffer-%lu-pid-%d-tid-%d.dat"

#endif /* TIERGYM_MCKERNEL_ABI_H_ */
