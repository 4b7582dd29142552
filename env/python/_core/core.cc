// tiergym._core: the in-process vector environment (env/vector/vector_env.h) for Python.
//
//   core = VectorCore(configs: list[dict], threads, autoreset)
//                                   one environment per configuration, its values str, int,
//                                   float, bool or a list/tuple of str, kept typed to
//                                   ParseEnvConfig as a `make` message keeps them
//                                   (env/spec/config_value.h; TypeError on "config.KEY" for
//                                   any other type); autoreset: "next_step", "same_step" or
//                                   "disabled"
//   core.spec, core.configs         the make reply's spec (arrays as numpy) and each
//                                   environment's configuration in force
//   core.buffers()                  numpy views of the output arrays (owned by core)
//   core.reset(mask, seeds, profiles) -> flags
//                                   mask: bool/uint8 [num_envs] or None (all); seeds: list of
//                                   int|None or empty; profiles: list of str|None or empty;
//                                   writes the rows of the environments reset
//   core.step(actions) -> flags     actions: int64 [num_envs, action_size], C order; flags:
//                                   1 an episode ended, 2 a move was refused, 4 a reset
//   core.send(env_ids, actions)     int32 [k], int64 [k, action_size]
//   core.send_reset(seeds, profiles) queues every environment's reset (async_reset)
//   core.recv(batch) -> flags       rows 0..batch-1 of the buffers, env_id says which env
//
//   node = CoschedCore(config: dict) K co-scheduled tenants on one node
//                                   (env/cosched/cosched_env.h); config: its keys
//                                   (CoschedConfigKeys), typed as above; a tenant given by a
//                                   bundled application's name ("minife") is its bundled
//                                   profile for the configuration's machine (generated on
//                                   first use)
//   node.spec, node.tenant_names    a tenant's spaces (as VectorCore.spec; and
//                                   tenant_region_bytes: per tenant, its regions' sizes),
//                                   the tenants
//   node.reset(seed) -> dict        {"tenants": [{"obs", "reward", "active", "waiting",
//   node.step(actions) -> dict       "terminated", "info": {...}}], "step", "step_ns",
//                                   "elapsed_ns", "tier_used_bytes",
//                                   "tier_bandwidth_gbps", "done"}; actions: one int64 array
//                                   (or None: keep) per tenant
//
//   futex_wake(address)             the shared-memory transport's waits
//   wait_seq(address, seq, spins, seconds, spin_seconds=0) -> bool
//                                   (env/python/tiergym/_shm.py), without ctypes' cost per
//                                   call: FUTEX_WAKE of the 32-bit word at `address`; reads
//                                   of the 64-bit word at `address` until it holds `seq`
//                                   (`spins` reads, more for up to `spin_seconds`, then a
//                                   FUTEX_WAIT on its low 32 bits of at most `seconds`, the
//                                   GIL released): whether it does.
//                                   `address` must lie in a mapping of the caller's (a
//                                   segment it mapped); the futex calls themselves fail
//                                   harmlessly on any other
//
// The GIL is released while environments reset or step; the buffers are written in place,
// so Python reads them without a copy (env/python/tiergym/inprocess.py wraps them into
// Gymnasium's vector API). Errors: ValueError for bad arguments (the message names the
// argument), RuntimeError for calls out of order.
#include <linux/futex.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "env/cosched/cosched_env.h"
#include "env/profile_assets.h"
#include "env/provider/bundled_profiles.h"
#include "env/spec/info_columns.h"
#include "env/vector/make_vector_env.h"
#include "env/vector/vector_env.h"
#include "traces/base/cpu_relax.h"
#include "traces/base/field_status.h"
#include "traces/base/strings.h"

namespace nb = nanobind;

