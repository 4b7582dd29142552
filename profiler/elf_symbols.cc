#include "profiler/elf_symbols.h"

#include <elf.h>

#include <cstring>

#include "traces/base/file.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::prof {
namespace {

// A bounds-checked view of the file's bytes.
class Bytes {
 public:
  Bytes(const std::string& data, const std::string& path) : data_(data), path_(path) {}

  template <typename T>
  absl::StatusOr<T> At(uint64_t offset, const char* what) const {
    if (offset > data_.size() || data_.size() - offset < sizeof(T)) {
      return absl::DataLossError(StrCat(path_, ": ", what, " at offset ", offset,
                                        " lies outside the file (", data_.size(), " bytes)"));
    }
    T v;
    std::memcpy(&v, data_.data() + offset, sizeof(T));
    return v;
  }
  bool Contains(uint64_t offset, uint64_t size) const {
    return offset <= data_.size() && data_.size() - offset >= size;
  }
  // The NUL-terminated string at `offset` within [table, table + table_size).
  std::string StringAt(uint64_t table, uint64_t table_size, uint64_t offset) const {
    if (offset >= table_size || !Contains(table, table_size)) return "";
    const char* p = data_.data() + table + offset;
    return std::string(p, strnlen(p, table_size - offset));
  }

 private:
  const std::string& data_;
  const std::string& path_;
};

}  // namespace

absl::StatusOr<ElfFile> ElfFile::Open(const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::string data, ReadFile(path));
  Bytes b(data, path);
  if (data.size() < sizeof(Elf64_Ehdr) || std::memcmp(data.data(), ELFMAG, SELFMAG) != 0) {
    return absl::InvalidArgumentError(StrCat(path, " is not an ELF file"));
  }
  TG_ASSIGN_OR_RETURN(Elf64_Ehdr eh, b.At<Elf64_Ehdr>(0, "ELF header"));
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return absl::InvalidArgumentError(StrCat(path, " is not a 64-bit little-endian ELF file"));
  }
  ElfFile elf;
  elf.path_ = path;
  elf.is_dyn_ = eh.e_type == ET_DYN;

  std::vector<Elf64_Phdr> loads;
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    TG_ASSIGN_OR_RETURN(Elf64_Phdr ph, b.At<Elf64_Phdr>(eh.e_phoff + uint64_t{i} * eh.e_phentsize,
                                                        "program header"));
    if (ph.p_type == PT_INTERP) elf.has_interp_ = true;
    if (ph.p_type == PT_LOAD) loads.push_back(ph);
  }

  std::vector<Elf64_Shdr> sections;
  for (uint16_t i = 0; i < eh.e_shnum; ++i) {
    TG_ASSIGN_OR_RETURN(Elf64_Shdr sh, b.At<Elf64_Shdr>(eh.e_shoff + uint64_t{i} * eh.e_shentsize,
                                                        "section header"));
    sections.push_back(sh);
  }
  // .symtab holds everything .dynsym holds and more; read it when present.
  uint32_t table_type = SHT_DYNSYM;
  for (const Elf64_Shdr& sh : sections) {
    if (sh.sh_type == SHT_SYMTAB) table_type = SHT_SYMTAB;
  }
  for (const Elf64_Shdr& sh : sections) {
    if (sh.sh_type != table_type || sh.sh_entsize < sizeof(Elf64_Sym)) continue;
    if (sh.sh_link >= sections.size()) {
      return absl::DataLossError(
          StrCat(path, ": symbol table links to section ", sh.sh_link, " of ", sections.size()));
    }
    const Elf64_Shdr& strtab = sections[sh.sh_link];
    if (!b.Contains(sh.sh_offset, sh.sh_size) || !b.Contains(strtab.sh_offset, strtab.sh_size)) {
      return absl::DataLossError(StrCat(path, ": symbol table lies outside the file"));
    }
    const uint64_t count = sh.sh_size / sh.sh_entsize;
    for (uint64_t i = 0; i < count; ++i) {
      TG_ASSIGN_OR_RETURN(Elf64_Sym sym,
                          b.At<Elf64_Sym>(sh.sh_offset + i * sh.sh_entsize, "symbol"));
      const unsigned type = ELF64_ST_TYPE(sym.st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
          sym.st_value == 0) {
        continue;
      }
      ElfSymbol s;
      s.name = b.StringAt(strtab.sh_offset, strtab.sh_size, sym.st_name);
      if (s.name.empty()) continue;
      s.address = sym.st_value;
      s.size = sym.st_size;
      bool mapped = false;
      for (const Elf64_Phdr& ph : loads) {
        if (s.address >= ph.p_vaddr && s.address < ph.p_vaddr + ph.p_filesz) {
          s.file_offset = s.address - ph.p_vaddr + ph.p_offset;
          mapped = true;
          break;
        }
      }
      if (mapped) elf.functions_.push_back(std::move(s));
    }
  }
  return elf;
}

std::optional<ElfSymbol> ElfFile::FindFunction(std::string_view name) const {
  for (const ElfSymbol& s : functions_) {
    if (s.name == name) return s;
  }
  return std::nullopt;
}

}  // namespace tiergym::prof
