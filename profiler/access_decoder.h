// The timer backend's decoding: which memory a sampled instruction was about to access.
//
// `record --backend timer` samples each thread of the command every N ns of its CPU time
// (the software cpu-clock event, no PMU needed) with its instruction pointer and user
// registers. A timer interrupt stops a thread at an instruction boundary: the instruction
// at the sampled IP has not run yet and the registers hold what it will compute its
// address from, so its effective address is exact (a load stalled on a cache miss is
// where an interrupt most often finds a memory-bound thread, so ticks fall on loads in
// proportion to the time they cost). AccessDecoder decodes the x86-64 instruction (Zydis)
// and computes the address of its memory operand; CodeReader finds the instruction's
// bytes (the process's memory while it lives, else the file its mapping came from).
//
// What counts as an access: a memory operand of type MEM (explicit, or the implicit
// operands of string instructions such as `rep movsb`, which the interrupted IP and
// registers describe at their current position). Not: address computations (`lea`),
// `nop` with a memory operand, implicit stack accesses (push, pop, call, ret), vector
// gathers and scatters (their indices live in vector registers, which perf does not
// sample), FS/GS-relative operands (the segment bases are not sampled). With two memory
// operands (movs) the one read is reported.
//
// Thread-safety: AccessDecoder is immutable after construction; CodeReader is not
// thread-safe (one per drain thread).
#ifndef TIERGYM_PROFILER_ACCESS_DECODER_H_
#define TIERGYM_PROFILER_ACCESS_DECODER_H_

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace tiergym::prof {

// The user registers the timer backend samples (bits of enum perf_event_x86_regs: AX..IP
// and R8..R15; the segment selectors are of no use without their bases).
inline constexpr uint64_t kTimerRegsMask = 0x1ffull | (0xffull << 16);

enum class AccessKind : uint8_t { kRead, kWrite, kReadWrite };

struct DecodedAccess {
  uint64_t address = 0;
  AccessKind kind = AccessKind::kRead;
  uint32_t size_bytes = 0;
};

// Why a sample gave no access (counted in the summary).
enum class NoAccess : uint8_t {
  kNone,             // it gave one
  kNoMemoryOperand,  // the instruction does not access memory (or only the stack)
  kUndecodable,      // the bytes are no valid instruction
  kUnsupported,      // gather/scatter, FS/GS-relative, address not computable
};

class AccessDecoder {
 public:
  AccessDecoder();
  ~AccessDecoder();
  AccessDecoder(const AccessDecoder&) = delete;
  AccessDecoder& operator=(const AccessDecoder&) = delete;

  // The access of a tick at `ip`: `code` holds the bytes around it, code[at] being the one
  // at `ip` (up to 15 bytes after it; up to 48 before it, for the instruction before).
  // `regs` is indexed as enum perf_event_x86_regs. The instruction at `ip` when it
  // accesses memory; else the one before it, which the tick most often followed (a load
  // that missed delays the interrupt until it completes), when its address can be
  // computed from the registers it left. Returns whether there was an access; fills
  // *access, else *why says why.
  bool Decode(std::span<const uint8_t> code, size_t at, uint64_t ip,
              const std::array<uint64_t, 24>& regs, DecodedAccess* access, NoAccess* why) const;

 private:
  // The first memory access within 8 instructions after `ip` (code[at]), following
  // backward and unconditional relative branches inside `code`, whose address registers
  // none of the instructions on the way writes.
  bool NextAccess(std::span<const uint8_t> code, size_t at, uint64_t ip,
                  const std::array<uint64_t, 24>& regs, DecodedAccess* access) const;
  // One instruction at the start of `code`; `executed`: the registers are those after it.
  bool DecodeOne(std::span<const uint8_t> code, uint64_t ip, const std::array<uint64_t, 24>& regs,
                 bool executed, DecodedAccess* access, NoAccess* why) const;

  struct State;
  std::unique_ptr<State> state_;
};

// Reads the bytes of instructions of recorded processes: from the process's memory
// (process_vm_readv, cached per page) while it lives, else from the file a mapping
// (NoteMapping, from the ring's MMAP2 records) came from.
class CodeReader {
 public:
  // Remembers an executable mapping of `pid` (and forgets cached pages it covers: an exec
  // or a new mapping replaces code at the same addresses).
  void NoteMapping(pid_t pid, uint64_t start, uint64_t end, uint64_t pgoff,
                   const std::string& filename);
  // The bytes around `ip` of process `pid` (up to 48 before it and 15 from it; *at is the
  // index of `ip` in the result); empty when none can be read.
  std::span<const uint8_t> Read(pid_t pid, uint64_t ip, size_t* at);

 private:
  struct Mapping {
    uint64_t start, end, pgoff;
    std::string filename;
  };
  // The page of `pid` at `page_address`, or nullptr.
  const std::vector<uint8_t>* Page(pid_t pid, uint64_t page_address);

  std::unordered_map<pid_t, std::vector<Mapping>> mappings_;
  std::unordered_map<pid_t, std::unordered_map<uint64_t, std::vector<uint8_t>>> pages_;
  std::array<uint8_t, 64> buffer_{};
};

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_ACCESS_DECODER_H_
