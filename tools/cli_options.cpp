#include "cli_options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>

namespace longattn::tools {
namespace {

int64_t parse_int(const std::string& opt, const std::string& v, int64_t min) {
  int64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size())
    throw UsageError(opt + ": expected an integer, got '" + v + "'");
  if (x < min)
    throw UsageError(opt + ": " + v + " is below the minimum " + std::to_string(min));
  return x;
}

float parse_float(const std::string& opt, const std::string& v) {
  size_t used = 0;
  float x = 0;
  try {
    x = std::stof(v, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != v.size()) throw UsageError(opt + ": expected a number, got '" + v + "'");
  return x;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  while (true) {
    size_t e = s.find(sep, b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

std::vector<int64_t> parse_int_list(const std::string& opt, const std::string& v, int64_t min) {
  std::vector<int64_t> out;
  for (const std::string& s : split(v, ',')) out.push_back(parse_int(opt, s, min));
  return out;
}

// Options shared by run and bench. Each entry consumes a value unless it is a flag.
struct Spec {
  bool takes_value;
  std::function<void(RunOptions&, const std::string&)> apply;
};

const std::map<std::string, Spec>& run_specs() {
  static const std::map<std::string, Spec> specs = {
      {"--batch", {true, [](RunOptions& o, const std::string& v) { o.batch = parse_int("--batch", v, 1); }}},
      {"--seq", {true, [](RunOptions& o, const std::string& v) { o.seq_q = o.seq_k = parse_int("--seq", v, 1); }}},
      {"--seq-q", {true, [](RunOptions& o, const std::string& v) { o.seq_q = parse_int("--seq-q", v, 1); }}},
      {"--seq-k", {true, [](RunOptions& o, const std::string& v) { o.seq_k = parse_int("--seq-k", v, 1); }}},
      {"--heads-q", {true, [](RunOptions& o, const std::string& v) { o.heads_q = parse_int("--heads-q", v, 1); }}},
      {"--heads-kv", {true, [](RunOptions& o, const std::string& v) { o.heads_kv = parse_int("--heads-kv", v, 1); }}},
      {"--dim", {true, [](RunOptions& o, const std::string& v) { o.dim = parse_int("--dim", v, 1); }}},
      {"--dim-v", {true, [](RunOptions& o, const std::string& v) { o.dim_v = parse_int("--dim-v", v, 1); }}},
      {"--dtype", {true, [](RunOptions& o, const std::string& v) {
         o.dtype = parse_dtype("--dtype", v);
         o.dtype_set = true;
       }}},
      {"--out-dtype", {true, [](RunOptions& o, const std::string& v) {
         o.out_dtype = parse_dtype("--out-dtype", v);
         if (*o.out_dtype == DType::e4m3)
           throw UsageError("--out-dtype: e4m3 output is not supported (use bf16, f16 or f32)");
       }}},
      {"--causal", {false, [](RunOptions& o, const std::string&) { o.mask.causal = true; }}},
      {"--no-causal", {false, [](RunOptions& o, const std::string&) { o.mask.causal = false; }}},
      {"--top-left", {false, [](RunOptions& o, const std::string&) { o.mask.align = CausalAlign::top_left; }}},
      {"--window", {true, [](RunOptions& o, const std::string& v) {
         auto w = split(v, ',');
         if (w.size() != 2) throw UsageError("--window: expected LEFT,RIGHT (-1: unbounded), got '" + v + "'");
         o.mask.window_left = parse_int("--window", w[0], -1);
         o.mask.window_right = parse_int("--window", w[1], -1);
       }}},
      {"--chunk", {true, [](RunOptions& o, const std::string& v) { o.mask.chunk_size = parse_int("--chunk", v, 0); }}},
      {"--softcap", {true, [](RunOptions& o, const std::string& v) { o.softcap = parse_float("--softcap", v); }}},
      {"--scale", {true, [](RunOptions& o, const std::string& v) { o.scale = parse_float("--scale", v); }}},
      {"--sinks", {false, [](RunOptions& o, const std::string&) { o.sinks = true; }}},
      {"--lse", {false, [](RunOptions& o, const std::string&) { o.lse = true; }}},
      {"--ragged", {true, [](RunOptions& o, const std::string& v) {
         // "NQ" (keys = queries) or "NQ:NK" per sequence.
         o.ragged_q.clear();
         o.ragged_k.clear();
         for (const std::string& item : split(v, ',')) {
           auto qk = split(item, ':');
           if (qk.size() > 2) throw UsageError("--ragged: expected LEN or QLEN:KLEN, got '" + item + "'");
           o.ragged_q.push_back(parse_int("--ragged", qk[0], 0));
           o.ragged_k.push_back(qk.size() == 2 ? parse_int("--ragged", qk[1], 0) : o.ragged_q.back());
         }
       }}},
      {"--page-size", {true, [](RunOptions& o, const std::string& v) { o.page_size = parse_int("--page-size", v, 1); }}},
      {"--backend", {true, [](RunOptions& o, const std::string& v) { o.backend = parse_backend("--backend", v); }}},
      {"--device", {true, [](RunOptions& o, const std::string& v) { o.device = static_cast<int>(parse_int("--device", v, 0)); }}},
      {"--threads", {true, [](RunOptions& o, const std::string& v) { o.threads = static_cast<int>(parse_int("--threads", v, 0)); }}},
      {"--sm-margin", {true, [](RunOptions& o, const std::string& v) { o.sm_margin = static_cast<int>(std::min<int64_t>(parse_int("--sm-margin", v, 0), INT32_MAX)); }}},
      {"--cpu-isa", {true, [](RunOptions& o, const std::string& v) { o.cpu_isa = parse_cpu_isa("--cpu-isa", v); }}},
      {"--repeat", {true, [](RunOptions& o, const std::string& v) { o.repeat = static_cast<int>(parse_int("--repeat", v, 1)); }}},
      {"--warmup", {true, [](RunOptions& o, const std::string& v) { o.warmup = static_cast<int>(parse_int("--warmup", v, 0)); }}},
      {"--check-rows", {true, [](RunOptions& o, const std::string& v) { o.check_rows = parse_int("--check-rows", v, 0); }}},
      {"--seed", {true, [](RunOptions& o, const std::string& v) { o.seed = static_cast<uint64_t>(parse_int("--seed", v, 0)); }}},
      {"--q", {true, [](RunOptions& o, const std::string& v) { o.q_file = v; }}},
      {"--k", {true, [](RunOptions& o, const std::string& v) { o.k_file = v; }}},
      {"--v", {true, [](RunOptions& o, const std::string& v) { o.v_file = v; }}},
      {"--out", {true, [](RunOptions& o, const std::string& v) { o.out_file = v; }}},
      {"--lse-out", {true, [](RunOptions& o, const std::string& v) { o.lse_out_file = v; o.lse = true; }}},
      {"--save-inputs", {true, [](RunOptions& o, const std::string& v) { o.save_inputs_dir = v; }}},
      {"--quiet", {false, [](RunOptions& o, const std::string&) { o.quiet = true; }}},
      {"--json", {false, [](RunOptions& o, const std::string&) { o.json = true; }}},
      // Hidden (tests): damage the output after the run to prove the check can fail.
      {"--corrupt", {true, [](RunOptions& o, const std::string& v) {
         if (v != "value" && v != "nan") throw UsageError("--corrupt: expected value or nan");
         o.corrupt = v;
       }}},
  };
  return specs;
}

// Splits "--opt=value" / "--opt value"; returns false when `args[i]` is not in `specs`.
template <class Specs, class Opts>
bool apply_one(const Specs& specs, Opts& o, const std::vector<std::string>& args, size_t& i) {
  std::string name = args[i], value;
  bool inline_value = false;
  if (size_t eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
    value = name.substr(eq + 1);
    name = name.substr(0, eq);
    inline_value = true;
  }
  auto it = specs.find(name);
  if (it == specs.end()) return false;
  if (it->second.takes_value && !inline_value) {
    if (i + 1 >= args.size()) throw UsageError(name + ": missing value");
    value = args[++i];
  } else if (!it->second.takes_value && inline_value) {
    throw UsageError(name + ": takes no value");
  }
  it->second.apply(o, value);
  return true;
}

void check_run(RunOptions& o) {
  if (o.heads_q % o.heads_kv != 0)
    throw UsageError("--heads-kv: " + std::to_string(o.heads_kv) + " does not divide " +
                     std::to_string(o.heads_q) + " query heads");
  if (o.ragged()) o.batch = static_cast<int64_t>(o.ragged_q.size());
  if (o.scale && !(std::isfinite(*o.scale) && *o.scale > 0))
    throw UsageError("--scale: must be finite and > 0");
  if (!(std::isfinite(o.softcap) && o.softcap >= 0))
    throw UsageError("--softcap: must be finite and >= 0");
  if (!o.save_inputs_dir.empty() && (!o.q_file.empty() || !o.k_file.empty() || !o.v_file.empty()))
    throw UsageError("--save-inputs: only with random inputs (no --q/--k/--v)");
  const bool any_file = !o.q_file.empty() || !o.k_file.empty() || !o.v_file.empty();
  if (any_file && (o.q_file.empty() || o.k_file.empty() || o.v_file.empty()))
    throw UsageError("--q/--k/--v: give all three files or none");
}

}  // namespace

detail::MaskRule RunOptions::mask_rule() const {
  detail::MaskRule r;
  r.causal = mask.causal;
  r.top_left = mask.align == CausalAlign::top_left;
  r.window_left = mask.window_left;
  r.window_right = mask.window_right;
  r.chunk = mask.chunk_size;
  return r;
}

DType parse_dtype(const std::string& opt, const std::string& v) {
  if (v == "bf16" || v == "bfloat16") return DType::bf16;
  if (v == "f16" || v == "fp16" || v == "float16") return DType::f16;
  if (v == "f32" || v == "fp32" || v == "float32") return DType::f32;
  if (v == "e4m3" || v == "fp8" || v == "float8_e4m3fn") return DType::e4m3;
  throw UsageError(opt + ": unknown dtype '" + v + "' (bf16, f16, f32, e4m3)");
}

Backend parse_backend(const std::string& opt, const std::string& v) {
  if (v == "auto") return Backend::automatic;
  if (v == "reference" || v == "ref") return Backend::reference;
  if (v == "cpu") return Backend::cpu;
  if (v == "cuda" || v == "gpu") return Backend::cuda;
  throw UsageError(opt + ": unknown backend '" + v + "' (auto, reference, cpu, cuda)");
}

CpuIsa parse_cpu_isa(const std::string& opt, const std::string& v) {
  for (CpuIsa i : {CpuIsa::automatic, CpuIsa::portable, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::amx})
    if (v == cpu_isa_name(i)) return i;
  throw UsageError(opt + ": unknown CPU instruction set '" + v + "' (auto, portable, avx2, avx512, amx)");
}

RunOptions parse_run_options(const std::vector<std::string>& args) {
  RunOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!apply_one(run_specs(), o, args, i)) {
      if (args[i].rfind("-", 0) == 0) throw UsageError("unknown option " + args[i]);
      throw UsageError("unexpected argument '" + args[i] + "'");
    }
  }
  check_run(o);
  return o;
}

BenchOptions parse_bench_options(const std::vector<std::string>& args) {
  BenchOptions b;
  b.base.check_rows = 0;
  struct Wrapped {
    bool takes_value;
    std::function<void(BenchOptions&, const std::string&)> apply;
  };
  static const std::map<std::string, Wrapped> bench_only = {
      {"--seqs", {true, [](BenchOptions& o, const std::string& v) { o.seqs = parse_int_list("--seqs", v, 1); }}},
      {"--backends", {true, [](BenchOptions& o, const std::string& v) {
         o.backends.clear();
         size_t b = 0;
         while (true) {
           size_t e = v.find(',', b);
           o.backends.push_back(parse_backend("--backends", v.substr(b, e == std::string::npos ? e : e - b)));
           if (e == std::string::npos) break;
           b = e + 1;
         }
       }}},
      {"--tokens", {true, [](BenchOptions& o, const std::string& v) { o.tokens = parse_int("--tokens", v, 1); }}},
      {"--check", {false, [](BenchOptions& o, const std::string&) { o.check = true; o.base.check_rows = 8; }}},
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (apply_one(bench_only, b, args, i)) continue;
    const std::string name = args[i].substr(0, args[i].find('='));
    if (name == "--q" || name == "--k" || name == "--v" || name == "--out" || name == "--lse-out" ||
        name == "--save-inputs" || name == "--ragged" || name == "--seq" || name == "--seq-q" ||
        name == "--seq-k")
      throw UsageError(name + ": not a bench option (bench sweeps --seqs over random inputs)");
    if (!apply_one(run_specs(), b.base, args, i)) {
      if (args[i].rfind("-", 0) == 0) throw UsageError("unknown option " + args[i]);
      throw UsageError("unexpected argument '" + args[i] + "'");
    }
  }
  check_run(b.base);
  if (b.base.backend != Backend::automatic && b.backends.empty()) b.backends = {b.base.backend};
  return b;
}

std::string usage_text() {
  return R"(usage: longattn run   [options]   one attention forward: time, TFLOP/s, error vs float64 reference
       longattn bench [options]   sweep sequence lengths, print a table
       longattn --help | --version

problem (defaults: bf16, batch 1, seq 4096, 32 query / 8 kv heads, dim 128, causal):
  --batch N            sequences (dense layout)
  --seq N              query and key length; --seq-q N / --seq-k N set them apart
  --heads-q N          query heads                --heads-kv N   kv heads (divides heads-q)
  --dim N              q/k head dim               --dim-v N      v head dim (default: dim)
  --dtype T            input dtype: bf16, f16, f32, e4m3 (fp8 with per-(batch, kv head) descales)
  --out-dtype T        output dtype: bf16, f16, f32 (default: input dtype; bf16 for e4m3)
  --causal / --no-causal   causal mask (default on), bottom-right aligned
  --top-left           align causal/window/chunk masks top-left instead
  --window L,R         sliding window: L keys left, R right of the diagonal (-1: unbounded)
  --chunk N            chunked attention (llama4): a query sees only its own chunk
  --softcap X          s = X * tanh(s / X) (0: off)
  --scale X            softmax scale (default 1/sqrt(dim))
  --sinks              random per-head attention-sink logits
  --lse                also compute the float32 log-sum-exp
  --ragged LENS        ragged batch: comma list of lengths, each LEN or QLEN:KLEN
  --page-size N        paged K/V cache with N tokens per page (random page order)

execution:
  --backend B          auto (cuda if available, else cpu), reference, cpu, cuda
  --threads N          CPU backend threads (default 0: the environment variable
                       LONGATTN_NUM_THREADS if set, else every hardware thread)
  --cpu-isa I          CPU backend kernel: auto (widest available, default), portable,
                       avx2, avx512, amx (bf16/e4m3/f32 on AMX tiles); an ISA this CPU
                       lacks is refused (exit 2)
  --device N           CUDA device ordinal (default 0)
  --sm-margin N        SMs the CUDA kernel leaves free (default 0: every SM)
  --repeat N           timed runs, median reported (default 3 cpu/reference, 20 cuda)
  --warmup N           untimed runs first (default 1)
  --check-rows N       (row, head) pairs checked against the float64 reference, in random
                       blocks of 8 rows plus the first and last row (default 128, 0: skip;
                       the whole output is always scanned for NaN)
  --seed N             random inputs seed
  --quiet              omit the problem and backend lines
  --json               print results as JSON lines (run: one object; bench: one per point)

files (.npy, C order; float32, float16, float64 (read as float32), ml_dtypes bfloat16 and
float8_e4m3fn):
  --q F --k F --v F    inputs: dense (batch, seq, heads, dim) or ragged (tokens, heads, dim)
                       with --ragged; shapes set batch/seq/heads/dim
  --out F              write the output (float32 unless --out-dtype is given)
  --lse-out F          write the LSE (float32; implies --lse)

bench options (plus the problem/execution options above, except --seq and files):
  --seqs LIST          sequence lengths (default 512..4096 on cpu, 1k..16k on cuda)
  --backends LIST      compare backends side by side, e.g. cpu,reference
  --tokens N           keep batch*seq = N (batch = N / seq)
  --check              also check each point against the reference (8 rows)

Exit status: 0 success, 1 reference check failed or runtime error, 2 bad options or
arguments rejected by longattn's validation.
)";
}

}  // namespace longattn::tools
