// Host-side TMA tensor-map encoding through the runtime's driver entry point (no -lcuda).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

namespace longattn::cuda {

// A matrix view [batch][heads][rows][dim] of 16-bit (bf16 / f16) or 8-bit (e4m3, as UINT8)
// elements with arbitrary 64-bit element strides (dim contiguous), loaded as tiles of
// `box_rows` rows x the full dim into shared memory as consecutive 128B-swizzled chunks of
// box_rows x 128 bytes (64 16-bit or 128 8-bit columns). The map is 5-D: (chunk cols, rows,
// chunks, heads, batch); out-of-range rows are zero-filled by TMA, which is how sequence
// tails are handled.
struct TileMapSpec {
  const void* base = nullptr;
  CUtensorMapDataType dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  int64_t batch = 0, heads = 0, rows = 0, dim = 0;
  int64_t stride_batch = 0, stride_row = 0, stride_head = 0;  // elements
  int box_rows = 0;
  // 64-column chunks per box; 0: all (dim / 64, one box = a whole tile). Paged K/V with
  // boxes shorter than the tile uses 1: a box's chunks land box_rows x 128 bytes apart, the
  // tile's kBlockN x 128 apart, so each chunk of a short box is its own load.
  int box_chunks = 0;
  // Packed GQA Q (sm90/pack_gqa.h): > 1 views the tensor as (dim, g = pack_group heads, rows,
  // heads / g, batch), box (64, g, box_rows / g): one box per 64-column chunk (column
  // coordinate 64 c) lands as box_rows rows in the order (row, head of the group).
  int pack_group = 0;
  // Grouped paged K (sm90/params.h k_grouped): the pool (batch = pages of `rows` rows each,
  // stride_batch == rows x stride_row) viewed as (64 cols, 8 rows, dim/64 chunks, 8-row groups
  // of the pool, heads), box (64, 8, dim/64, box_rows/8, 1): a box of box_rows rows lands as
  // [8-row group][chunk][8 rows][128 B], every chunk in one load. Coordinates (0, 0, 0,
  // pool_row / 8, head).
  bool row_groups = false;
  // Column-addressed (a head dim narrower than the kernel's, which reads `kernel_chunks`
  // chunks): the map is (dim, rows, 1, heads, batch) with a box of one chunk (cw, box_rows),
  // so a load names chunk c by its column c x cw and TMA fills the columns at or past dim with
  // zeros (counted in the transaction bytes like any element). dim need not be a multiple
  // of cw. Not with row_groups.
  bool col_chunks = false;
};

// Encodes `spec` into `map`. Returns "" on success, else a message.
std::string encode_tile_map(const TileMapSpec& spec, CUtensorMap* map);

}  // namespace longattn::cuda
