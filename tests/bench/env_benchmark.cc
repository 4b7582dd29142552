// How fast agents can step placement environments: in-process (the C++ API), through the
// server with one synchronous client over ipc:// and over tcp loopback, and through the
// batched path (step_batch); each transport against a raw ZeroMQ + msgpack echo of the
// same message sizes measured in the same run. Then the server's memory per session with
// 1000 sessions open.
//
//   build/bin/tiergym-bench-env [--threads T] [--batch N] [--action static|two|half]
//                               [Google Benchmark options]
//
// Serves the bundled profiles (minife, lulesh, nekbone, lammps on knl, 200000 samples,
// generated into a temporary directory) with the default configuration (64 regions, 100
// steps, placement actions); by default each action moves two regions (--action). Benchmarks:
//   BM_InProcess            Environment::Step, one environment, one thread
//   BM_InProcessRoundRobin  N environments stepped in turn by one thread
//   BM_InProcessParallel    N environments stepped by T threads (ThreadPool::ParallelFor;
//                           the calling thread and T - 1 workers, as in the server)
//   BM_ClientStep/ipc|tcp   Client::Step against a server with T worker threads
//   BM_ClientStepIpcHandoff the same with ServerOptions::inline_quick_requests off
//   BM_Echo/ipc|tcp         DEALER -> ROUTER echo: msgpack messages of a step's sizes
//   BM_Batch                Client::StepBatch of N sessions (autoreset same_step), ipc
//   BM_EchoBatch            the echo with a batch's message sizes, ipc
//   BM_ClientStepTcpCurve   BM_ClientStep/tcp with CURVE (authenticated, encrypted)
//   BM_BatchTcp, BM_BatchTcpCurve   BM_Batch over tcp loopback, plain and with CURVE
// and prints the ratios the environment issue sets as goals (synchronous client >= 0.5 of
// the echo rate; batched path >= 0.8 of in-process steps/s with the same thread count), and
// what CURVE costs: its steps/s over plain tcp's, synchronous and batched.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "env/client/client.h"
#include "env/curve/curve_keys.h"
#include "env/environment.h"
#include "env/protocol/protocol.h"
#include "env/provider/bundled_profiles.h"
#include "env/provider/placement_provider.h"
#include "env/server/server.h"
#include "env/server/thread_pool.h"
#include "msgpack.hpp"
#include "tests/bench/summary_reporter.h"
#include "zmq.hpp"

namespace tiergym::env {
namespace {

namespace fs = std::filesystem;

// What the agent does each step (--action): kTwo (default) puts region step % regions on
// tier 1 and the rest on tier 0, so that two regions move per step (one in, one back);
// kStatic keeps everything on tier 0 (no migration: the interval estimate alone); kHalf
// flips every region, moving all of them each step.
enum class ActionKind { kStatic, kTwo, kHalf };
ActionKind g_action = ActionKind::kTwo;

Action Alternating(int regions, uint64_t step) {
  Action a;
  for (int r = 0; r < regions; ++r) {
    switch (g_action) {
      case ActionKind::kStatic:
        a.values.push_back(0);
        break;
      case ActionKind::kTwo:
        a.values.push_back(static_cast<uint64_t>(r) == step % regions ? 1 : 0);
        break;
      case ActionKind::kHalf:
        a.values.push_back(static_cast<int64_t>((r + step) % 2));
        break;
    }
  }
  return a;
}
const char* ActionName() {
  return g_action == ActionKind::kStatic ? "static (no moves)"
         : g_action == ActionKind::kTwo  ? "two regions move per step"
                                         : "every region moves each step";
}

// A raw ZeroMQ + msgpack echo: answers every request with a msgpack message of a fixed
// size, after unpacking the request (the least a msgpack server does).
class EchoServer {
 public:
  EchoServer(zmq::context_t& context, const std::string& endpoint)
      : socket_(context, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind(endpoint);
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { Loop(); });
  }
  ~EchoServer() {
    stop_.store(true);
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }
  void set_reply_bytes(size_t n) { reply_bytes_.store(n); }

