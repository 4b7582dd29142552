#include "profiler/access_decoder.h"

#include <Zydis/Zydis.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace tiergym::prof {

struct AccessDecoder::State {
  ZydisDecoder decoder;
};

AccessDecoder::AccessDecoder() : state_(std::make_unique<State>()) {
  ZydisDecoderInit(&state_->decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
}

AccessDecoder::~AccessDecoder() = default;

namespace {

// enum perf_event_x86_regs index -> the 64-bit and 32-bit Zydis registers.
struct RegMap {
  int perf;
  ZydisRegister r64, r32;
};
constexpr RegMap kRegs[] = {
    {0, ZYDIS_REGISTER_RAX, ZYDIS_REGISTER_EAX},   {1, ZYDIS_REGISTER_RBX, ZYDIS_REGISTER_EBX},
    {2, ZYDIS_REGISTER_RCX, ZYDIS_REGISTER_ECX},   {3, ZYDIS_REGISTER_RDX, ZYDIS_REGISTER_EDX},
    {4, ZYDIS_REGISTER_RSI, ZYDIS_REGISTER_ESI},   {5, ZYDIS_REGISTER_RDI, ZYDIS_REGISTER_EDI},
    {6, ZYDIS_REGISTER_RBP, ZYDIS_REGISTER_EBP},   {7, ZYDIS_REGISTER_RSP, ZYDIS_REGISTER_ESP},
    {16, ZYDIS_REGISTER_R8, ZYDIS_REGISTER_R8D},   {17, ZYDIS_REGISTER_R9, ZYDIS_REGISTER_R9D},
    {18, ZYDIS_REGISTER_R10, ZYDIS_REGISTER_R10D}, {19, ZYDIS_REGISTER_R11, ZYDIS_REGISTER_R11D},
    {20, ZYDIS_REGISTER_R12, ZYDIS_REGISTER_R12D}, {21, ZYDIS_REGISTER_R13, ZYDIS_REGISTER_R13D},
    {22, ZYDIS_REGISTER_R14, ZYDIS_REGISTER_R14D}, {23, ZYDIS_REGISTER_R15, ZYDIS_REGISTER_R15D},
};

bool IsStackRegister(ZydisRegister r) {
  return r == ZYDIS_REGISTER_RSP || r == ZYDIS_REGISTER_ESP || r == ZYDIS_REGISTER_SP;
}

}  // namespace

bool AccessDecoder::Decode(std::span<const uint8_t> code, size_t at, uint64_t ip,
                           const std::array<uint64_t, 24>& regs, DecodedAccess* access,
                           NoAccess* why) const {
  if (at < code.size() && DecodeOne(code.subspan(at), ip, regs, false, access, why)) return true;
  if (at == 0 || at > code.size()) return false;
  // The tick was taken after the instruction before `ip` retired (a load that missed holds
  // retirement back, and the interrupt is served once it completes): decode that one, with
  // the registers as it left them. Its start is where forward decoding from earlier
  // offsets, which resynchronises within a few instructions, lands just before `ip`.
  size_t votes[16] = {};
  const size_t farthest = std::min<size_t>(at, 48);
  for (size_t back = farthest; back + 16 > farthest && back > 0; --back) {
    size_t pos = at - back, last = SIZE_MAX;
    while (pos < at) {
      ZydisDecodedInstruction insn;
      if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&state_->decoder, nullptr, code.data() + pos,
                                                      code.size() - pos, &insn))) {
        break;
      }
      last = pos;
      pos += insn.length;
    }
    if (pos == at && last != SIZE_MAX && at - last < 16) ++votes[at - last];
  }
  size_t best = 0;
  for (size_t len = 1; len < 16; ++len) {
    if (votes[len] > votes[best]) best = len;
  }
  NoAccess before = NoAccess::kNone;
  if (best != 0 &&
      DecodeOne(code.subspan(at - best, best), ip - best, regs, true, access, &before)) {
    *why = NoAccess::kNone;
    return true;
  }
  // The instruction before overwrote its own address registers (`mov rax,[rax]`, a
  // pointer chase): the thread's next access, a few instructions on (following a backward
  // branch, a loop), when no instruction on the way changes its address registers.
  if (NextAccess(code, at, ip, regs, access)) {
    *why = NoAccess::kNone;
    return true;
  }
  if (before == NoAccess::kUnsupported) *why = before;
  return false;
}

