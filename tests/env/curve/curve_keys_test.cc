// CURVE key pairs and their certificate files: a pair written is read back; a secret
// certificate others may read, a public one given as secret, an edited one and a key list
// others may write are refused with the fix; the allowed keys come from a directory of
// public certificates or a file of keys.
#include "env/curve/curve_keys.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym::env {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class CurveKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CurveAvailable()) GTEST_SKIP() << "this libzmq has no CURVE";
    dir_ = (fs::temp_directory_path() / ("tiergym-curve-" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CurveKeyPair WritePair(const std::string& name) {
    absl::StatusOr<CurveKeyPair> keys = MakeCurveKeyPair();
    EXPECT_TRUE(keys.ok()) << keys.status();
    EXPECT_TRUE(WriteCurveCertificates(dir_, name, *keys, false, "test").ok());
    return *keys;
  }
  static mode_t Mode(const std::string& path) {
    struct stat st = {};
    stat(path.c_str(), &st);
    return st.st_mode & 07777;
  }

  std::string dir_;
};

TEST_F(CurveKeysTest, APairWrittenIsReadBackWithPrivateModes) {
  const CurveKeyPair keys = WritePair("server");
  EXPECT_TRUE(IsCurveKey(keys.public_key));
  EXPECT_TRUE(IsCurveKey(keys.secret_key));
  EXPECT_EQ(CurveKeyBytes(keys.public_key).size(), 32u);
  EXPECT_EQ(Mode(dir_), 0700u);
  EXPECT_EQ(Mode(dir_ + "/server.key_secret"), 0600u);
  EXPECT_EQ(Mode(dir_ + "/server.key"), 0644u);
  absl::StatusOr<CurveKeyPair> secret = ReadCurveCertificate(dir_ + "/server.key_secret", true);
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ(secret->public_key, keys.public_key);
  EXPECT_EQ(secret->secret_key, keys.secret_key);
  absl::StatusOr<CurveKeyPair> pub = ReadCurveCertificate(dir_ + "/server.key", false);
  ASSERT_TRUE(pub.ok()) << pub.status();
  EXPECT_EQ(pub->public_key, keys.public_key);
  EXPECT_TRUE(pub->secret_key.empty());
  // Never over an existing pair unless asked.
  absl::Status again = WriteCurveCertificates(dir_, "server", keys, false, "test");
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(again.message()), HasSubstr("--force"));
  EXPECT_TRUE(WriteCurveCertificates(dir_, "server", keys, true, "test").ok());
}

TEST_F(CurveKeysTest, ASecretCertificateOthersMayReadIsRefusedWithTheFix) {
  WritePair("server");
  const std::string path = dir_ + "/server.key_secret";
  for (const mode_t mode : {0644, 0640, 0604, 0660}) {
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
    absl::StatusOr<CurveKeyPair> k = ReadCurveCertificate(path, true);
    ASSERT_FALSE(k.ok()) << std::oct << mode;
    EXPECT_EQ(k.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(k.status().message()), HasSubstr("chmod 600 " + path));
  }
  ASSERT_EQ(chmod(path.c_str(), 0400), 0);
  EXPECT_TRUE(ReadCurveCertificate(path, true).ok());
}

TEST_F(CurveKeysTest, APublicCertificateIsNotASecretOneAndAnEditedOneIsRefused) {
  const CurveKeyPair keys = WritePair("a");
  const CurveKeyPair other = WritePair("b");
  absl::StatusOr<CurveKeyPair> k = ReadCurveCertificate(dir_ + "/a.key", true);
  ASSERT_FALSE(k.ok());
  EXPECT_THAT(std::string(k.status().message()), HasSubstr("NAME.key_secret"));
  // A secret certificate whose public key is another pair's.
  const std::string edited = dir_ + "/edited.key_secret";
  {
    std::ofstream out(edited);
    out << "curve\n    public-key = \"" << other.public_key << "\"\n    secret-key = \""
        << keys.secret_key << "\"\n";
  }
  ASSERT_EQ(chmod(edited.c_str(), 0600), 0);
  k = ReadCurveCertificate(edited, true);
  ASSERT_FALSE(k.ok());
  EXPECT_THAT(std::string(k.status().message()), HasSubstr("edited"));
  // A key that is not Z85: the line is named.
  const std::string broken = dir_ + "/broken.key";
  {
    std::ofstream out(broken);
    out << "metadata\ncurve\n    public-key = \"tooshort\"\n";
  }
  k = ReadCurveCertificate(broken, false);
  ASSERT_FALSE(k.ok());
  EXPECT_THAT(std::string(k.status().message()), HasSubstr("broken.key:3: public-key"));
  EXPECT_EQ(ReadCurveCertificate(dir_ + "/missing.key", false).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CurveKeysTest, AllowedKeysComeFromADirectoryOrAFileThatOnlyItsOwnerWrites) {
  const CurveKeyPair a = WritePair("a");
  const CurveKeyPair b = WritePair("b");
  // The directory: every NAME.key (public) in it; the secret certificates are not read.
  absl::StatusOr<std::vector<std::string>> keys = ReadAllowedCurveKeys(dir_);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_THAT(*keys, ::testing::UnorderedElementsAre(a.public_key, b.public_key));
  // A file of bare keys, with comments.
  const std::string list = dir_ + "/allowed.txt";
  {
    std::ofstream out(list);
    out << "# learners\n" << a.public_key << "\n\n" << b.public_key << "  \n";
  }
  ASSERT_EQ(chmod(list.c_str(), 0644), 0);
  keys = ReadAllowedCurveKeys(list);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_THAT(*keys, ::testing::ElementsAre(a.public_key, b.public_key));
  // Writable by others: anyone could add their key.
  ASSERT_EQ(chmod(list.c_str(), 0666), 0);
  keys = ReadAllowedCurveKeys(list);
  ASSERT_FALSE(keys.ok());
  EXPECT_EQ(keys.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(keys.status().message()), HasSubstr("chmod go-w"));
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);
  EXPECT_FALSE(ReadAllowedCurveKeys(dir_).ok());
  ASSERT_EQ(chmod(dir_.c_str(), 0700), 0);
  // A secret certificate in the list is refused; so is a list with no key.
  keys = ReadAllowedCurveKeys(dir_ + "/a.key_secret");
  ASSERT_FALSE(keys.ok());
  EXPECT_THAT(std::string(keys.status().message()), HasSubstr("secret key"));
  const std::string empty = dir_ + "/empty.txt";
  {
    std::ofstream out(empty);
    out << "# nobody\n";
  }
  EXPECT_EQ(ReadAllowedCurveKeys(empty).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tiergym::env
