// A POSIX shared-memory segment holding a step_batch's results (env/PROTOCOL.md, "Shared
// memory"): the zero-copy transport for clients on the server's machine.
//
// The segment is laid out as fixed arrays, one row per batch entry: observations, rewards,
// flags and the step info column by column (InfoColumns, the in-process vector
// environment's too: env/spec/step_info.h), and the same again for the final observation and
// info of same_step autoreset. The arrays, their order and the request area are declared in
// the protocol's schema (env/protocol/shm_layout.h, generated). layout() describes every
// array (name, dtype, shape, byte offset) as the reply that made the segment tells the
// client; the client maps the segment and wraps each array without a copy.
//
// Security: the name is "/tiergym-PID-" and 128 random bits, the segment is created
// exclusively with mode 0600 (only the server's user can open it) and its pages are
// allocated up front (posix_fallocate), so that a full /dev/shm is an error at creation and
// never a SIGBUS later; Unlink() removes the name once the client has mapped it (the
// server's mapping stays). Intact() tells whether the file still has its size (a process of
// the server's user could shrink it; writing past its end would fault): the service checks
// it before every write. A check cannot stop the access right after it from faulting, so
// every segment's mapping is also guarded: a SIGBUS inside it (its file shrunk meanwhile)
// maps zero pages over the segment, the access goes on there, and the next Intact() check
// frees it; a SIGBUS anywhere else keeps its default action. A client waiting for a batch
// may sleep on the seq word (a futex; Wake()) instead of waiting for the reply.
//
// Requests (PROTOCOL.md "Requests through the segment"): a segment made with `requests`
// also holds a request area the client writes: the actions, the entries to reset, the
// autoreset mode and a request number (a futex the client wakes). The server copies the
// area out (ReadRequest) before it checks anything, so that a client changing it meanwhile
// changes nothing the server relies on; every size comes from the segment's shape, never
// from the area. A failed request's error (code, field, message) is written back into the
// segment (SetError) before the batch number is published. The destructor unmaps, closes and
// unlinks (if still linked). RemoveStaleShmSegments() unlinks the segments of tiergym servers that
// died without unlinking theirs.
//
// Thread-compatible: rows may be written by different threads at once (WriteRow touches
// only its row), everything else by one thread at a time.
#ifndef TIERGYM_ENV_SERVER_SHM_BATCH_H_
#define TIERGYM_ENV_SERVER_SHM_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "env/protocol/protocol.h"
#include "env/protocol/shm_layout.h"
#include "env/spec/env_spec.h"
#include "env/spec/info_columns.h"

namespace tiergym::env {

// The sizes of a batch's arrays.
struct ShmBatchShape {
  size_t rows = 0;          // entries the segment holds at most
  size_t obs = 0;           // observation values per row
  size_t tiers = 0;         // tier_used_bytes per row
  size_t regions = 0;       // refused_regions capacity per row
  size_t mask = 0;          // action-mask values per row
  size_t mask_columns = 0;  // the mask's row width ([regions, columns]); 0: a flat [mask]
  size_t action = 0;        // values per action (a request area's rows)
  bool operator==(const ShmBatchShape&) const = default;
  // The widths of its info columns.
  InfoShape info() const { return InfoShape{tiers, regions, mask, mask_columns}; }
};

// The shape of `rows` results of environments with `spec`.
ShmBatchShape ShapeOf(const EnvSpec& spec, size_t rows);

// A request copied out of a segment's request area (the client may change the area at any
// time; this copy does not change).
struct ShmRequest {
  uint64_t number = 0;          // the request number the client wrote
  uint8_t autoreset = 0;        // as written: 0 none, 1 same_step, anything else wrong
  std::vector<uint8_t> reset;   // [rows], as written: 0 step, 1 reset, anything else wrong
  std::vector<Action> actions;  // [rows], each of `action` values
};

class ShmBatch {
 public:
  // A new segment for results of `shape`. ResourceExhausted when /dev/shm has no room (or
  // would keep less than an eighth of itself free), Unavailable for other system errors;
  // the message says what to do.
  // With `requests`, the segment also holds a request area (see above).
  static absl::StatusOr<std::unique_ptr<ShmBatch>> Create(const ShmBatchShape& shape,
                                                          bool requests = false);
  // Bytes a segment of `shape` takes (its layout, rounded up to pages).
  static uint64_t BytesFor(const ShmBatchShape& shape, bool requests = false);
  ~ShmBatch();
  ShmBatch(const ShmBatch&) = delete;
  ShmBatch& operator=(const ShmBatch&) = delete;

  const std::string& name() const { return name_; }
  uint64_t bytes() const { return bytes_; }
  const ShmBatchShape& shape() const { return shape_; }
  const std::vector<protocol::ShmArray>& layout() const { return layout_; }
  bool linked() const { return linked_; }
  bool requests() const { return requests_; }