namespace tiergym::env {
namespace {

void Raise(const absl::Status& s) {
  const std::string message(s.message());
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
      throw nb::value_error(message.c_str());
    default:
      throw std::runtime_error(std::string(absl::StatusCodeToString(s.code())) + ": " + message);
  }
}

// One configuration from Python, its values typed as the protocol types them
// (env/protocol ReadConfig): str, int (64-bit), float, bool, or a list or tuple of str.
// `where` leads the message of a refusal ("configs[1]: ", or empty). Throws TypeError
// naming the key (and the element) for anything else.
ConfigMap ToConfigMap(const nb::dict& config, const std::string& where) {
  ConfigMap out;
  auto refuse = [&](const std::string& field, const std::string& expected, nb::handle got) {
    const std::string type = nb::cast<std::string>(nb::type_name(got.type()));
    throw nb::type_error((where + field + ": expected " + expected + ", got " + type).c_str());
  };
  for (auto [k, v] : config) {
    if (!nb::isinstance<nb::str>(k)) {
      refuse("config", "string keys", k);
    }
    const std::string key = nb::cast<std::string>(k);
    const std::string field = "config." + key;
    ConfigValue value;
    int64_t integer = 0;
    if (nb::isinstance<nb::bool_>(v)) {  // before int: a bool is an int in Python
      value = ConfigValue(nb::cast<bool>(v));
    } else if (nb::isinstance<nb::int_>(v)) {
      if (!nb::try_cast<int64_t>(v, integer)) refuse(field, "a 64-bit integer", v);
      value = ConfigValue(integer);
    } else if (nb::isinstance<nb::float_>(v)) {
      value = ConfigValue(nb::cast<double>(v));
    } else if (nb::isinstance<nb::str>(v)) {
      value = ConfigValue(nb::cast<std::string>(v));
    } else if (nb::isinstance<nb::list>(v) || nb::isinstance<nb::tuple>(v)) {
      ConfigValue::List list;
      size_t j = 0;
      for (nb::handle item : v) {
        if (!nb::isinstance<nb::str>(item)) {
          refuse(field + "[" + std::to_string(j) + "]", "a string", item);
        }
        list.push_back(nb::cast<std::string>(item));
        ++j;
      }
      value = ConfigValue(std::move(list));
    } else {
      refuse(field, "a string, integer, number, bool or list of strings", v);
    }
    out[key] = std::move(value);
  }
  return out;
}

template <typename T>
nb::object View(T* data, std::initializer_list<size_t> shape, nb::handle owner) {
  return nb::cast(nb::ndarray<nb::numpy, T>(data, shape, owner));
}
nb::object BoolView(uint8_t* data, size_t n, nb::handle owner) {
  return nb::cast(nb::ndarray<nb::numpy, bool>(static_cast<void*>(data), {n}, owner));
}

nb::object SpaceDict(const Space& s) {
  nb::dict d;
  switch (s.kind) {
    case Space::kBox:
      d["type"] = "box";
      d["shape"] = s.shape;
      d["dtype"] = "float32";
      d["low"] = static_cast<double>(s.low);
      d["high"] = static_cast<double>(s.high);
      break;
    case Space::kDiscrete:
      d["type"] = "discrete";
      d["n"] = s.n;
      d["dtype"] = "int64";
      break;
    case Space::kMultiDiscrete:
      d["type"] = "multi_discrete";
      d["shape"] = s.shape;
      d["nvec"] = s.n;
      d["dtype"] = "int64";
      break;
  }
  return d;
}

template <typename T>
nb::object Copy(const std::vector<T>& v, std::initializer_list<size_t> shape) {
  // A numpy array owning a copy (the spec's arrays are small and read once).
  auto* heap = new std::vector<T>(v);
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T>(heap->data(), shape, owner));
}

