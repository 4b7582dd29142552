// Function symbols of an ELF64 file, resolved to the file offsets uprobes take.
//
// A uprobe perf event names its probe point by file path and byte offset in the file
// (perf_event_attr config1/config2 of the `uprobe` PMU), not by virtual address. This
// module reads the static (.symtab) and dynamic (.dynsym) symbol tables of an ELF64
// little-endian file and converts a symbol's virtual address to a file offset through the
// PT_LOAD program header that maps it. It is a small reader of the fields it needs (no
// libelf): headers are bounds-checked and a malformed file is reported as DataLoss.
//
// Thread-safety: ElfFile is an immutable value after Open().
#ifndef TIERGYM_PROFILER_ELF_SYMBOLS_H_
#define TIERGYM_PROFILER_ELF_SYMBOLS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tiergym::prof {

struct ElfSymbol {
  std::string name;
  uint64_t address = 0;      // st_value: link-time virtual address
  uint64_t size = 0;         // st_size
  uint64_t file_offset = 0;  // where the instruction at `address` lies in the file
};

class ElfFile {
 public:
  // Reads `path`. NotFound when it does not exist; InvalidArgument when it is not an
  // ELF64 little-endian file; DataLoss when a header points outside the file.
  static absl::StatusOr<ElfFile> Open(const std::string& path);

  const std::string& path() const { return path_; }
  // True when the file has a PT_INTERP header (a dynamically linked executable).
  bool has_interpreter() const { return has_interp_; }
  // ET_EXEC or ET_DYN.
  bool is_shared_object_type() const { return is_dyn_; }

  // The defined function symbol `name` (STT_FUNC or STT_GNU_IFUNC, st_shndx != UNDEF), from
  // .symtab when present, else .dynsym. nullopt when the file does not define it.
  std::optional<ElfSymbol> FindFunction(std::string_view name) const;

  size_t num_functions() const { return functions_.size(); }

 private:
  std::string path_;
  bool has_interp_ = false;
  bool is_dyn_ = false;
  std::vector<ElfSymbol> functions_;
};

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_ELF_SYMBOLS_H_
