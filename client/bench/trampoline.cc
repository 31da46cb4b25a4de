#include "client/bench/trampoline.h"

#include <utility>
#include <vector>

namespace emb::client::internal {
namespace {

thread_local std::vector<absl::AnyInvocable<void()>>* tl_pending = nullptr;

}  // namespace

void RunTrampolined(absl::AnyInvocable<void()> start) {
  if (tl_pending != nullptr) {
    tl_pending->push_back(std::move(start));
    return;
  }
  std::vector<absl::AnyInvocable<void()>> pending;
  pending.push_back(std::move(start));
  tl_pending = &pending;
  while (!pending.empty()) {
    absl::AnyInvocable<void()> next = std::move(pending.back());
    pending.pop_back();
    next();
  }
  tl_pending = nullptr;
}

}  // namespace emb::client::internal