// The spec's spaces, tiers and observation layout, as the Python side reads them (the
// vector environment adds its region bounds, the co-scheduling node its tenants' regions).
nb::dict SpecDict(const EnvSpec& s) {
  nb::dict d;
  d["observation"] = SpaceDict(s.observation);
  d["action"] = SpaceDict(s.action);
  d["tiers"] = s.tiers;
  d["profiles"] = s.profiles;
  d["num_regions"] = s.num_regions;
  d["obs_region_features"] = s.obs_region_features;
  d["obs_global_offset"] = s.obs_global_offset;
  d["tier_capacity_bytes"] = Copy(s.tier_capacity_bytes, {s.tier_capacity_bytes.size()});
  d["tier_migration_gbps"] = Copy(s.tier_migration_gbps, {s.tier_migration_gbps.size()});
  d["tier_bandwidth_gbps"] = Copy(s.tier_bandwidth_gbps, {s.tier_bandwidth_gbps.size()});
  return d;
}

class VectorCore {
 public:
  // One call at a time: the GIL is released while a call runs, so a second Python thread
  // could otherwise enter the (thread-compatible) core concurrently.
  std::unique_lock<std::mutex> Enter() {
    std::unique_lock<std::mutex> lock(call_mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      throw std::runtime_error(
          "the vector environment is in use by another thread; call it from one thread at a "
          "time");
    }
    return lock;
  }

  VectorCore(const std::vector<nb::dict>& dicts, int threads, const std::string& autoreset) {
    // "configs[i]: " leads a refusal when the entries differ (as MakeVectorEnv's messages).
    bool all_equal = true;
    for (const nb::dict& d : dicts) all_equal = all_equal && d.equal(dicts[0]);
    std::vector<ConfigMap> configs;
    for (size_t i = 0; i < dicts.size(); ++i) {
      configs.push_back(ToConfigMap(
          dicts[i], all_equal ? std::string() : "configs[" + std::to_string(i) + "]: "));
    }
    VectorEnvOptions options;
    options.threads = threads;
    if (autoreset == "next_step") {
      options.autoreset = AutoresetMode::kNextStep;
    } else if (autoreset == "same_step") {
      options.autoreset = AutoresetMode::kSameStep;
    } else if (autoreset == "disabled") {
      options.autoreset = AutoresetMode::kDisabled;
    } else {
      throw nb::value_error(
          ("autoreset: \"" + autoreset + "\" is not next_step, same_step or disabled").c_str());
    }
    absl::StatusOr<MadeVectorEnv> made = [&] {
      nb::gil_scoped_release release;  // loading profiles may take a while
      return MakeVectorEnv(configs, options);
    }();
    if (!made.ok()) Raise(made.status());
    env_ = std::move(made->env);
    configs_ = std::move(made->configs);
    buffers_ = std::make_unique<BatchBuffers>(*env_);
  }

  // A core of env_ids.size() environments, forks of this one's env_ids[k] at their state
  // (VectorEnv::Fork; no memory budget in process), its buffers holding their current
  // rows (copied from this one's, whose rows are environments: the caller checks).
  VectorCore* Fork(const std::vector<int32_t>& env_ids) {
    absl::StatusOr<std::unique_ptr<VectorEnv>> forked;
    auto entered = Enter();
    forked = env_->Fork(env_ids, nullptr);
    if (!forked.ok()) Raise(forked.status());
    std::unique_ptr<VectorCore> core(new VectorCore());
    core->env_ = *std::move(forked);
    for (const int32_t i : env_ids) core->configs_.push_back(configs_[static_cast<size_t>(i)]);
    core->buffers_ = std::make_unique<BatchBuffers>(*core->env_);
    env_->CopyRows(buffers_->out, env_ids, core->buffers_->out);
    return core.release();
  }

  [[nodiscard]] nb::dict Spec() const {
    const EnvSpec& s = env_->spec();
    nb::dict d = SpecDict(s);
    d["region_bounds"] =
        Copy(s.region_bounds, {s.profiles.size(), static_cast<size_t>(s.num_regions), 2});
    return d;
  }

