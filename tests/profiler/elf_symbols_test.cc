// Tests of the ELF symbol reader against the libraries and programs of this build.
#include "profiler/elf_symbols.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "traces/base/file.h"

namespace tiergym::prof {
namespace {

const std::string kLibDir = std::string(TIERGYM_BIN_DIR) + "/../lib";

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "." + std::to_string(::getpid())))
      .string();
}

TEST(ElfFileTest, FindsPhasemarkAtTheOffsetTheLoaderMapsIt) {
  const std::string lib = kLibDir + "/libphasemark.so";
  auto elf = ElfFile::Open(lib);
  ASSERT_TRUE(elf.ok()) << elf.status();
  EXPECT_FALSE(elf->has_interpreter());
  EXPECT_TRUE(elf->is_shared_object_type());
  auto sym = elf->FindFunction("phasemark");
  ASSERT_TRUE(sym.has_value());

  // The same function loaded by the dynamic loader: its bytes in memory must be the file
  // bytes at file_offset, and its address relative to the load base the symbol's address.
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  void* fn = dlsym(handle, "phasemark");
  ASSERT_NE(fn, nullptr);
  Dl_info info;
  ASSERT_NE(dladdr(fn, &info), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(fn) - reinterpret_cast<uintptr_t>(info.dli_fbase),
            sym->address);
  auto bytes = ReadFile(lib);
  ASSERT_TRUE(bytes.ok());
  ASSERT_LT(sym->file_offset + 8, bytes->size());
  EXPECT_EQ(std::memcmp(bytes->data() + sym->file_offset, fn, 8), 0);
  dlclose(handle);
}

TEST(ElfFileTest, FindsStaticFunctionsOfAnExecutableInItsSymbolTable) {
  auto elf = ElfFile::Open(std::string(TIERGYM_BIN_DIR) + "/tiergym-testapp");
  ASSERT_TRUE(elf.ok()) << elf.status();
  EXPECT_TRUE(elf->has_interpreter());
  EXPECT_TRUE(elf->FindFunction("main").has_value());
  EXPECT_TRUE(elf->FindFunction("RunSlice").has_value());    // static: .symtab only
  EXPECT_FALSE(elf->FindFunction("phasemark").has_value());  // undefined here
  EXPECT_FALSE(elf->FindFunction("no_such_function").has_value());
}

TEST(ElfFileTest, RefusesWhatIsNotAnElfFile) {
  const std::string path = TempPath("not_elf");
  std::ofstream(path) << "#!/bin/sh\necho hello\n";
  auto elf = ElfFile::Open(path);
  EXPECT_EQ(elf.status().code(), absl::StatusCode::kInvalidArgument);
  std::remove(path.c_str());
  EXPECT_EQ(ElfFile::Open(path).status().code(), absl::StatusCode::kNotFound);
}

TEST(ElfFileTest, RefusesATruncatedFile) {
  auto bytes = ReadFile(kLibDir + "/libphasemark.so");
  ASSERT_TRUE(bytes.ok());
  const std::string path = TempPath("truncated_elf");
  std::ofstream(path, std::ios::binary) << bytes->substr(0, 80);  // header, no tables
  auto elf = ElfFile::Open(path);
  EXPECT_EQ(elf.status().code(), absl::StatusCode::kDataLoss) << elf.status();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tiergym::prof