bool AccessDecoder::NextAccess(std::span<const uint8_t> code, size_t at, uint64_t ip,
                               const std::array<uint64_t, 24>& regs, DecodedAccess* access) const {
  std::vector<ZydisRegister> written;
  size_t pos = at;
  for (int step = 0; step < 8 && pos < code.size(); ++step) {
    const uint64_t here = ip - at + pos;
    ZydisDecodedInstruction insn;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&state_->decoder, code.data() + pos, code.size() - pos,
                                             &insn, ops))) {
      return false;
    }
    if (step > 0) {
      NoAccess why = NoAccess::kNone;
      DecodedAccess a;
      if (DecodeOne(code.subspan(pos), here, regs, false, &a, &why)) {
        for (uint8_t i = 0; i < insn.operand_count; ++i) {
          if (ops[i].type != ZYDIS_OPERAND_TYPE_MEMORY) continue;
          for (ZydisRegister used : {ops[i].mem.base, ops[i].mem.index}) {
            if (used == ZYDIS_REGISTER_NONE) continue;
            const ZydisRegister r =
                ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, used);
            if (std::find(written.begin(), written.end(), r) != written.end()) return false;
          }
        }
        *access = a;
        return true;
      }
    }
    if (insn.meta.category == ZYDIS_CATEGORY_COND_BR ||
        insn.meta.category == ZYDIS_CATEGORY_UNCOND_BR) {
      // A relative branch: a backward one (a loop) is taken, a forward conditional one
      // falls through; anything else ends the search.
      if (ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE || !ops[0].imm.is_relative) return false;
      const int64_t target = static_cast<int64_t>(pos + insn.length) + ops[0].imm.value.s;
      const bool backward = ops[0].imm.value.s < 0;
      if (backward || insn.meta.category == ZYDIS_CATEGORY_UNCOND_BR) {
        if (target < 0 || static_cast<size_t>(target) >= code.size()) return false;
        pos = static_cast<size_t>(target);
        continue;
      }
    } else if (insn.meta.category == ZYDIS_CATEGORY_CALL ||
               insn.meta.category == ZYDIS_CATEGORY_RET) {
      return false;
    }
    for (uint8_t i = 0; i < insn.operand_count; ++i) {
      if (ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER &&
          (ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)) {
        written.push_back(
            ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, ops[i].reg.value));
      }
    }
    pos += insn.length;
  }
  return false;
}

bool AccessDecoder::DecodeOne(std::span<const uint8_t> code, uint64_t ip,
                              const std::array<uint64_t, 24>& regs, bool executed,
                              DecodedAccess* access, NoAccess* why) const {
  ZydisDecodedInstruction insn;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  if (code.empty() || !ZYAN_SUCCESS(ZydisDecoderDecodeFull(&state_->decoder, code.data(),
                                                           code.size(), &insn, ops))) {
    *why = NoAccess::kUndecodable;
    return false;
  }
  if (insn.mnemonic == ZYDIS_MNEMONIC_NOP || insn.mnemonic == ZYDIS_MNEMONIC_LEA) {
    *why = NoAccess::kNoMemoryOperand;
    return false;
  }
  const ZydisDecodedOperand* chosen = nullptr;
  bool unsupported = false;
  for (uint8_t i = 0; i < insn.operand_count; ++i) {
    const ZydisDecodedOperand& op = ops[i];
    if (op.type != ZYDIS_OPERAND_TYPE_MEMORY) continue;
    if (op.mem.type != ZYDIS_MEMOP_TYPE_MEM) {
      if (op.mem.type == ZYDIS_MEMOP_TYPE_VSIB) unsupported = true;  // gather/scatter
      continue;
    }
    // Implicit stack accesses (push, pop, call, ret, enter, leave) are not data.
    if (op.visibility != ZYDIS_OPERAND_VISIBILITY_EXPLICIT && IsStackRegister(op.mem.base)) {
      continue;
    }
    if (op.mem.segment == ZYDIS_REGISTER_FS || op.mem.segment == ZYDIS_REGISTER_GS) {
      unsupported = true;
      continue;
    }
    // The operand read first; a written one only when none is read.
    if (chosen == nullptr || ((op.actions & ZYDIS_OPERAND_ACTION_MASK_READ) &&
                              !(chosen->actions & ZYDIS_OPERAND_ACTION_MASK_READ))) {
      chosen = &op;
    }
  }
  if (chosen == nullptr) {
    *why = unsupported ? NoAccess::kUnsupported : NoAccess::kNoMemoryOperand;
    return false;
  }
  if (executed) {
    // The registers are those after the instruction: its address is known only if it left
    // its base and index registers alone (not `mov rax,[rax]`, not string instructions,
    // which advance rsi/rdi).
    if (insn.attributes & (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE | ZYDIS_ATTRIB_HAS_REPNE)) {
      *why = NoAccess::kUnsupported;
      return false;
    }
    for (uint8_t i = 0; i < insn.operand_count; ++i) {
      const ZydisDecodedOperand& op = ops[i];
      if (op.type != ZYDIS_OPERAND_TYPE_REGISTER ||
          !(op.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)) {
        continue;
      }
      const ZydisRegister written =
          ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, op.reg.value);
      for (ZydisRegister used : {chosen->mem.base, chosen->mem.index}) {
        if (used != ZYDIS_REGISTER_NONE &&
            ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, used) == written) {
          *why = NoAccess::kUnsupported;
          return false;
        }
      }
    }
    if (insn.mnemonic == ZYDIS_MNEMONIC_MOVSB || insn.mnemonic == ZYDIS_MNEMONIC_MOVSW ||
        insn.mnemonic == ZYDIS_MNEMONIC_MOVSD || insn.mnemonic == ZYDIS_MNEMONIC_MOVSQ ||
        insn.mnemonic == ZYDIS_MNEMONIC_STOSB || insn.mnemonic == ZYDIS_MNEMONIC_STOSW ||
        insn.mnemonic == ZYDIS_MNEMONIC_STOSD || insn.mnemonic == ZYDIS_MNEMONIC_STOSQ ||
        insn.mnemonic == ZYDIS_MNEMONIC_LODSB || insn.mnemonic == ZYDIS_MNEMONIC_LODSQ) {
      *why = NoAccess::kUnsupported;
      return false;
    }
  }
  ZydisRegisterContext context;
  std::memset(&context, 0, sizeof context);
  for (const RegMap& m : kRegs) {
    context.values[m.r64] = regs[static_cast<size_t>(m.perf)];
    context.values[m.r32] = regs[static_cast<size_t>(m.perf)] & 0xffffffffull;
  }
  context.values[ZYDIS_REGISTER_RIP] = ip;
  uint64_t address = 0;
  if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddressEx(&insn, chosen, ip, &context, &address))) {
    *why = NoAccess::kUnsupported;
    return false;
  }
  const bool reads = (chosen->actions & ZYDIS_OPERAND_ACTION_MASK_READ) != 0;
  const bool writes = (chosen->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) != 0;
  access->address = address;
  access->kind = reads && writes ? AccessKind::kReadWrite
                 : writes        ? AccessKind::kWrite
                                 : AccessKind::kRead;
  access->size_bytes = chosen->size / 8;
  *why = NoAccess::kNone;
  return true;
}

