// Whole-file reads and writes (traces/base/file.h): a regular file is replaced atomically
// and nothing temporary is left beside it; a symbolic link (as /dev/stdout is) or a device
// is written through, and stays what it was.
#include "traces/base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iterator>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

fs::path FreshDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(FileTest, ReplacesARegularFileAndLeavesNothingBesideIt) {
  const fs::path dir = FreshDir("file_regular");
  const std::string path = (dir / "a.txt").string();
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  const ino_t before = st.st_ino;
  ASSERT_TRUE(WriteFileAtomically(path, "new").ok());
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_NE(st.st_ino, before) << "replaced by rename, not rewritten";
  EXPECT_EQ(*ReadFile(path), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  EXPECT_FALSE(WritesInPlace(path));
  EXPECT_FALSE(WritesInPlace((dir / "absent").string()));
  EXPECT_FALSE(WritesInPlace(dir.string()));
}

TEST(FileTest, WritesThroughALinkAndKeepsIt) {
  const fs::path dir = FreshDir("file_link");
  const fs::path target = dir / "target.txt";
  ASSERT_TRUE(WriteFileAtomically(target.string(), "a much longer old text").ok());
  const fs::path link = dir / "link.txt";
  fs::create_symlink(target, link);
  ASSERT_TRUE(WritesInPlace(link.string()));
  ASSERT_TRUE(WriteFileAtomically(link.string(), "new").ok());
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(*ReadFile(target.string()), "new");  // truncated, not overwritten in part
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);
}

TEST(FileTest, WritesIntoADeviceWithoutReplacingIt) {
  ASSERT_TRUE(WritesInPlace("/dev/null"));
  ASSERT_TRUE(WriteFileAtomically("/dev/null", "discarded").ok());
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // A named pipe: the reader gets the bytes.
  const fs::path dir = FreshDir("file_fifo");
  const std::string fifo = (dir / "p").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_TRUE(WritesInPlace(fifo));
  // The reading end opened first (without waiting for a writer), so the write cannot block.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  ASSERT_TRUE(WriteFileAtomically(fifo, "through the pipe").ok());
  char buf[64] = {};
  const ssize_t n = ::read(reader, buf, sizeof buf);
  ::close(reader);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "through the pipe");
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST(FileTest, ErrorsNameThePath) {
  const fs::path dir = FreshDir("file_errors");
  const absl::StatusOr<std::string> missing = ReadFile((dir / "none").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(missing.status().message(), HasSubstr("none"));
  const absl::Status into_missing_dir = WriteFileAtomically((dir / "no" / "f").string(), "x");
  EXPECT_FALSE(into_missing_dir.ok());
  EXPECT_THAT(into_missing_dir.message(), HasSubstr((dir / "no" / "f").string()));
}

}  // namespace
}  // namespace tiergym
