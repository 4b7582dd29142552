// Uses an installed tiergym: estimates a placement of a profile with tiergym::estimator and
// asks an endpoint where no server listens for a hello with tiergym::client.
//
//   consumer PROFILE_DIR PLACEMENT_JSON
//
// Prints "runtime_ns N" and "client DEADLINE_EXCEEDED"; exits 1 on anything else.
#include <cstdio>
#include <string>

#include "env/client/client.h"
#include "estimator/estimator.h"
#include "traces/placement.h"
#include "traces/profile.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer PROFILE_DIR PLACEMENT_JSON\n");
    return 2;
  }
  absl::StatusOr<tiergym::Profile> profile = tiergym::LoadProfile(argv[1]);
  if (!profile.ok()) {
    std::fprintf(stderr, "%s\n", std::string(profile.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<tiergym::Placement> placement = tiergym::ReadPlacement(argv[2]);
  if (!placement.ok()) {
    std::fprintf(stderr, "%s\n", std::string(placement.status().message()).c_str());
    return 1;
  }
  auto estimator = tiergym::Estimator::Create(*std::move(profile), {});
  if (!estimator.ok()) return 1;
  absl::StatusOr<tiergym::Estimate> estimate =
      (*estimator)->EstimatePlacement(*placement, tiergym::Model::kPaper);
  if (!estimate.ok()) {
    std::fprintf(stderr, "%s\n", std::string(estimate.status().message()).c_str());
    return 1;
  }
  std::printf("runtime_ns %.0f\n", estimate->runtime_ns);

  tiergym::env::ClientOptions options;
  options.endpoint = "ipc:///nonexistent/tiergym-consumer.sock";
  options.timeout_s = 0.2;
  auto client = tiergym::env::Client::Connect(options);
  if (client.ok() || !absl::IsDeadlineExceeded(client.status())) return 1;
  std::printf("client DEADLINE_EXCEEDED\n");
  return 0;
}
