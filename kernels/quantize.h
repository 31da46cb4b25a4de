// Row-wise quantized rows: the layouts of DataType::kInt8Rowwise and kInt4Rowwise, their
// dequantization (host and device, bit for bit the same) and their quantization (host).
//
// The layouts are FBGEMM's fused rows, so that tables FBGEMM or TorchRec wrote load as they are:
//   int8: dim bytes q[j], then a float32 scale and a float32 bias (little-endian);
//   int4: ceil(dim / 2) bytes, element j in byte j / 2 (the low nibble for even j), then a
//         float16 scale and a float16 bias.
// Element j is scale * q[j] + bias, computed in float32 as a product rounded and then a sum
// rounded (no fused multiply-add, so that the CPU and the GPU agree to the bit).
//
// Quantization (QuantizeRow, host only) gives every element the level whose dequantized value is
// nearest, on levels whose scale is at most the row's step (largest - smallest) / (levels - 1):
// every element is within half a step of its original, plus float32's rounding of the
// dequantization. Where the stored scale and bias cannot centre such levels on the row (int4's
// float16 bias on a row narrower than about 1/64 of its magnitude), the bias is at or below the
// smallest value and the scale larger: within half of that scale. See
// kernels/quantize_rows.h. Thread-safe (no state). No Abseil: nvcc includes this header.
#ifndef EMB_KERNELS_QUANTIZE_H_
#define EMB_KERNELS_QUANTIZE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/data_type.h"

namespace emb {

// scale * q + bias, rounded after the product and after the sum (never fused).
EMB_HOST_DEVICE float DequantizeValue(float q, float scale, float bias) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(__fmul_rn(scale, q), bias);
#else
  return scale * q + bias;  // built with -ffp-contract=off (emb::data_type): never fused
#endif
}

// Reads a little-endian value of `bytes` at p, whatever its alignment.
EMB_HOST_DEVICE uint32_t LoadLittleEndian(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= uint32_t{p[i]} << (8 * i);
  }
  return v;
}

// A quantized row's scale and bias.
struct RowScale {
  float scale;
  float bias;
};

EMB_HOST_DEVICE RowScale LoadRowScale(const uint8_t* row, DataType t, int64_t dim) {
  if (t == DataType::kInt8Rowwise) {
    const uint8_t* p = row + dim;
    return {BitsToFloat(LoadLittleEndian(p, 4)), BitsToFloat(LoadLittleEndian(p + 4, 4))};
  }
  const uint8_t* p = row + (dim + 1) / 2;
  return {HalfToFloat(static_cast<uint16_t>(LoadLittleEndian(p, 2))),
          HalfToFloat(static_cast<uint16_t>(LoadLittleEndian(p + 2, 2)))};
}

// The quantized level of element j of a quantized row.
EMB_HOST_DEVICE uint32_t QuantizedLevel(const uint8_t* row, DataType t, int64_t j) {
  if (t == DataType::kInt8Rowwise) {
    return row[j];
  }
  return (row[j / 2] >> (4 * (j & 1))) & 0xfu;
}

// Element j of a row of any table type, as float.
EMB_HOST_DEVICE float LoadRowElement(const uint8_t* row, DataType t, int64_t dim, int64_t j) {
  if (IsQuantized(t)) {
    const RowScale s = LoadRowScale(row, t, dim);
    return DequantizeValue(static_cast<float>(QuantizedLevel(row, t, j)), s.scale, s.bias);
  }
  return LoadAsFloat(row, t, j);
}

}  // namespace emb

#endif  // EMB_KERNELS_QUANTIZE_H_
