// Element types of tables and answers, and their scalar conversions.
//
// Value types (float32, float16, bfloat16) are those of answers and of update rows; a table may
// also be stored row-wise quantized (kInt8Rowwise, kInt4Rowwise: kernels/quantize.h says the
// layout), whose rows are not whole elements: RowBytes() gives a row's size for every type.
//
// The conversions are plain functions usable from host code and, under nvcc, from device code,
// so the CPU and GPU gathers round identically: float32 -> float16/bfloat16 rounds to nearest
// even, overflow goes to infinity, NaN stays a quiet NaN. Thread-safe (no state).
#ifndef EMB_KERNELS_DATA_TYPE_H_
#define EMB_KERNELS_DATA_TYPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define EMB_HOST_DEVICE __host__ __device__ __forceinline__
#define EMB_HOST_DEVICE_CONSTEXPR __host__ __device__ constexpr
#else
#define EMB_HOST_DEVICE inline
#define EMB_HOST_DEVICE_CONSTEXPR constexpr
#endif

namespace emb {

// Values match embedding.v1.DataType; proto/convert/data_type_proto.h converts between them
// (and static_asserts that they agree).
enum class DataType : int {
  kFloat32 = 1,
  kFloat16 = 2,
  kBFloat16 = 3,
  // Row-wise quantized tables (table types only, never an answer's): kernels/quantize.h.
  kInt8Rowwise = 4,
  kInt4Rowwise = 5,
};

// Every value type (answers, update rows), in value order.
inline constexpr DataType kAllDataTypes[] = {DataType::kFloat32, DataType::kFloat16,
                                             DataType::kBFloat16};
// The quantized table types.
inline constexpr DataType kQuantizedTypes[] = {DataType::kInt8Rowwise, DataType::kInt4Rowwise};
// Every type a table may be stored in.
inline constexpr DataType kAllTableTypes[] = {DataType::kFloat32, DataType::kFloat16,
                                              DataType::kBFloat16, DataType::kInt8Rowwise,
                                              DataType::kInt4Rowwise};

// True for a value type: an answer's or an update's rows.
EMB_HOST_DEVICE_CONSTEXPR bool IsValueType(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

EMB_HOST_DEVICE_CONSTEXPR bool IsQuantized(DataType t) {
  return t == DataType::kInt8Rowwise || t == DataType::kInt4Rowwise;
}

// True for a DataType enumerator; false for any other value cast to DataType (from a wire enum,
// a C caller or a fuzzer). The one place that knows which values are valid.
EMB_HOST_DEVICE_CONSTEXPR bool IsDataType(DataType t) { return IsValueType(t) || IsQuantized(t); }

// Bytes of one element of a value type.
EMB_HOST_DEVICE_CONSTEXPR size_t ElementSize(DataType t) { return t == DataType::kFloat32 ? 4 : 2; }

// Bytes of one row of `dim` elements: dim x ElementSize for a value type; for int8 row-wise dim
// bytes and a float32 scale and bias; for int4 row-wise ceil(dim / 2) bytes and a float16 scale
// and bias (FBGEMM's fused row layouts).
EMB_HOST_DEVICE_CONSTEXPR size_t RowBytes(DataType t, int64_t dim) {
  const auto d = static_cast<size_t>(dim);
  switch (t) {
    case DataType::kInt8Rowwise:
      return d + 8;
    case DataType::kInt4Rowwise:
      return (d + 1) / 2 + 4;
    default:
      return d * ElementSize(t);
  }
}

// "float32", "float16", "bfloat16", "int8_rowwise", "int4_rowwise".
inline const char* DataTypeName(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kInt8Rowwise:
      return "int8_rowwise";
    case DataType::kInt4Rowwise:
      return "int4_rowwise";
  }
  return "unknown";
}

// Parses a DataTypeName() spelling (any table type); returns false for anything else.
inline bool ParseDataType(const char* name, DataType* out) {
  for (DataType t : kAllTableTypes) {
    if (std::strcmp(name, DataTypeName(t)) == 0) {
      *out = t;
      return true;
    }
  }
  return false;
}

EMB_HOST_DEVICE uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

EMB_HOST_DEVICE float BitsToFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// bfloat16 is the top half of a float32: widening is exact.
EMB_HOST_DEVICE float BFloat16ToFloat(uint16_t h) { return BitsToFloat(uint32_t{h} << 16); }

// Rounds to nearest even; NaN stays NaN (quiet), overflow rounds to infinity. On the device the
// hardware's conversion, which agrees bit for bit except on NaN, where it gives the canonical NaN:
// NaN takes the host's quieted payload instead. (The same holds for the half conversions below.)
EMB_HOST_DEVICE uint16_t FloatToBFloat16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
#if defined(__CUDA_ARCH__)
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
#endif
}

EMB_HOST_DEVICE float HalfToFloat(uint16_t h) {
#if defined(__CUDA_ARCH__)
  if ((h & 0x7fffu) <= 0x7c00u) {  // not NaN
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
  }
#endif
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {  // inf or NaN
    return BitsToFloat(sign | 0x7f800000u | (mant << 13));
  }
  if (exp == 0) {
    if (mant == 0) {
      return BitsToFloat(sign);
    }
    // Subnormal half: value = mant * 2^-24, exact in float32.
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign != 0 ? -v : v;
  }
  return BitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

// Rounds to nearest even, including into the subnormal range; overflow gives infinity.
EMB_HOST_DEVICE uint16_t FloatToHalf(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN: keep it quiet
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
#if defined(__CUDA_ARCH__)
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  if (abs >= 0x477ff000u) {  // >= 65520 rounds to infinity
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  if (abs < 0x38800000u) {    // below the smallest normal half, 2^-14: subnormal or zero
    if (abs < 0x33000000u) {  // <= 2^-25 rounds to zero (2^-25 itself ties to even zero)
      return sign;
    }
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // 14..24: mant >> shift is the half mantissa
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (h & 1u) != 0)) {
      ++h;
    }
    return static_cast<uint16_t>(sign | h);
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even.
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0)) {
    ++h;  // may carry into the exponent, which is still correct
  }
  return static_cast<uint16_t>(sign | h);
#endif
}

// Reads element i of an array of `t` as float.
EMB_HOST_DEVICE float LoadAsFloat(const void* p, DataType t, int64_t i) {
  switch (t) {
    case DataType::kFloat16:
      return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
    case DataType::kBFloat16:
      return BFloat16ToFloat(static_cast<const uint16_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

// Writes `v`, rounded to `t`, as element i of an array of `t`.
EMB_HOST_DEVICE void StoreFromFloat(void* p, DataType t, int64_t i, float v) {
  switch (t) {
    case DataType::kFloat16:
      static_cast<uint16_t*>(p)[i] = FloatToHalf(v);
      break;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(p)[i] = FloatToBFloat16(v);
      break;
    default:
      static_cast<float*>(p)[i] = v;
      break;
  }
}

}  // namespace emb

#endif  // EMB_KERNELS_DATA_TYPE_H_
