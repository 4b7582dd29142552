// CURVE key pairs and the certificate files that hold them, for ZeroMQ's CURVE mechanism
// (authentication and encryption by libzmq with libsodium; this file does no cryptography
// of its own: keys are made by zmq_curve_keypair and checked by zmq_z85_decode and
// zmq_curve_public).
//
// A key is 32 bytes written in Z85 (40 characters). The certificate files are those of
// ZeroMQ's own tools (czmq's zcert, pyzmq's zmq.auth.create_certificates): `NAME.key`, the
// public certificate, and `NAME.key_secret`, which holds the secret key too, in the ZPL text
// format:
//
//   #   ZeroMQ CURVE **Secret** Certificate
//   metadata
//   curve
//       public-key = "Z85..."
//       secret-key = "Z85..."
//
// so that keys made by `tiergym keygen` load with pyzmq's zmq.auth.load_certificate, and
// the other way round. A secret certificate must be its owner's alone (a regular file of
// this process's user, no permission for group or others): ReadCurveCertificate refuses
// one anybody else could read, as ssh does a private key. A list of allowed client keys
// must not be writable by anybody but its owner (who must be this user or root), or anyone
// could add their own key.
//
// Pure functions, thread-safe.
#ifndef TIERGYM_ENV_CURVE_CURVE_KEYS_H_
#define TIERGYM_ENV_CURVE_CURVE_KEYS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tiergym::env {

// Z85 keys, 40 characters each; `secret_key` is empty for a public certificate.
struct CurveKeyPair {
  std::string public_key;
  std::string secret_key;
};

// Whether libzmq was built with CURVE (Debian's is, with libsodium).
bool CurveAvailable();

// Whether `key` is a Z85 key (40 characters that decode to 32 bytes).
bool IsCurveKey(std::string_view key);

// The 32 bytes a Z85 key stands for. REQUIRES: IsCurveKey(key).
std::string CurveKeyBytes(std::string_view key);

// A fresh key pair (libsodium's random generator, through libzmq). Unimplemented when
// libzmq has no CURVE.
absl::StatusOr<CurveKeyPair> MakeCurveKeyPair();

// Reads a certificate file. With `require_secret`, the file must hold a secret key whose
// public key is the one written beside it, and be private: a regular file owned by this
// process's user with no permission for group or others (FailedPrecondition naming the file,
// its mode or owner, and the chmod that fixes it). NotFound for a missing file,
// InvalidArgument (naming the file and line) for one that holds no valid key.
absl::StatusOr<CurveKeyPair> ReadCurveCertificate(const std::string& path, bool require_secret);

// The public keys a server accepts, from `path`: a directory (every `*.key` public
// certificate in it, as ZeroMQ's tools keep them) or a file (a public certificate, or one
// Z85 key per line; `#` starts a comment). The directory, and each file read, must be owned
// by this user or root and not writable by group or others (FailedPrecondition otherwise);
// a file that holds a secret key is refused (give the public `NAME.key`). InvalidArgument
// when no key is found. Keys are returned in Z85, without duplicates.
absl::StatusOr<std::vector<std::string>> ReadAllowedCurveKeys(const std::string& path);

// Writes `DIR/NAME.key` (mode 0644) and `DIR/NAME.key_secret` (mode 0600, created so; never
// readable by others, not even for a moment), creating DIR (mode 0700) when missing.
// AlreadyExists when either file exists and not `overwrite`. `generator` names the program in
// the files' banner.
absl::Status WriteCurveCertificates(const std::string& dir, const std::string& name,
                                    const CurveKeyPair& keys, bool overwrite,
                                    std::string_view generator);

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_CURVE_CURVE_KEYS_H_