void CodeReader::NoteMapping(pid_t pid, uint64_t start, uint64_t end, uint64_t pgoff,
                             const std::string& filename) {
  auto& pages = pages_[pid];
  for (auto it = pages.begin(); it != pages.end();) {
    it = it->first + 4096 > start && it->first < end ? pages.erase(it) : std::next(it);
  }
  auto& list = mappings_[pid];
  std::erase_if(list, [&](const Mapping& m) { return m.start < end && m.end > start; });
  list.push_back(Mapping{start, end, pgoff, filename});
}

const std::vector<uint8_t>* CodeReader::Page(pid_t pid, uint64_t page_address) {
  auto& pages = pages_[pid];
  if (auto it = pages.find(page_address); it != pages.end()) return &it->second;
  std::vector<uint8_t> bytes(4096);
  iovec local{bytes.data(), bytes.size()};
  iovec remote{reinterpret_cast<void*>(page_address), bytes.size()};
  bool ok = ::process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(4096);
  if (!ok) {  // the process is gone: the file its mapping came from
    const auto m = mappings_.find(pid);
    if (m == mappings_.end()) return nullptr;
    for (const Mapping& map : m->second) {
      if (page_address < map.start || page_address >= map.end || map.filename.empty() ||
          map.filename[0] != '/') {
        continue;
      }
      const int fd = ::open(map.filename.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) break;
      const ssize_t n = ::pread(fd, bytes.data(), bytes.size(),
                                static_cast<off_t>(page_address - map.start + map.pgoff));
      ::close(fd);
      ok = n > 0;
      if (ok && n < 4096) std::fill(bytes.begin() + n, bytes.end(), 0);
      break;
    }
  }
  if (!ok) return nullptr;
  return &pages.emplace(page_address, std::move(bytes)).first->second;
}

std::span<const uint8_t> CodeReader::Read(pid_t pid, uint64_t ip, size_t* at) {
  // Bytes [ip - 48, ip + 15), as far as the pages holding them can be read.
  const uint64_t from = ip >= 48 ? ip - 48 : 0, to = ip + 15;
  size_t n = 0, first_index = SIZE_MAX;
  for (uint64_t a = from; a < to;) {
    const uint64_t page = a & ~uint64_t{4095};
    const uint64_t stop = std::min(to, page + 4096);
    const std::vector<uint8_t>* bytes = Page(pid, page);
    if (bytes == nullptr) {
      if (a <= ip) {  // nothing before ip is usable without ip's page
        n = 0;
        first_index = SIZE_MAX;
        a = stop;
        continue;
      }
      break;
    }
    if (first_index == SIZE_MAX) first_index = static_cast<size_t>(a - from);
    std::memcpy(buffer_.data() + n, bytes->data() + (a - page), stop - a);
    n += static_cast<size_t>(stop - a);
    a = stop;
  }
  if (first_index == SIZE_MAX || from + first_index > ip) return {};
  *at = static_cast<size_t>(ip - from) - first_index;
  return std::span<const uint8_t>(buffer_.data(), n);
}

}  // namespace tiergym::prof
