// What a client may make the server read (env/provider/data_roots.h), one rule at a time on
// a real directory tree: files inside a data directory resolve; "..", absolute paths and
// symbolic links that lead outside, and names that do not exist, get the same NotFound
// that names nothing of the server's file system; a FIFO is refused without blocking; a
// file over the size limit is refused; a data directory that is not one is the operator's
// error, named.
#include "env/provider/data_roots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym::env {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class DataRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("tiergym_data_roots." + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "data" / "sub");
    fs::create_directories(root_ / "outside");
    Write(root_ / "data" / "sched.txt", "0 1\n");
    Write(root_ / "data" / "sub" / "big.txt", std::string(4096, 'x'));
    Write(root_ / "outside" / "secret.txt", "secret\n");
    fs::create_symlink(root_ / "outside" / "secret.txt", root_ / "data" / "link.txt");
    ASSERT_EQ(::mkfifo((root_ / "data" / "fifo").c_str(), 0600), 0);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  static void Write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  DataRoots Roots(uint64_t max_schedule_bytes = uint64_t{16} << 20) {
    DataRootsOptions o;
    o.data_dirs = {(root_ / "data").string()};
    o.max_schedule_bytes = max_schedule_bytes;
    absl::StatusOr<DataRoots> r = DataRoots::Create(o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : DataRoots();
  }

  fs::path root_;
};

TEST_F(DataRootsTest, AFileInADataDirectoryResolvesToItsRealPath) {
  const DataRoots roots = Roots();
  absl::StatusOr<std::string> s = roots.Schedule("sched.txt", "interference");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(fs::path(*s), fs::canonical(root_ / "data" / "sched.txt"));
  // An absolute name inside a data directory is as good.
  EXPECT_TRUE(roots.Schedule((root_ / "data" / "sched.txt").string(), "interference").ok());
}

TEST_F(DataRootsTest, WhatLeadsOutsideIsRefusedLikeWhatDoesNotExist) {
  const DataRoots roots = Roots();
  const std::vector<std::string> names = {"../outside/secret.txt",
                                          (root_ / "outside" / "secret.txt").string(), "link.txt",
                                          "no-such-file.txt", "sub/../../outside/secret.txt"};
  for (const std::string& name : names) {
    absl::StatusOr<std::string> s = roots.Schedule(name, "interference");
    ASSERT_FALSE(s.ok()) << name << " -> " << *s;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound) << name;
    // Nothing of the server's file system beyond the client's own words comes back.
    EXPECT_THAT(std::string(roots.Redact(std::string(s.status().message()))),
                Not(HasSubstr((root_ / "data").string())))
        << name;
  }
}

TEST_F(DataRootsTest, AFifoIsRefusedWithoutBlockingAndABigFileByItsLimit) {
  EXPECT_FALSE(Roots().Schedule("fifo", "interference").ok());
  absl::StatusOr<std::string> big =
      Roots(/*max_schedule_bytes=*/1024).Schedule("sub/big.txt", "interference");
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(std::string(big.status().message()), Not(HasSubstr(root_.string())));
  EXPECT_TRUE(Roots(/*max_schedule_bytes=*/8192).Schedule("sub/big.txt", "interference").ok());
}

TEST_F(DataRootsTest, AnUnknownProfileNamesTheKeyAndTheServedOnes) {
  DataRootsOptions o;
  o.named_profiles = {{"minife", (root_ / "data" / "sub").string()}};
  absl::StatusOr<DataRoots> roots = DataRoots::Create(o);
  ASSERT_TRUE(roots.ok()) << roots.status();
  absl::StatusOr<std::string> p = roots->ProfileDir("lulesh", "profiles");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("config key 'profiles'"));
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("minife"));
}

TEST_F(DataRootsTest, ADataDirectoryThatIsNotOneIsTheOperatorsErrorNamed) {
  DataRootsOptions o;
  o.data_dirs = {(root_ / "data" / "sched.txt").string()};
  absl::StatusOr<DataRoots> roots = DataRoots::Create(o);
  ASSERT_FALSE(roots.ok());
  EXPECT_EQ(roots.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(roots.status().message()), HasSubstr("sched.txt"));
}

TEST_F(DataRootsTest, RedactAndPrintableKeepServerPathsAndRawBytesOutOfReplies) {
  const DataRoots roots = Roots();
  const std::string said = roots.Redact("cannot read " + (root_ / "data" / "sched.txt").string());
  EXPECT_THAT(said, HasSubstr("data-dir:"));
  EXPECT_THAT(said, Not(HasSubstr(root_.string())));
  EXPECT_EQ(DataRoots::Printable(std::string("a\x01z", 3)), "a\\x01z");
  EXPECT_LE(DataRoots::Printable(std::string(500, 'x')).size(), 64u + 3u);
}

}  // namespace
}  // namespace tiergym::env
