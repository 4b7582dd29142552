// Early-return helpers for absl::Status and absl::StatusOr.
//
// Debian's Abseil (20220623) ships neither absl/status macros nor absl/log, so the
// project defines these two once, here. Every library includes this header; nothing
// else in the project defines status macros.
//
//   TG_RETURN_IF_ERROR(expr);          // expr is an absl::Status
//   TG_ASSIGN_OR_RETURN(auto x, expr); // expr is an absl::StatusOr<T>
#ifndef TIERGYM_TRACES_BASE_STATUS_MACROS_H_
#define TIERGYM_TRACES_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TG_STATUS_CONCAT_INNER_(a, b) a##b
#define TG_STATUS_CONCAT_(a, b) TG_STATUS_CONCAT_INNER_(a, b)

#define TG_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status tg_status_ = (expr);      \
    if (!tg_status_.ok()) return tg_status_; \
  } while (false)

#define TG_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return std::move(tmp).status();  \
  lhs = std::move(tmp).value()

#define TG_ASSIGN_OR_RETURN(lhs, expr) \
  TG_ASSIGN_OR_RETURN_IMPL_(TG_STATUS_CONCAT_(tg_statusor_, __LINE__), lhs, expr)

#endif  // TIERGYM_TRACES_BASE_STATUS_MACROS_H_