  // Every info column (ForEachInfoColumn: the columns the protocol's schema declares) as
  // a view [n] or [n, width]; the mask as the protocol shapes it (PackMaskColumn): [n,
  // regions, choices] for a MultiDiscrete action (placement mode: the tiers; keep mode:
  // 1 + tiers), else [n, mask].
  static nb::dict InfoViews(const InfoColumns& c, size_t n, const InfoShape& shape,
                            nb::handle owner) {
    nb::dict d;
    ForEachInfoColumn([&](const char* name, auto member, const char*, InfoWidth width, int) {
      if (width == InfoWidth::kOne) {
        d[name] = View(c.*member, {n}, owner);
      } else if (width == InfoWidth::kMask && shape.mask_columns > 0) {
        d[name] = View(c.*member, {n, shape.mask / shape.mask_columns, shape.mask_columns}, owner);
      } else {
        d[name] = View(c.*member, {n, ColumnWidth(width, shape)}, owner);
      }
    });
    return d;
  }

  // Views of every output array; `self` owns them.
  static nb::dict Buffers(nb::handle self) {
    auto& c = nb::cast<VectorCore&>(self);
    const auto n = static_cast<size_t>(c.env_->num_envs());
    const size_t obs = c.env_->ObsSize();
    nb::dict d;
    d["obs"] = View(c.buffers_->obs.data(), {n, obs}, self);
    d["reward"] = View(c.buffers_->reward.data(), {n}, self);
    d["terminated"] = BoolView(c.buffers_->terminated.data(), n, self);
    d["truncated"] = BoolView(c.buffers_->truncated.data(), n, self);
    d["env_id"] = View(c.buffers_->env_id.data(), {n}, self);
    d["ended"] = BoolView(c.buffers_->ended.data(), n, self);
    d["final_obs"] = View(c.buffers_->final_obs.data(), {n, obs}, self);
    const InfoShape shape = InfoShapeOf(c.env_->spec());
    d["info"] = InfoViews(c.buffers_->out.info, n, shape, self);
    d["final_info"] = InfoViews(c.buffers_->out.final_info, n, shape, self);
    return d;
  }

  int Reset(const std::optional<
                nb::ndarray<const bool, nb::ndim<1>, nb::c_contig, nb::device::cpu>>& mask,
            const std::vector<std::optional<uint64_t>>& seeds,
            const std::vector<std::optional<std::string>>& profiles) {
    std::vector<uint8_t> m;
    if (mask) {
      m.resize(mask->size());
      for (size_t i = 0; i < m.size(); ++i) m[i] = mask->data()[i] ? 1 : 0;
    }
    absl::Status s;
    auto entered = Enter();
    {
      nb::gil_scoped_release release;
      s = env_->Reset(m, seeds, profiles, buffers_->out);
    }
    if (!s.ok()) Raise(s);
    return Flags();
  }

  void SendReset(const std::vector<std::optional<uint64_t>>& seeds,
                 const std::vector<std::optional<std::string>>& profiles) {
    absl::Status s;
    auto entered = Enter();
    {
      nb::gil_scoped_release release;
      s = env_->SendReset(seeds, profiles);
    }
    if (!s.ok()) Raise(s);
  }

  // What the call's rows hold: 1 an ended episode (final_* are set), 2 a refused move,
  // 4 a reset environment.
  [[nodiscard]] int Flags() const {
    const BatchBuffers& b = *buffers_;
    return (b.any_ended ? 1 : 0) | (b.any_refused ? 2 : 0) | (b.any_reset ? 4 : 0);
  }

  int Step(const nb::ndarray<const int64_t, nb::c_contig, nb::device::cpu>& actions) {
    absl::Status s;
    auto entered = Enter();
    {
      nb::gil_scoped_release release;
      s = env_->Step(actions.data(), actions.size(), buffers_->out);
    }
    if (!s.ok()) Raise(s);
    return Flags();
  }

