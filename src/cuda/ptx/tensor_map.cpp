#include "cuda/ptx/tensor_map.h"

#include <cuda_runtime.h>

#include <mutex>

namespace longattn::cuda {
namespace {

using EncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                              const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                              const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeFn get_encoder() {
  static EncodeFn fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    // Version 12000 pins the ABI of cuTensorMapEncodeTiled as introduced in CUDA 12.0.
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                         cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<EncodeFn>(p);
  });
  return fn;
}

}  // namespace

std::string encode_tile_map(const TileMapSpec& s, CUtensorMap* map) {
  EncodeFn enc = get_encoder();
  if (!enc) return "cuTensorMapEncodeTiled is not available from the driver";
  // bytes per element; a chunk is 128 bytes of a row (the swizzle row): cw elements.
  const cuuint64_t es = s.dtype == CU_TENSOR_MAP_DATA_TYPE_UINT8 ? 1 : 2, cw = 128 / es;
  if (s.dim % int64_t(cw) != 0 && !s.col_chunks && s.pack_group <= 1)
    return "tensor map: head dim not a multiple of 128 bytes";
  if (s.col_chunks && s.row_groups) return "tensor map: column-addressed maps have no row groups";
  const cuuint64_t chunks = cuuint64_t(s.dim) / cw;
  cuuint64_t dims[5] = {cw, cuuint64_t(s.rows), chunks, cuuint64_t(s.heads), cuuint64_t(s.batch)};
  // Byte strides of dims 1..4 (dim 0 is contiguous). The chunk dim has stride 128 bytes:
  // TMA accepts non-monotonic strides, which lets one box land as [chunk][row][64].
  cuuint64_t strides[4] = {cuuint64_t(s.stride_row) * es, 128,
                           cuuint64_t(s.stride_head) * es, cuuint64_t(s.stride_batch) * es};
  // Degenerate extents (1) may carry any stride; keep them valid multiples of 16.
  if (s.heads == 1) strides[2] = 16;
  if (s.batch == 1) strides[3] = 16;
  cuuint32_t box[5] = {cuuint32_t(cw), cuuint32_t(s.box_rows), cuuint32_t(s.box_chunks > 0 ? s.box_chunks : chunks), 1, 1};
  if (s.col_chunks && s.pack_group <= 1) {
    dims[0] = cuuint64_t(s.dim);
    dims[2] = 1;
    strides[1] = 16;  // the extent-1 chunk dim
    box[2] = 1;
  }
  if (s.pack_group > 1) {
    const int64_t g = s.pack_group;
    if (s.heads % g != 0 || s.box_rows % g != 0 || g > 256 || s.box_rows / g > 256)
      return "packed Q map: heads / box rows not divisible by the group";
    dims[0] = cuuint64_t(s.dim);
    dims[1] = cuuint64_t(g);
    dims[2] = cuuint64_t(s.rows);
    dims[3] = cuuint64_t(s.heads / g);
    strides[0] = cuuint64_t(s.stride_head) * es;
    strides[1] = cuuint64_t(s.stride_row) * es;
    strides[2] = s.heads / g == 1 ? 16 : cuuint64_t(g * s.stride_head) * es;
    box[1] = cuuint32_t(g);
    box[2] = cuuint32_t(s.box_rows / g);
    box[3] = 1;
  }
  if (s.row_groups) {
    if (s.rows % 8 != 0 || s.box_rows % 8 != 0 || s.box_rows / 8 > 256 || s.stride_batch != s.rows * s.stride_row)
      return "grouped K map: pages of a multiple of 8 rows, uniformly strided, are required";
    dims[1] = 8;
    dims[2] = chunks;
    dims[3] = cuuint64_t(s.batch * s.rows / 8);
    dims[4] = cuuint64_t(s.heads);
    strides[0] = cuuint64_t(s.stride_row) * es;
    strides[1] = 128;
    strides[2] = cuuint64_t(8 * s.stride_row) * es;
    strides[3] = s.heads == 1 ? 16 : cuuint64_t(s.stride_head) * es;
    box[1] = 8;
    box[2] = cuuint32_t(chunks);
    box[3] = cuuint32_t(s.box_rows / 8);
    box[4] = 1;
  }
  cuuint32_t estr[5] = {1, 1, 1, 1, 1};
  CUresult r = enc(map, s.dtype, 5, const_cast<void*>(s.base), dims, strides, box, estr,
                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return "cuTensorMapEncodeTiled failed (code " + std::to_string(int(r)) + ")";
  return "";
}

}  // namespace longattn::cuda
