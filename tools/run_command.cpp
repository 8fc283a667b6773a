// `longattn run`: one forward on random or .npy inputs; prints time, TFLOP/s and the error
// against the float64 reference on sampled rows; exits 1 if that check fails.
#include <cmath>
#include <cstdio>
#include <thread>

#include "commands.h"
#include "flop_count.h"
#include "json_line.h"
#include "launch.h"
#include "npy_io.h"
#include "row_check.h"
#include "timing.h"

namespace longattn::tools {

std::string describe_problem(const RunOptions& o, const Inputs& in) {
  std::string s = std::string(dtype_name(in.q.dtype)) + "->" + dtype_name(o.resolved_out_dtype());
  if (in.ragged) {
    s += " ragged batch " + std::to_string(in.q_lens.size()) + " (max seq " +
         std::to_string(in.max_q()) + "/" + std::to_string(in.max_k()) + ", tokens " +
         std::to_string(in.q.shape[0]) + "/" + std::to_string(in.k.shape[0]) + ")";
  } else {
    s += " batch " + std::to_string(in.batch) + " seq " + std::to_string(o.seq_q);
    if (o.seq_k != o.seq_q) s += "/" + std::to_string(o.seq_k);
  }
  s += " heads " + std::to_string(in.heads_q) + "/" + std::to_string(in.heads_kv) + " dim " +
       std::to_string(in.dim);
  if (in.dim_v != in.dim) s += "/" + std::to_string(in.dim_v);
  const Mask& m = o.mask;
  const bool aligned = m.causal || m.window_left >= 0 || m.window_right >= 0 || m.chunk_size > 0;
  s += m.causal ? " causal" : " non-causal";
  if (m.window_left >= 0 || m.window_right >= 0)
    s += " window " + std::to_string(m.window_left) + "," + std::to_string(m.window_right);
  if (m.chunk_size > 0) s += " chunk " + std::to_string(m.chunk_size);
  if (aligned && m.align == CausalAlign::top_left) s += " top-left";
  if (o.softcap > 0) s += " softcap " + std::to_string(o.softcap);
  if (o.scale) s += " scale " + std::to_string(*o.scale);
  if (!in.sinks.empty()) s += " sinks";
  if (o.page_size > 0) s += " paged " + std::to_string(o.page_size);
  if (o.lse) s += " +lse";
  return s;
}

std::string describe_backend(Backend b, int threads, CpuIsa isa) {
  if (b == Backend::cuda) {
    std::string name = device_name();
    return name.empty() ? "cuda" : "cuda (" + name + ")";
  }
  // The reference backend reads no environment variable: 0 means every hardware thread.
  const int t = b == Backend::reference && threads <= 0 ? int(std::thread::hardware_concurrency())
                                                        : cpu_threads(threads);
  std::string s = std::string(backend_name(b)) + " (" + std::to_string(t) + " threads";
  if (b == Backend::cpu) {
    if (isa == CpuIsa::automatic)  // what automatic resolves to: the widest available
      for (CpuIsa i : {CpuIsa::portable, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::amx})
        if (cpu_isa_available(i)) isa = i;
    s += std::string(", ") + cpu_isa_name(isa);
  }
  return s + ")";
}

double problem_flops(const RunOptions& o, const Inputs& in) {
  return attention_flops(o.mask_rule(), in.q_lens, in.k_lens, in.heads_q, in.dim, in.dim_v);
}

int run_command(const std::vector<std::string>& args) {
  RunOptions o = parse_run_options(args);
  const Inputs in = make_inputs(o);
  if (!o.save_inputs_dir.empty()) save_inputs(in, o.save_inputs_dir);
  const Backend backend = resolve_backend(o.backend);
  if (backend == Backend::cuda) set_device(o.device);  // before naming or allocating on it

  Launch launch(o, in, backend);
  const Args host_args = launch.args();  // kept: the check reads host tensors
  if (Status st = launch.validate(); !st.ok()) {
    std::fprintf(stderr, "longattn: %s\n", st.message().c_str());
    return exit_code_for(st);
  }
  if (!o.quiet && !o.json) {
    std::printf("problem: %s\n", describe_problem(o, in).c_str());
    std::printf("backend: %s\n", describe_backend(backend, o.threads, o.cpu_isa).c_str());
    std::fflush(stdout);
  }
  launch.prepare();
  Timing t;
  const int repeat = o.repeat > 0 ? o.repeat : default_repeat(backend);
  if (Status st = time_forward(launch, o.warmup, repeat, &t); !st.ok()) {
    std::fprintf(stderr, "longattn: %s\n", st.message().c_str());
    return exit_code_for(st);
  }
  launch.fetch();
  if (o.corrupt == "value") {
    for (int64_t i = 0; i < launch.out.numel(); ++i) launch.out.set(i, launch.out.get(i) + 0.05f);
  } else if (o.corrupt == "nan") {
    launch.out.set(launch.out.numel() / 2, NAN);
  }

  const double flops = problem_flops(o, in);
  const double tflops = t.median_ms > 0 ? flops / (t.median_ms * 1e-3) / 1e12 : 0;
  const CheckResult c = check_rows(host_args, in, launch.out, o.lse ? &launch.lse : nullptr,
                                   o.check_rows, o.seed);
  if (o.json) {
    JsonLine j;
    j.str("command", "run")
        .str("problem", describe_problem(o, in))
        .str("backend", describe_backend(backend, o.threads, o.cpu_isa))
        .str("dtype", dtype_name(in.q.dtype)).num("batch", double(in.q_lens.size()))
        .num("seq_q", double(in.max_q())).num("seq_k", double(in.max_k()))
        .num("heads_q", double(in.heads_q)).num("heads_kv", double(in.heads_kv))
        .num("dim", double(in.dim)).num("dim_v", double(in.dim_v)).boolean("causal", o.mask.causal)
        .num("median_ms", t.median_ms).num("min_ms", t.min_ms).num("runs", t.runs)
        .num("tflops", tflops).num("gflop", flops / 1e9).num("rotations", launch.rotations())
        .num("check_rows", double(c.rows)).num("max_error", c.max_err).num("naive_error", c.naive_err)
        .num("bound", c.bound).boolean("pass", c.pass);
    if (o.lse) j.num("lse_error", c.lse_err).num("lse_bound", c.lse_bound);
    j.print();
  } else {
    std::printf("time: %.3f ms (median of %d, min %.3f)  %.3f TFLOP/s  (%.4g GFLOP, mask-aware)",
                t.median_ms, t.runs, t.min_ms, tflops, flops / 1e9);
    if (launch.rotations() > 1) std::printf("  inputs rotated over %d copies", launch.rotations());
    std::printf("\n");

    if (c.rows > 0) {
      std::printf("check: %lld rows vs float64 reference: max error %.3e, bound %.3e "
                  "(2 x naive %.3e + %.0e)",
                  static_cast<long long>(c.rows), c.max_err, c.bound, c.naive_err, kCheckAtol);
      if (o.lse) std::printf(", lse error %.3e (bound %.3e)", c.lse_err, c.lse_bound);
      std::printf(": %s\n", c.pass ? "PASS" : "FAIL");
    } else {
      std::printf("check: no rows sampled (--check-rows 0); output NaN scan: %s\n",
                  c.pass ? "PASS" : "FAIL");
    }
  }
  if (!c.pass) std::fprintf(stderr, "longattn: check failed: %s\n", c.failure.c_str());

  try {
    if (!o.out_file.empty())
      write_npy(o.out_file, launch.out.converted(o.out_dtype ? *o.out_dtype : DType::f32));
    if (!o.lse_out_file.empty()) write_npy(o.lse_out_file, launch.lse);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "longattn: %s\n", e.what());
    return 1;
  }
  return c.pass ? 0 : 1;
}

}  // namespace longattn::tools