  void Send(const nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>& env_ids,
            const nb::ndarray<const int64_t, nb::c_contig, nb::device::cpu>& actions) {
    std::vector<int32_t> ids(env_ids.data(), env_ids.data() + env_ids.size());
    absl::Status s;
    auto entered = Enter();
    {
      nb::gil_scoped_release release;
      s = env_->Send(ids, actions.data(), actions.size());
    }
    if (!s.ok()) Raise(s);
  }

  int Recv(int batch) {
    absl::Status s;
    auto entered = Enter();
    {
      nb::gil_scoped_release release;
      s = env_->Recv(batch, buffers_->out);
    }
    if (!s.ok()) Raise(s);
    return Flags();
  }

  [[nodiscard]] int num_envs() const { return env_->num_envs(); }
  [[nodiscard]] int threads() const { return env_->threads(); }
  [[nodiscard]] int in_flight() const { return env_->in_flight(); }
  [[nodiscard]] size_t action_size() const { return env_->ActionSize(); }
  [[nodiscard]] const std::vector<std::map<std::string, std::string>>& configs() const {
    return configs_;
  }

 private:
  VectorCore() = default;  // Fork's
  std::mutex call_mu_;
  std::unique_ptr<VectorEnv> env_;
  std::vector<std::map<std::string, std::string>> configs_;
  std::unique_ptr<BatchBuffers> buffers_;  // the arrays Python views
};

// The co-scheduling node (env/cosched) for Python: K tenants, results copied into small
// dicts and arrays per call (a node has a handful of tenants).
class CoschedCore {
 public:
  explicit CoschedCore(const nb::dict& dict) {
    ConfigMap keys = ToConfigMap(dict, "");
    absl::StatusOr<std::shared_ptr<const CoschedAssets>> assets = [&] {
      nb::gil_scoped_release release;  // generating and loading profiles may take a while
      return Load(std::move(keys));
    }();
    if (!assets.ok()) Raise(assets.status());
    absl::StatusOr<std::unique_ptr<CoschedEnv>> env = CoschedEnv::Create(*assets);
    if (!env.ok()) Raise(env.status());
    env_ = *std::move(env);
  }

  [[nodiscard]] nb::dict Spec() const {
    const EnvSpec& s = env_->assets().tenant_spec();
    nb::dict d = SpecDict(s);
    nb::list region_bytes;  // per tenant: its regions' sizes
    for (size_t i = 0; i < env_->assets().num_tenants(); ++i) {
      const std::vector<uint64_t>& bytes = env_->assets().tenant_profile(i).region_bytes;
      region_bytes.append(Copy(bytes, {bytes.size()}));
    }
    d["tenant_region_bytes"] = region_bytes;
    return d;
  }
  [[nodiscard]] std::vector<std::string> tenant_names() const {
    return env_->assets().tenant_names();
  }
  [[nodiscard]] size_t num_tenants() const { return env_->assets().num_tenants(); }

  nb::dict Reset(std::optional<uint64_t> seed) {
    absl::StatusOr<NodeStep> r = [&] {
      nb::gil_scoped_release release;
      return env_->Reset(seed);
    }();
    if (!r.ok()) Raise(r.status());
    return ToDict(*r);
  }

  nb::dict Step(
      const std::vector<
          std::optional<nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>>>&
          actions) {
    std::vector<Action> acts(actions.size());
    for (size_t i = 0; i < actions.size(); ++i) {
      if (actions[i])
        acts[i].values.assign(actions[i]->data(), actions[i]->data() + actions[i]->size());
    }
    absl::StatusOr<NodeStep> r = [&] {
      nb::gil_scoped_release release;
      return env_->Step(acts);
    }();
    if (!r.ok()) Raise(r.status());
    return ToDict(*r);
  }

