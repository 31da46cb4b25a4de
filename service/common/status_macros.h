// RETURN_IF_ERROR / ASSIGN_OR_RETURN: Debian's Abseil (20220623) predates ABSL_RETURN_IF_ERROR.
#ifndef EMB_SERVICE_COMMON_STATUS_MACROS_H_
#define EMB_SERVICE_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define EMB_STATUS_CONCAT_INNER_(a, b) a##b
#define EMB_STATUS_CONCAT_(a, b) EMB_STATUS_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function unless it is OK.
#define RETURN_IF_ERROR(expr)                   \
  do {                                          \
    if (absl::Status _st = (expr); !_st.ok()) { \
      return _st;                               \
    }                                           \
  } while (0)

// `lhs = *expr` when `expr` (a StatusOr) is OK; otherwise returns its status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(EMB_STATUS_CONCAT_(_status_or_, __LINE__), lhs, expr)
// NOLINTBEGIN(bugprone-macro-parentheses): `lhs` is a declaration or an lvalue, `tmp` a name.
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) {                             \
    return tmp.status();                       \
  }                                            \
  lhs = std::move(*tmp)
// NOLINTEND(bugprone-macro-parentheses)

#endif  // EMB_SERVICE_COMMON_STATUS_MACROS_H_