  // Removes the name (the client has mapped the segment). Idempotent.
  void Unlink();
  // Whether the segment's file still has its full size.
  bool Intact() const;

  // Row `row` of the results: `result` (its profile as an index into spec.profiles, -1
  // when not there), with `was_reset`. REQUIRES: row < shape().rows and `result` of the
  // segment's shape (InvalidArgument otherwise, nothing written to the mask).
  absl::Status WriteRow(size_t row, const StepResult& result, bool was_reset, const EnvSpec& spec);
  // Row `row` of the final arrays (same_step autoreset).
  absl::Status WriteFinal(size_t row, const StepResult& result, const EnvSpec& spec);
  // Row `row` of the final arrays made the same as row `row` of the results (written by
  // WriteRow): the final row of an entry whose episode did not end, as WriteFinal of its
  // result would write it. REQUIRES: row < shape().rows.
  void CopyRowToFinal(size_t row);
  // What a batch's `summary` word says of its rows (bits; PROTOCOL.md "Shared memory"): a
  // row has refused regions; an entry was reset (its profile may have changed). A client
  // skips the work a clear bit makes useless; kSummaryAll claims nothing.
  static constexpr uint8_t kSummaryRefused = 1, kSummaryReset = 2,
                           kSummaryAll = kSummaryRefused | kSummaryReset;
  // Publishes a batch whose rows are written: `has_final` (the final arrays hold its ended
  // episodes) and its `summary`, then its number `seq` (a release store: a client that
  // sees the number sees the rows).
  void Publish(uint64_t seq, bool has_final, uint8_t summary = kSummaryAll);
  // Wakes the processes waiting for the next batch with FUTEX_WAIT on the low 32 bits of
  // the seq word (a shared futex: any process mapping the segment).
  void Wake();

  // The request area (REQUIRES: requests()). The low 32 bits of the request number (an
  // acquire load: who sees a new number sees the request the client wrote before it).
  uint32_t RequestWord() const;
  // Sleeps while the request word holds `seen`, at most `timeout_ms` (FUTEX_WAIT; returns
  // early on a wake-up, a change or a signal).
  void WaitForRequest(uint32_t seen, int timeout_ms) const;
  // Wakes a thread sleeping in WaitForRequest (the server closing the segment).
  void WakeRequestWaiter() const;
  // A copy of the request area, into `into` (its capacity reused).
  void ReadRequest(ShmRequest& into) const;
  // The outcome of the next batch published: an error (code name, field, message; each
  // cut to its array's size) or none.
  void SetError(std::string_view code, std::string_view field, std::string_view message);
  void ClearError();

 private:
  ShmBatch(std::string name, int fd, void* base, uint64_t bytes, const ShmBatchShape& shape);
  void Lay();
  uint64_t Add(std::string name, std::string dtype, size_t itemsize, std::vector<uint64_t> shape);
  // Lays out the declared arrays (layout_).
  void LayArrays(const protocol::ShmArrayDecl* arrays, size_t count);
  // Lays out the info columns, named `prefix` + the column's name; points `columns` at them.
  void LayInfo(std::string_view prefix, InfoColumns& columns);
  absl::Status WriteInfo(const InfoColumns& columns, size_t row, const StepInfo& si,
                         const EnvSpec& spec);
  template <typename T>
  T* At(uint64_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(base_) + offset);
  }

  std::string name_;
  int fd_ = -1;
  void* base_ = nullptr;
  uint64_t bytes_ = 0;
  ShmBatchShape shape_;
  bool linked_ = true;
  bool requests_ = false;
  int guard_slot_ = -1;  // its place among the mappings the SIGBUS handler guards, or -1
  std::vector<protocol::ShmArray> layout_;
  uint64_t end_ = 0;  // bytes laid out so far
  uint64_t seq_ = 0, has_final_ = 0, summary_ = 0, obs_ = 0, reward_ = 0, terminated_ = 0,
           truncated_ = 0, reset_ = 0;
  uint64_t final_obs_ = 0;
  uint64_t request_ = 0, request_autoreset_ = 0, request_reset_ = 0, request_actions_ = 0,
           error_code_ = 0, error_field_ = 0, error_message_ = 0;
  size_t error_code_bytes_ = 0, error_field_bytes_ = 0, error_message_bytes_ = 0;
  InfoColumns info_, final_info_;  // into the mapping (unset in a layout without one)
};

// Unlinks /dev/shm/tiergym-PID-* segments of this user whose process PID is gone; returns
// how many.
size_t RemoveStaleShmSegments();

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_SHM_BATCH_H_