 private:
  // Tenants named by a bundled application are its bundled profile for the machine.
  static absl::StatusOr<std::shared_ptr<const CoschedAssets>> Load(ConfigMap keys) {
    auto tenants = keys.find("tenants");
    if (tenants != keys.end()) {
      std::vector<std::string> names;
      if (const ConfigValue::List* list = tenants->second.list()) {
        names = *list;
      } else if (const std::string* text = tenants->second.string()) {
        for (std::string_view f : SplitFields(*text, ',')) names.emplace_back(f);
      }
      const std::vector<std::string>& apps = BundledProfileApps();
      const bool any_bundled = std::any_of(names.begin(), names.end(), [&](const std::string& n) {
        return std::find(apps.begin(), apps.end(), n) != apps.end();
      });
      if (any_bundled) {
        std::string machine = "knl";
        if (auto m = keys.find("machine"); m != keys.end() && m->second.string() != nullptr) {
          machine = *m->second.string();
        }
        absl::StatusOr<std::string> cache = DefaultCacheDir();
        if (!cache.ok()) return cache.status();
        absl::StatusOr<std::vector<ServedProfile>> bundled =
            EnsureBundledProfiles(*cache, /*progress=*/{}, machine);
        if (!bundled.ok()) return WithField(bundled.status(), "machine");
        for (std::string& n : names) {
          for (const ServedProfile& sp : *bundled) {
            if (sp.name == n) n = sp.dir;
          }
        }
        tenants->second = ConfigValue(ConfigValue::List(names));
      }
    }
    absl::StatusOr<CoschedConfig> config = ParseCoschedConfig(keys);
    if (!config.ok()) return config.status();
    return CoschedAssets::Load(*config);
  }

  // A step info's field as Python takes it: numbers and strings as they are, the refused
  // regions as a list, other arrays as numpy copies.
  static nb::object InfoValue(const std::vector<int>& v) { return nb::cast(v); }
  template <typename T>
  static nb::object InfoValue(const std::vector<T>& v) {
    return Copy(v, {v.size()});
  }
  template <typename T>
  static nb::object InfoValue(const T& v) {
    return nb::cast(v);
  }

  static nb::dict ToDict(const NodeStep& r) {
    nb::dict d;
    nb::list tenants;
    for (const TenantStep& t : r.tenants) {
      nb::dict td;
      td["obs"] = Copy(t.observation, {t.observation.size()});
      td["reward"] = t.reward;
      td["active"] = t.active;
      td["waiting"] = t.waiting;
      td["terminated"] = t.terminated;
      // The step info's fields (ForEachInfoField: the protocol's schema), the mask shaped
      // [regions, choices] when it divides into its rows, then the tenant's own.
      nb::dict info;
      ForEachInfoField(t.info,
                       [&](const char* name, const auto& value) { info[name] = InfoValue(value); });
      const size_t cols = t.info.action_mask_columns;
      if (cols > 0 && t.info.action_mask.size() % cols == 0) {
        info["action_mask"] = Copy(t.info.action_mask, {t.info.action_mask.size() / cols, cols});
      }
      info["solo_interval_ns"] = t.solo_interval_ns;
      info["slowdown"] = Copy(t.slowdown, {t.slowdown.size()});
      info["bandwidth_gbps"] = Copy(t.bandwidth_gbps, {t.bandwidth_gbps.size()});
      info["interference_gbps"] = Copy(t.interference_gbps, {t.interference_gbps.size()});
      td["info"] = info;
      tenants.append(td);
    }
    d["tenants"] = tenants;
    d["step"] = r.step;
    d["step_ns"] = r.step_ns;
    d["elapsed_ns"] = r.elapsed_ns;
    d["tier_used_bytes"] = Copy(r.tier_used_bytes, {r.tier_used_bytes.size()});
    d["tier_bandwidth_gbps"] = Copy(r.tier_bandwidth_gbps, {r.tier_bandwidth_gbps.size()});
    d["done"] = r.done;
    return d;
  }

