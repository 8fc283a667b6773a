// Small out-of-line pieces of the public types (include/longattn/types.h).
#include "longattn/longattn.h"

#ifndef LONGATTN_VERSION
#define LONGATTN_VERSION "0.0.0"
#endif

namespace longattn {

int64_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::e4m3: return 1;
    case DType::i32: return 4;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::e4m3: return "e4m3";
    case DType::i32: return "i32";
  }
  return "unknown";
}

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::automatic: return "auto";
    case Backend::reference: return "reference";
    case Backend::cpu: return "cpu";
    case Backend::cuda: return "cuda";
  }
  return "unknown";
}

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::automatic: return "auto";
    case CpuIsa::portable: return "portable";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::avx512: return "avx512";
    case CpuIsa::amx: return "amx";
  }
  return "unknown";
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

Tensor make_tensor(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  // Extra dimensions beyond kMaxRank are dropped; validation then reports the wrong rank.
  int r = 0;
  for (int64_t s : shape) {
    if (r == kMaxRank) break;
    t.shape[r++] = s;
  }
  t.rank = r;
  int64_t st = 1;
  for (int i = r - 1; i >= 0; --i) {
    t.stride[i] = st;
    st *= t.shape[i] > 0 ? t.shape[i] : 1;
  }
  return t;
}

const char* version() { return LONGATTN_VERSION; }

}  // namespace longattn
