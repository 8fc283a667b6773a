// Reading and writing NumPy .npy files (format versions 1-3, little-endian, C order).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host_array.h"

namespace longattn::tools {

/// Reads `path`. Accepted descr: '<f4', '<f2', '<f8' (converted to f32), '<i4', bf16 as
/// '<V2' / '|V2' / 'bfloat16' (ml_dtypes), e4m3 as 'float8_e4m3fn' / '|V1'.
/// Throws std::runtime_error naming the file on anything else (Fortran order, big endian...).
HostArray read_npy(const std::string& path);

/// Writes `a` (f32 as '<f4', f16 '<f2', bf16 '<V2', e4m3 '|V1', i32 '<i4').
/// Throws std::runtime_error on I/O failure.
void write_npy(const std::string& path, const HostArray& a);

/// Parses the text of an .npy header dict (exposed for tests). Returns false on bad syntax.
bool parse_npy_header(const std::string& header, std::string* descr, bool* fortran,
                      std::vector<int64_t>* shape);

}  // namespace longattn::tools