  std::unique_ptr<CoschedEnv> env_;
};

void FutexWake(uintptr_t address) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(address), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

bool WaitSeq(uintptr_t address, uint64_t seq, int spins, double seconds, double spin_seconds) {
  std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(address));
  for (int i = 0; i < spins; ++i) {
    if (word.load(std::memory_order_acquire) == seq) return true;
  }
  if (spin_seconds > 0) {
    nb::gil_scoped_release release;
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration<double>(std::min(spin_seconds, 0.01));
    while (std::chrono::steady_clock::now() < until) {
      for (int i = 0; i < 64; ++i) {
        if (word.load(std::memory_order_acquire) == seq) return true;
        CpuRelax();
      }
    }
  }
  const uint64_t now = word.load(std::memory_order_acquire);
  if (now == seq) return true;
  seconds = std::clamp(seconds, 0.0, 3600.0);
  const auto whole = static_cast<time_t>(seconds);
  const timespec timeout = {whole, static_cast<long>((seconds - static_cast<double>(whole)) * 1e9)};
  {
    nb::gil_scoped_release release;
    // The low 32 bits of the little-endian word: the futex the server wakes.
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(address), FUTEX_WAIT,
            static_cast<uint32_t>(now & 0xFFFFFFFFu), &timeout, nullptr, 0);
  }
  return word.load(std::memory_order_acquire) == seq;
}

}  // namespace
}  // namespace tiergym::env

// NOLINTNEXTLINE(performance-unnecessary-value-param): nanobind's macro takes the module by value
NB_MODULE(_core, m) {
  using tiergym::env::VectorCore;
  m.doc() = "The in-process vector environment of tiergym (env/vector/vector_env.h).";
  nb::class_<VectorCore>(m, "VectorCore")
      .def(nb::init<const std::vector<nb::dict>&, int, const std::string&>(), nb::arg("configs"),
           nb::arg("threads") = 1, nb::arg("autoreset") = "next_step")
      .def_prop_ro("spec", &VectorCore::Spec)
      .def_prop_ro("configs", &VectorCore::configs)
      .def_prop_ro("num_envs", &VectorCore::num_envs)
      .def_prop_ro("threads", &VectorCore::threads)
      .def_prop_ro("in_flight", &VectorCore::in_flight)
      .def_prop_ro("action_size", &VectorCore::action_size)
      .def("buffers", [](nb::handle self) { return VectorCore::Buffers(self); })
      .def("reset", &VectorCore::Reset, nb::arg("mask").none(), nb::arg("seeds"),
           nb::arg("profiles"))
      .def("step", &VectorCore::Step, nb::arg("actions"))
      .def("send_reset", &VectorCore::SendReset, nb::arg("seeds"), nb::arg("profiles"))
      .def("send", &VectorCore::Send, nb::arg("env_ids"), nb::arg("actions"))
      .def("recv", &VectorCore::Recv, nb::arg("batch"))
      .def("fork", &VectorCore::Fork, nb::arg("env_ids"), nb::rv_policy::take_ownership);
  using tiergym::env::CoschedCore;
  nb::class_<CoschedCore>(m, "CoschedCore")
      .def(nb::init<const nb::dict&>(), nb::arg("config"))
      .def_prop_ro("spec", &CoschedCore::Spec)
      .def_prop_ro("tenant_names", &CoschedCore::tenant_names)
      .def_prop_ro("num_tenants", &CoschedCore::num_tenants)
      .def("reset", &CoschedCore::Reset, nb::arg("seed").none())
      .def("step", &CoschedCore::Step, nb::arg("actions"));
  m.def("futex_wake", &tiergym::env::FutexWake, nb::arg("address"));
  m.def("wait_seq", &tiergym::env::WaitSeq, nb::arg("address"), nb::arg("seq"), nb::arg("spins"),
        nb::arg("seconds"), nb::arg("spin_seconds") = 0.0);
}