 private:
  void Loop() {
    while (!stop_.load()) {
      zmq::pollitem_t item = {socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
      zmq::message_t id, payload;
      if (!socket_.recv(id, zmq::recv_flags::none)) continue;
      if (!socket_.recv(payload, zmq::recv_flags::none)) continue;
      msgpack::object_handle oh =
          msgpack::unpack(static_cast<const char*>(payload.data()), payload.size());
      benchmark::DoNotOptimize(oh.get().type);
      msgpack::sbuffer buf;
      msgpack::packer<msgpack::sbuffer> pk(buf);
      const size_t n = reply_bytes_.load();
      pk.pack_map(1);
      pk.pack_str(4);
      pk.pack_str_body("data", 4);
      const std::string body(n > 16 ? n - 16 : 1, 'x');
      pk.pack_bin(static_cast<uint32_t>(body.size()));
      pk.pack_bin_body(body.data(), static_cast<uint32_t>(body.size()));
      socket_.send(id, zmq::send_flags::sndmore);
      socket_.send(zmq::buffer(buf.data(), buf.size()), zmq::send_flags::none);
    }
  }

  zmq::socket_t socket_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> reply_bytes_{64};
  std::thread thread_;
};

struct World {
  std::string dir;
  int threads = 2;
  int batch = 64;
  PlacementProviderOptions provider_options;
  std::shared_ptr<PlacementProvider> provider;
  std::unique_ptr<Server> ipc_server, tcp_server, handoff_server, curve_server;
  std::thread ipc_thread, tcp_thread, handoff_thread, curve_thread;
  ClientOptions curve_client;  // the endpoint and keys of curve_server's allowed client
  zmq::context_t echo_context{1};
  std::unique_ptr<EchoServer> ipc_echo, tcp_echo;
  size_t step_request_bytes = 0, step_reply_bytes = 0;
  size_t batch_request_bytes = 0, batch_reply_bytes = 0;
};

World& TheWorld() {
  static World* w = new World();
  return *w;
}

std::unique_ptr<SessionEnv> MakeEnv() {
  absl::StatusOr<std::unique_ptr<SessionEnv>> env = TheWorld().provider->Make({});
  if (!env.ok()) {
    std::fprintf(stderr, "%s\n", env.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*env);
}

void BM_InProcess(benchmark::State& state) {
  std::unique_ptr<SessionEnv> env = MakeEnv();
  const int regions = env->spec().num_regions;
  (void)env->Reset(1, {});
  uint64_t step = 0;
  for (auto _ : state) {
    absl::StatusOr<StepResult> r = env->Step(Alternating(regions, step++));
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
    if (r->terminated) (void)env->Reset(std::nullopt, {});
  }
  state.SetItemsProcessed(state.iterations());
}

// `n` environments, environment i reset with seed i.
std::vector<std::unique_ptr<SessionEnv>> MakeResetEnvs(int n) {
  std::vector<std::unique_ptr<SessionEnv>> envs;
  for (int i = 0; i < n; ++i) {
    envs.push_back(MakeEnv());
    (void)envs.back()->Reset(i, {});
  }
  return envs;
}

// N environments stepped in turn by one thread: what a batch costs without parallelism
// (N environments' state does not stay in cache as one environment's does).
void BM_InProcessRoundRobin(benchmark::State& state) {
  const World& w = TheWorld();
  std::vector<std::unique_ptr<SessionEnv>> envs = MakeResetEnvs(w.batch);
  const int regions = envs[0]->spec().num_regions;
  uint64_t step = 0;
  for (auto _ : state) {
    const Action a = Alternating(regions, step++);
    for (auto& env : envs) {
      absl::StatusOr<StepResult> r = env->Step(a);
      if (r.ok() && r->terminated) (void)env->Reset(std::nullopt, {});
      benchmark::DoNotOptimize(r);
    }
  }
  state.SetItemsProcessed(state.iterations() * envs.size());
}

void BM_InProcessParallel(benchmark::State& state) {
  const World& w = TheWorld();
  std::vector<std::unique_ptr<SessionEnv>> envs = MakeResetEnvs(w.batch);
  const int regions = envs[0]->spec().num_regions;
  // The calling thread works too: T threads in all, as in a server worker's step_batch.
  ThreadPool pool(std::max(1, w.threads - 1));
  uint64_t step = 0;
  for (auto _ : state) {
    const Action a = Alternating(regions, step++);
    pool.ParallelFor(envs.size(), [&](size_t i) {
      absl::StatusOr<StepResult> r = envs[i]->Step(a);
      if (r.ok() && r->terminated) (void)envs[i]->Reset(std::nullopt, {});
      benchmark::DoNotOptimize(r);
    });
  }
  state.SetItemsProcessed(state.iterations() * envs.size());
}

void ClientStep(benchmark::State& state, const ClientOptions& options) {
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
  if (!c.ok()) return state.SkipWithError(c.status().ToString().c_str());
  absl::StatusOr<protocol::MakeReply> m = (*c)->Make({});
  if (!m.ok()) return state.SkipWithError(m.status().ToString().c_str());
  (void)(*c)->Reset(m->session, 1);
  uint64_t step = 0;
  for (auto _ : state) {
    absl::StatusOr<StepResult> r = (*c)->Step(m->session, Alternating(m->spec.num_regions, step++));
    if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    if (r->terminated) (void)(*c)->Reset(m->session);
  }
  (void)(*c)->Close(m->session);
  state.SetItemsProcessed(state.iterations());
}

ClientOptions Plain(const std::unique_ptr<Server>& server, double timeout_s = 30) {
  ClientOptions o;
  o.endpoint = server->endpoint();
  o.timeout_s = timeout_s;
  return o;
}

void BM_ClientStepIpc(benchmark::State& state) { ClientStep(state, Plain(TheWorld().ipc_server)); }
void BM_ClientStepTcp(benchmark::State& state) { ClientStep(state, Plain(TheWorld().tcp_server)); }
void BM_ClientStepTcpCurve(benchmark::State& state) {
  if (TheWorld().curve_server == nullptr) return state.SkipWithError("no CURVE in this libzmq");
  ClientStep(state, TheWorld().curve_client);
}
// The server with inline_quick_requests off: every step goes to a worker and back.
void BM_ClientStepIpcHandoff(benchmark::State& state) {
  ClientStep(state, Plain(TheWorld().handoff_server));
}

void Echo(benchmark::State& state, EchoServer& echo, size_t request_bytes, size_t reply_bytes) {
  echo.set_reply_bytes(reply_bytes);
  zmq::context_t context(1);
  zmq::socket_t s(context, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(echo.endpoint());
  const std::string body(request_bytes > 16 ? request_bytes - 16 : 1, 'a');
  for (auto _ : state) {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pk.pack_map(1);
    pk.pack_str(4);
    pk.pack_str_body("data", 4);
    pk.pack_bin(static_cast<uint32_t>(body.size()));
    pk.pack_bin_body(body.data(), static_cast<uint32_t>(body.size()));
    s.send(zmq::buffer(buf.data(), buf.size()), zmq::send_flags::none);
    zmq::message_t reply;
    if (!s.recv(reply, zmq::recv_flags::none)) return state.SkipWithError("no echo");
    msgpack::object_handle oh =
        msgpack::unpack(static_cast<const char*>(reply.data()), reply.size());
    benchmark::DoNotOptimize(oh.get().type);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_EchoIpc(benchmark::State& state) {
  World& w = TheWorld();
  Echo(state, *w.ipc_echo, w.step_request_bytes, w.step_reply_bytes);
}
void BM_EchoTcp(benchmark::State& state) {
  World& w = TheWorld();
  Echo(state, *w.tcp_echo, w.step_request_bytes, w.step_reply_bytes);
}
void BM_EchoBatch(benchmark::State& state) {
  World& w = TheWorld();
  Echo(state, *w.ipc_echo, w.batch_request_bytes, w.batch_reply_bytes);
  state.SetItemsProcessed(state.iterations() * w.batch);
}

void Batch(benchmark::State& state, const ClientOptions& options) {
  const World& w = TheWorld();
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
  if (!c.ok()) return state.SkipWithError(c.status().ToString().c_str());
  protocol::StepBatchRequest batch;
  int regions = 0;
  for (int i = 0; i < w.batch; ++i) {
    absl::StatusOr<protocol::MakeReply> m = (*c)->Make({});
    if (!m.ok()) return state.SkipWithError(m.status().ToString().c_str());
    (void)(*c)->Reset(m->session, i);
    batch.sessions.push_back(m->session);
    regions = m->spec.num_regions;
  }
  batch.autoreset = protocol::Autoreset::kSameStep;
  uint64_t step = 0;
  for (auto _ : state) {
    batch.actions.assign(batch.sessions.size(), Alternating(regions, step++));
    absl::StatusOr<protocol::StepBatchReply> r = (*c)->StepBatch(batch);
    if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    benchmark::DoNotOptimize(r);
  }
  for (const protocol::SessionId& s : batch.sessions) (void)(*c)->Close(s);
  state.SetItemsProcessed(state.iterations() * batch.sessions.size());
}

void BM_Batch(benchmark::State& state) { Batch(state, Plain(TheWorld().ipc_server, 60)); }
void BM_BatchTcp(benchmark::State& state) { Batch(state, Plain(TheWorld().tcp_server, 60)); }
void BM_BatchTcpCurve(benchmark::State& state) {
  if (TheWorld().curve_server == nullptr) return state.SkipWithError("no CURVE in this libzmq");
  Batch(state, TheWorld().curve_client);
}

// The sizes of a real step and step_batch exchange, for the echoes.
void MeasureMessageSizes(World& w) {
  std::unique_ptr<SessionEnv> env = MakeEnv();
  absl::StatusOr<StepResult> first = env->Reset(1, {});
  absl::StatusOr<StepResult> r = env->Step(Alternating(env->spec().num_regions, 0));
  const Action a = Alternating(env->spec().num_regions, 1);
  w.step_request_bytes =
      protocol::EncodeRequest(protocol::Request{protocol::Op::kStep, protocol::kVersion, 1,
                                                protocol::StepRequest{std::string(32, '0'), a}})
          .size();
  w.step_reply_bytes = protocol::EncodeReply(protocol::Reply{1, protocol::StepReply{*r}}).size();
  protocol::StepBatchRequest b;
  protocol::StepBatchReply br;
  for (int i = 0; i < w.batch; ++i) {
    b.sessions.push_back(std::string(24, '0') + std::to_string(12345678 + i));  // handle-sized
    b.actions.push_back(a);
    br.results.push_back(*r);
    br.was_reset.push_back(0);
  }
  b.autoreset = protocol::Autoreset::kSameStep;
  w.batch_request_bytes =
      protocol::EncodeRequest(protocol::Request{protocol::Op::kStepBatch, protocol::kVersion, 1, b})
          .size();
  w.batch_reply_bytes = protocol::EncodeReply(protocol::Reply{1, br}).size();
}

double SessionMemoryBytes(const World& w, int sessions, uint64_t* asset_bytes) {
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(Plain(w.ipc_server, 120));
  if (!c.ok()) return -1;
  const uint64_t before = (*c)->Stats()->rss_bytes;
  std::vector<protocol::SessionId> ids;
  for (int i = 0; i < sessions; ++i) {
    absl::StatusOr<protocol::MakeReply> m = (*c)->Make({});
    if (!m.ok()) return -1;
    (void)(*c)->Reset(m->session, i);  // an episode in progress holds its state
    (void)(*c)->Step(m->session, Alternating(m->spec.num_regions, i));
    ids.push_back(m->session);
  }
  absl::StatusOr<protocol::StatsReply> after = (*c)->Stats();
  *asset_bytes = after->asset_bytes;
  for (const protocol::SessionId& id : ids) (void)(*c)->Close(id);
  return static_cast<double>(after->rss_bytes - before) / sessions;
}

int Main(int argc, char** argv) {
  World& w = TheWorld();
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      w.threads = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--action") == 0 && i + 1 < argc) {
      const std::string a = argv[++i];
      g_action = a == "static" ? ActionKind::kStatic
                 : a == "half" ? ActionKind::kHalf
                               : ActionKind::kTwo;
    } else if (std::strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
      w.batch = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--help") == 0) {
      std::printf(
          "usage: %s [--threads T] [--batch N] [--action static|two|half] "
          "[Google Benchmark options]\n",
          argv[0]);
      return 0;
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());

  w.dir = (fs::temp_directory_path() / ("tiergym-bench-env-" + std::to_string(getpid()))).string();
  fs::create_directories(w.dir);
  std::fprintf(stderr, "generating the bundled profiles into %s ...\n", w.dir.c_str());
  absl::StatusOr<std::vector<ServedProfile>> profiles = EnsureBundledProfiles(w.dir, nullptr);
  if (!profiles.ok()) {
    std::fprintf(stderr, "%s\n", profiles.status().ToString().c_str());
    return 1;
  }
  for (const ServedProfile& p : *profiles) w.provider_options.default_profiles.push_back(p.dir);
  w.provider = std::make_shared<PlacementProvider>(w.provider_options);
  MeasureMessageSizes(w);

  ServerOptions so;
  so.threads = w.threads;
  ServiceOptions service;
  service.max_sessions = 100000;
  so.endpoint = "ipc://" + w.dir + "/bench.sock";
  w.ipc_server = std::move(*Server::Create(so, service, w.provider));
  so.endpoint = "tcp://127.0.0.1:0";
  w.tcp_server = std::move(*Server::Create(so, service, w.provider));
  so.endpoint = "ipc://" + w.dir + "/handoff.sock";
  so.inline_quick_requests = false;
  w.handoff_server = std::move(*Server::Create(so, service, w.provider));
  // The same tcp server with CURVE, and its one allowed client.
  absl::StatusOr<CurveKeyPair> server_keys = MakeCurveKeyPair();
  absl::StatusOr<CurveKeyPair> client_keys = MakeCurveKeyPair();
  if (server_keys.ok() && client_keys.ok()) {
    so.endpoint = "tcp://127.0.0.1:0";
    so.inline_quick_requests = true;
    so.curve_secret_key = server_keys->secret_key;
    so.curve_allowed_clients = {client_keys->public_key};
    w.curve_server = std::move(*Server::Create(so, service, w.provider));
    w.curve_client = Plain(w.curve_server, 60);
    w.curve_client.curve_server_key = server_keys->public_key;
    w.curve_client.curve_public_key = client_keys->public_key;
    w.curve_client.curve_secret_key = client_keys->secret_key;
    w.curve_thread = std::thread([&] { (void)w.curve_server->Run(); });
  }
  w.ipc_thread = std::thread([&] { (void)w.ipc_server->Run(); });
  w.tcp_thread = std::thread([&] { (void)w.tcp_server->Run(); });
  w.handoff_thread = std::thread([&] { (void)w.handoff_server->Run(); });
  w.ipc_echo = std::make_unique<EchoServer>(w.echo_context, "ipc://" + w.dir + "/echo.sock");
  w.tcp_echo = std::make_unique<EchoServer>(w.echo_context, "tcp://127.0.0.1:0");

  const std::pair<const char*, void (*)(benchmark::State&)> benchmarks[] = {
      {"BM_InProcess", BM_InProcess},
      {"BM_InProcessRoundRobin", BM_InProcessRoundRobin},
      {"BM_InProcessParallel", BM_InProcessParallel},
      {"BM_ClientStepIpc", BM_ClientStepIpc},
      {"BM_ClientStepIpcHandoff", BM_ClientStepIpcHandoff},
      {"BM_EchoIpc", BM_EchoIpc},
      {"BM_ClientStepTcp", BM_ClientStepTcp},
      {"BM_EchoTcp", BM_EchoTcp},
      {"BM_Batch", BM_Batch},
      {"BM_EchoBatch", BM_EchoBatch},
      {"BM_ClientStepTcpCurve", BM_ClientStepTcpCurve},
      {"BM_BatchTcp", BM_BatchTcp},
      {"BM_BatchTcpCurve", BM_BatchTcpCurve},
  };
  for (const auto& [name, fn] : benchmarks) {
    benchmark::RegisterBenchmark(name, fn)->Unit(benchmark::kMicrosecond)->UseRealTime();
  }
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);

  uint64_t asset_bytes = 0;
  const double per_session = SessionMemoryBytes(w, 1000, &asset_bytes);

  const double in_process = reporter.Seconds("BM_InProcess");
  const double round_robin = reporter.Seconds("BM_InProcessRoundRobin") / w.batch;  // per step
  const double parallel = reporter.Seconds("BM_InProcessParallel") / w.batch;       // per step
  const double ipc = reporter.Seconds("BM_ClientStepIpc"),
               echo_ipc = reporter.Seconds("BM_EchoIpc");
  const double tcp = reporter.Seconds("BM_ClientStepTcp"),
               echo_tcp = reporter.Seconds("BM_EchoTcp");
  const double handoff = reporter.Seconds("BM_ClientStepIpcHandoff");
  const double batch = reporter.Seconds("BM_Batch") / w.batch;  // per step
  const double echo_batch = reporter.Seconds("BM_EchoBatch");
  const double tcp_curve = reporter.Seconds("BM_ClientStepTcpCurve");
  const double batch_tcp = reporter.Seconds("BM_BatchTcp") / w.batch;
  const double batch_tcp_curve = reporter.Seconds("BM_BatchTcpCurve") / w.batch;

  std::printf(
      "\n=== environment summary: 4 bundled profiles on knl, 64 regions, 100 steps, "
      "%s; %d server threads, batch of %d ===\n",
      ActionName(), w.threads, w.batch);
  std::printf("message sizes: step %zu B request / %zu B reply; batch %zu B / %zu B\n",
              w.step_request_bytes, w.step_reply_bytes, w.batch_request_bytes, w.batch_reply_bytes);
  auto rate = [](const char* what, double seconds) {
    if (seconds > 0) std::printf("%-50s %12.0f steps/s\n", what, 1 / seconds);
  };
  rate("in-process, 1 thread (C++ API)", in_process);
  rate("in-process, N envs in turn, 1 thread", round_robin);
  rate("in-process, N envs, T threads", parallel);
  rate("synchronous client, ipc", ipc);
  rate("synchronous client, tcp loopback", tcp);
  rate("synchronous client, ipc, every step via a worker", handoff);
  rate("batched (step_batch), ipc", batch);
  rate("synchronous client, tcp loopback, CURVE", tcp_curve);
  rate("batched (step_batch), tcp loopback", batch_tcp);
  rate("batched (step_batch), tcp loopback, CURVE", batch_tcp_curve);
  std::printf("%-50s %12.0f round trips/s\n", "echo, ipc (step sizes)",
              echo_ipc > 0 ? 1 / echo_ipc : 0);
  std::printf("%-50s %12.0f round trips/s\n", "echo, tcp (step sizes)",
              echo_tcp > 0 ? 1 / echo_tcp : 0);
  std::printf("%-50s %12.0f round trips/s\n", "echo, ipc (batch sizes)",
              echo_batch > 0 ? w.batch / echo_batch : 0);
  auto ratio = [](const char* what, double fast_seconds, double slow_seconds, double goal) {
    if (fast_seconds <= 0 || slow_seconds <= 0) return;
    const double r = fast_seconds / slow_seconds;  // rate of the second / rate of the first
    std::printf("%-58s %6.2f", what, r);
    if (goal > 0) std::printf("   (goal >= %.2f: %s)", goal, r >= goal ? "met" : "NOT met");
    std::printf("\n");
  };
  ratio("synchronous client ipc / echo ipc", echo_ipc, ipc, 0.5);
  ratio("synchronous client tcp / echo tcp", echo_tcp, tcp, 0.5);
  ratio("batched ipc / in-process parallel (same threads)", parallel, batch, 0.8);
  ratio("batched ipc / echo of the batch sizes", echo_batch / w.batch, batch, 0);
  // The transport's own bound on the ratio above the goal: moving a batch's bytes, with
  // no server at all, against stepping the same environments in-process.
  ratio("bound: echo of the batch sizes / in-process parallel", parallel, echo_batch / w.batch, 0);
  ratio("synchronous client ipc / in-process 1 thread", in_process, ipc, 0);
  ratio("synchronous client ipc: answered inline / via a worker", handoff, ipc, 0);
  ratio("CURVE / plain, synchronous client tcp (steps/s)", tcp, tcp_curve, 0);
  ratio("CURVE / plain, batched tcp (steps/s)", batch_tcp, batch_tcp_curve, 0);
  // What the server adds to a step beyond the environment itself, against the echo's
  // round trip: 1 means the server costs exactly a bare ZeroMQ + msgpack exchange.
  if (ipc > 0 && in_process > 0 && echo_ipc > 0) {
    std::printf("%-58s %6.2f\n", "server overhead per step (ipc) / echo round trip",
                (ipc - in_process) / echo_ipc);
  }
  if (tcp > 0 && in_process > 0 && echo_tcp > 0) {
    std::printf("%-58s %6.2f\n", "server overhead per step (tcp) / echo round trip",
                (tcp - in_process) / echo_tcp);
  }
  std::printf(
      "server memory per session (1000 sessions open, one episode each): %.1f KB;"
      " shared assets %.1f MB\n",
      per_session / 1024, asset_bytes / 1e6);

  w.ipc_server->Stop();
  w.tcp_server->Stop();
  w.handoff_server->Stop();
  if (w.curve_server != nullptr) {
    w.curve_server->Stop();
    w.curve_thread.join();
  }
  w.ipc_thread.join();
  w.tcp_thread.join();
  w.handoff_thread.join();
  w.ipc_echo.reset();
  w.tcp_echo.reset();
  benchmark::Shutdown();
  fs::remove_all(w.dir);
  return 0;
}

}  // namespace
}  // namespace tiergym::env

int main(int argc, char** argv) { return tiergym::env::Main(argc, argv); }
