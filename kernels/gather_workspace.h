// GatherWorkspace: scratch a gather may use on its stream. Plain C++ (no Abseil), so that both the
// host API (embedding_lookup.h) and the launcher (gather_dispatch.cu) can include it.
#ifndef EMB_KERNELS_GATHER_WORKSPACE_H_
#define EMB_KERNELS_GATHER_WORKSPACE_H_

#include <cstdint>

namespace emb::kernels {

// Counters through which the row-owner kernel lets free blocks claim the work that slower ones
// have left. Zeroed when allocated; every launch leaves them zeroed. Launches that share a
// workspace must not overlap (keep them on one stream). Without one (d_counters null) the row
// owners run on a static grid.
struct GatherWorkspace {
  int32_t* d_counters = nullptr;
  int64_t count = 0;  // ints at d_counters
};

// Ints a workspace needs so that every gather from a table of `num_rows` rows can use it.
int64_t GatherWorkspaceInts(int64_t num_rows);

}  // namespace emb::kernels

#endif  // EMB_KERNELS_GATHER_WORKSPACE_H_
