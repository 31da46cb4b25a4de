// GatherTuning: the facts of one device that the CUDA gather plans and launches by, read once
// (GetGatherTuning in lookup.h) and passed to every lookup on that device. A plain
// struct, so that the rule and the launchers (gather_plan.h), which nvcc compiles, see it without
// Abseil. Host header; no CUDA header at all.
#ifndef EMB_KERNELS_GATHER_TUNING_H_
#define EMB_KERNELS_GATHER_TUNING_H_

#include <cstdint>

namespace emb::kernels {

// Launch parameters derived once from a device's properties; pass to every LaunchLookup on it.
// A launch picks its kernel by a rule on the shape (PlanGather, gather_rule.cc): with equal
// table and answer types, rows of 16 KB and more and 16-byte pointers, small tables that the ids
// use twice or more per row on average go by column slice or by table row (blocks hold rows in
// shared memory), tables past L2 in column passes; everything else (conversions too) by threads
// moving 2- to 16-byte units, a block per tile of 256 threads x 2 16-byte units (x 4 narrower
// ones), up to 64 resident waves of blocks; bigger batches loop.
struct GatherTuning {
  int device = 0;
  int num_sms = 0;               // multiprocessors
  int max_threads_per_sm = 0;    // resident threads per multiprocessor
  int64_t l2_cache_bytes = 0;    // L2 size
  int threads_per_block = 0;     // of the unit gather kernels (256)
  int blocks_per_sm = 0;         // fewest resident unit-gather blocks per multiprocessor
  int cc_major = 0;              // compute capability (the copy-engine paths need 9, Hopper)
  int smem_per_block_optin = 0;  // shared memory bytes a block may opt in to
};

}  // namespace emb::kernels

#endif  // EMB_KERNELS_GATHER_TUNING_H_
