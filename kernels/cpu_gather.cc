#include "kernels/cpu_gather.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/quantize.h"

namespace emb::kernels {
namespace {

// Converts one row of `dim` elements; the conversion is chosen once per call, not per element.
template <DataType kIn, DataType kOut>
void ConvertRows(const std::byte* table, int64_t dim, absl::Span<const int64_t> ids,
                 std::byte* out) {
  const size_t in_row = static_cast<size_t>(dim) * ElementSize(kIn);
  const size_t out_row = static_cast<size_t>(dim) * ElementSize(kOut);
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::byte* src = table + static_cast<size_t>(ids[i]) * in_row;
    std::byte* dst = out + i * out_row;
    for (int64_t j = 0; j < dim; ++j) {
      StoreFromFloat(dst, kOut, j, LoadAsFloat(src, kIn, j));
    }
  }
}

template <DataType kIn>
void ConvertFrom(const std::byte* table, int64_t dim, absl::Span<const int64_t> ids,
                 DataType out_type, std::byte* out) {
  switch (out_type) {
    case DataType::kFloat32:
      return ConvertRows<kIn, DataType::kFloat32>(table, dim, ids, out);
    case DataType::kFloat16:
      return ConvertRows<kIn, DataType::kFloat16>(table, dim, ids, out);
    default:
      return ConvertRows<kIn, DataType::kBFloat16>(table, dim, ids, out);
  }
}

// Rows of a quantized table, dequantized to `out_type`.
template <DataType kTable>
void DequantizeRows(const std::byte* table, int64_t dim, absl::Span<const int64_t> ids,
                    DataType out_type, std::byte* out) {
  const size_t in_row = RowBytes(kTable, dim);
  const size_t out_row = RowBytes(out_type, dim);
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto* row =
        reinterpret_cast<const uint8_t*>(table) + static_cast<size_t>(ids[i]) * in_row;
    const RowScale s = LoadRowScale(row, kTable, dim);
    for (int64_t j = 0; j < dim; ++j) {
      StoreFromFloat(
          out + i * out_row, out_type, j,
          DequantizeValue(static_cast<float>(QuantizedLevel(row, kTable, j)), s.scale, s.bias));
    }
  }
}

}  // namespace

void CpuGather(const std::byte* table, DataType table_type, int64_t dim,
               absl::Span<const int64_t> ids, DataType out_type, std::byte* out) {
  if (table_type == out_type) {
    // Rows are random, so each is a cache (and often TLB) miss: ask for the rows a few ids ahead
    // while copying this one, so that several misses are in flight at once.
    constexpr size_t kAhead = 8;
    constexpr size_t kLine = 64;
    const size_t row = static_cast<size_t>(dim) * ElementSize(table_type);
    const size_t prefetch_lines = std::min<size_t>((row + kLine - 1) / kLine, 16);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i + kAhead < ids.size()) {
        const std::byte* next = table + static_cast<size_t>(ids[i + kAhead]) * row;
        for (size_t l = 0; l < prefetch_lines; ++l) {
          __builtin_prefetch(next + l * kLine);
        }
      }
      std::memcpy(out + i * row, table + static_cast<size_t>(ids[i]) * row, row);
    }
    return;
  }
  switch (table_type) {
    case DataType::kFloat32:
      return ConvertFrom<DataType::kFloat32>(table, dim, ids, out_type, out);
    case DataType::kFloat16:
      return ConvertFrom<DataType::kFloat16>(table, dim, ids, out_type, out);
    case DataType::kBFloat16:
      return ConvertFrom<DataType::kBFloat16>(table, dim, ids, out_type, out);
    case DataType::kInt8Rowwise:
      return DequantizeRows<DataType::kInt8Rowwise>(table, dim, ids, out_type, out);
    case DataType::kInt4Rowwise:
      return DequantizeRows<DataType::kInt4Rowwise>(table, dim, ids, out_type, out);
  }
}

void CpuPooledGather(const std::byte* table, DataType table_type, int64_t dim, const Bags& bags,
                     DataType out_type, std::byte* out) {
  const size_t in_row = RowBytes(table_type, dim);
  const size_t out_row = RowBytes(out_type, dim);
  std::vector<float> acc(static_cast<size_t>(dim));
  for (size_t b = 0; b + 1 < bags.offsets.size(); ++b) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t k = bags.offsets[b]; k < bags.offsets[b + 1]; ++k) {
      const auto* row =
          reinterpret_cast<const uint8_t*>(table) + static_cast<size_t>(bags.ids[k]) * in_row;
      // The order and roundings of the CUDA kernel (kernels/bags/): one product, one sum.
      if (bags.weights.empty()) {
        for (int64_t j = 0; j < dim; ++j) {
          acc[j] = acc[j] + LoadRowElement(row, table_type, dim, j);
        }
      } else {
        const float w = bags.weights[k];
        for (int64_t j = 0; j < dim; ++j) {
          const float product = w * LoadRowElement(row, table_type, dim, j);
          acc[j] = acc[j] + product;
        }
      }
    }
    const float scale = bags.scales.empty() ? 1.0f : bags.scales[b];
    for (int64_t j = 0; j < dim; ++j) {
      StoreFromFloat(out + b * out_row, out_type, j, bags.scales.empty() ? acc[j] : acc[j] * scale);
    }
  }
}

namespace {

template <DataType kIn, DataType kOut>
void ConvertElements(const std::byte* in, int64_t count, std::byte* out) {
  for (int64_t j = 0; j < count; ++j) {
    StoreFromFloat(out, kOut, j, LoadAsFloat(in, kIn, j));
  }
}

template <DataType kIn>
void ConvertElementsFrom(const std::byte* in, int64_t count, DataType out_type, std::byte* out) {
  switch (out_type) {
    case DataType::kFloat32:
      return ConvertElements<kIn, DataType::kFloat32>(in, count, out);
    case DataType::kFloat16:
      return ConvertElements<kIn, DataType::kFloat16>(in, count, out);
    default:
      return ConvertElements<kIn, DataType::kBFloat16>(in, count, out);
  }
}

}  // namespace

void CpuConvert(const std::byte* in, DataType in_type, int64_t count, DataType out_type,
                std::byte* out) {
  if (in_type == out_type) {
    std::memcpy(out, in, static_cast<size_t>(count) * ElementSize(in_type));
    return;
  }
  switch (in_type) {
    case DataType::kFloat32:
      return ConvertElementsFrom<DataType::kFloat32>(in, count, out_type, out);
    case DataType::kFloat16:
      return ConvertElementsFrom<DataType::kFloat16>(in, count, out_type, out);
    default:
      return ConvertElementsFrom<DataType::kBFloat16>(in, count, out_type, out);
  }
}

void CpuScatter(const std::byte* rows, DataType rows_type, int64_t dim,
                absl::Span<const int64_t> ids, std::byte* table, DataType table_type) {
  const size_t in_row = static_cast<size_t>(dim) * ElementSize(rows_type);
  const size_t out_row = static_cast<size_t>(dim) * ElementSize(table_type);
  for (size_t i = 0; i < ids.size(); ++i) {
    CpuConvert(rows + i * in_row, rows_type, dim, table_type,
               table + static_cast<size_t>(ids[i]) * out_row);
  }
}

}  // namespace emb::kernels
