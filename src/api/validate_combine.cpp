// Validation of longattn::combine arguments.
#include "api/check.h"

namespace longattn::detail {

Status validate_combine(const CombineArgs& a) {
  LONGATTN_TRY(check_present("out_partial", a.out_partial));
  LONGATTN_TRY(check_present("lse_partial", a.lse_partial));
  LONGATTN_TRY(check_present("out", a.out));
  if (a.out_partial.rank != 4)
    return Status::Invalid("out_partial: rank " + std::to_string(a.out_partial.rank) +
                           ", expected 4 (splits, tokens, heads, dim_v)");
  const Device dev = a.out_partial.device;
  const std::pair<const char*, const Tensor*> all[] = {
      {"out_partial", &a.out_partial}, {"lse_partial", &a.lse_partial}, {"out", &a.out},
      {"lse", &a.lse}};
  for (auto [name, t] : all) {
    if (!t->present()) continue;
    LONGATTN_TRY(check_geometry(name, *t));
    LONGATTN_TRY(check_device(name, *t, dev, "out_partial"));
  }
  LONGATTN_TRY(check_dtype("out_partial", a.out_partial, {DType::f32, DType::bf16, DType::f16},
                           "f32, bf16 or f16"));
  LONGATTN_TRY(check_dtype("lse_partial", a.lse_partial, {DType::f32}, "f32"));
  LONGATTN_TRY(check_dtype("out", a.out, {DType::f32, DType::bf16, DType::f16}, "bf16, f16 or f32"));
  if (a.lse.present()) LONGATTN_TRY(check_dtype("lse", a.lse, {DType::f32}, "f32"));
  const int64_t splits = a.out_partial.shape[0], tokens = a.out_partial.shape[1],
                heads = a.out_partial.shape[2], dim = a.out_partial.shape[3];
  if (splits < 1) return Status::Invalid("out_partial: 0 splits, expected at least 1");
  LONGATTN_TRY(check_shape("lse_partial", a.lse_partial, {splits, heads, tokens},
                           "(splits, heads, tokens) from out_partial"));
  LONGATTN_TRY(check_shape("out", a.out, {tokens, heads, dim}, "(tokens, heads, dim_v) from out_partial"));
  if (a.lse.present())
    LONGATTN_TRY(check_shape("lse", a.lse, {heads, tokens}, "(heads, tokens) from out_partial"));
  LONGATTN_TRY(check_distinct_elements("out", a.out));
  if (a.lse.present()) LONGATTN_TRY(check_distinct_elements("lse", a.lse));
  LONGATTN_TRY(check_no_overlap("out", a.out, "out_partial", a.out_partial));
  LONGATTN_TRY(check_no_overlap("out", a.out, "lse_partial", a.lse_partial));
  LONGATTN_TRY(check_no_overlap("lse", a.lse, "out_partial", a.out_partial));
  LONGATTN_TRY(check_no_overlap("lse", a.lse, "lse_partial", a.lse_partial));
  LONGATTN_TRY(check_no_overlap("lse", a.lse, "out", a.out));
  return Status::Ok();
}

}  // namespace longattn::detail
