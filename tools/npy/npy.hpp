// Reader and writer of NumPy .npy files holding float32 or int32 arrays in C order.
//
// Only what the test tools exchange is accepted: dtype '<f4' (tensors) or '<i4' (the cumulative
// sequence lengths of packed batches), each read by its own entry point that accepts that dtype
// alone, fortran_order False, any shape (including 0-d). Format versions 1.0, 2.0 and 3.0 are
// read; 1.0 is written, as numpy does for headers under 64 KiB. Everything else is rejected with a
// FormatError that names the file, what was found and what is accepted. The parser is written for
// hostile input (it is fuzzed): every length and offset is bound-checked, shape products are
// overflow-checked, and nothing is allocated before the file is known to hold the data it
// announces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace fmha_jit::npy {

// Base of every error thrown here; what() starts with the file name.
class NpyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The bytes are not a .npy file this reader accepts (bad magic, version, header, dtype, order,
// shape, or data size).
class FormatError : public NpyError {
 public:
  using NpyError::NpyError;
};

// The file could not be opened, read, written or renamed into place.
class IoError : public NpyError {
 public:
  using NpyError::NpyError;
};

// Most dimensions accepted in a shape (numpy's own limit is 64).
inline constexpr size_t kMaxDims = 64;

template <class T>
struct BasicArray {
  std::vector<int64_t> shape;  // empty for a 0-d array (which holds one element)
  std::vector<T> data;         // C order
};
using Array = BasicArray<float>;         // dtype '<f4'
using Int32Array = BasicArray<int32_t>;  // dtype '<i4'

// Product of the dimensions (1 for a 0-d shape). Throws FormatError on a negative dimension or
// overflow of int64.
int64_t element_count(std::span<const int64_t> shape);

// Reads and parses a .npy file. Throws IoError or FormatError.
Array read_npy(const std::filesystem::path& path);

// Parses the bytes of a .npy file; name_for_errors prefixes every message. Throws FormatError only
// (and std::bad_alloc). This is the fuzzing entry point.
Array parse_npy(std::span<const uint8_t> bytes, std::string_view name_for_errors);

// The same for int32 files ('<i4'; any other dtype, float32 and int64 included, is a FormatError
// naming it).
Int32Array read_npy_int32(const std::filesystem::path& path);
Int32Array parse_npy_int32(std::span<const uint8_t> bytes, std::string_view name_for_errors);

// The bytes of a version 1.0 '<f4' C-order .npy file, byte-identical to numpy.save (>= 1.24): the
// header is padded with spaces (room for the first axis to grow, then 64-byte alignment of the
// data) and ends with a newline. Throws
// std::invalid_argument when the shape is negative, has more than kMaxDims dimensions, or does not
// match data.size().
std::vector<uint8_t> serialize_npy(std::span<const int64_t> shape, std::span<const float> data);
// The same with dtype '<i4'.
std::vector<uint8_t> serialize_npy(std::span<const int64_t> shape, std::span<const int32_t> data);

// Writes serialize_npy(shape, data) atomically: into a temporary file in the same folder, flushed
// to disk, then renamed over path. Throws std::invalid_argument (bad shape) or IoError.
void write_npy(const std::filesystem::path& path, std::span<const int64_t> shape,
               std::span<const float> data);
void write_npy(const std::filesystem::path& path, std::span<const int64_t> shape,
               std::span<const int32_t> data);

}  // namespace fmha_jit::npy
